"""Schemas of the readers of data-set formats: numpy files (readers.numpy), COCO detection sets (readers.coco) and
LMDB databases of Caffe Datums and Caffe2 TensorProtos (readers.caffe, readers.caffe2), with DALI's names, arguments,
defaults and outputs. Epochs, shards, padding, shuffling and checkpoints are readers.file's."""

import numpy as np

from headrace.schema import (
    DALI_HINT,
    FILES_PERMUTED,
    MAPPING_READER_ARGS,
    READER_BUFFER_ARGS,
    READER_COMPAT_ARGS,
    REQUIRED,
    SHARD_ARGS,
    Arg,
    OpSchema,
    OutputSpec,
    SpecArgs,
    registrar,
    shuffle_args,
)

register = registrar(__name__)

_SHUFFLE_ARGS = (
    *shuffle_args(FILES_PERMUTED + " (LMDB records keep their key order)"),
    Arg("seed", "int", -1, "Seed of random_shuffle; -1 derives it from the pipeline seed."),
)
_COMPAT_ARGS = READER_COMPAT_ARGS
_AFTER_EPOCH_ARGS = (
    Arg("shuffle_after_epoch", "bool", False, "Shuffle the whole data set every epoch, the same way in every shard "
        "(seed: shuffle_after_epoch_seed, else a fixed one); implies stick_to_shard, and excludes random_shuffle and "
        "an explicit stick_to_shard=True."),
    Arg("shuffle_after_epoch_seed", "int", None, "Seed of shuffle_after_epoch's permutations."),
)


# readers.numpy

def _roi_rule(given: frozenset[str]) -> str | None:
    """At most one way to give the ROI's start and one to give its end."""
    for group in (("roi_start", "rel_roi_start"), ("roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape")):
        both = [name for name in group if name in given]
        if len(both) > 1:
            return f"{' and '.join(both)} are mutually exclusive"
    return None


def _numpy_read(a: SpecArgs) -> list[OutputSpec]:
    """The array of each .npy file (its own element type and shape; cut to the ROI when one is given)."""
    return [OutputSpec(None, None, None, "numpy array")]


register(OpSchema(
    name="readers.numpy",
    doc="Reads arrays from .npy files (file_root + file_filter, a file_list, or files), optionally only a region of "
        "interest of each. The files of file_root are its own and those of its direct sub-folders, in DALI's order "
        "(the root's files sorted, then each sub-folder's sorted); file_filter matches case-sensitively. Big-endian "
        "files are refused, as DALI; Fortran-order files are read as numpy.load reads them. On device='gpu' the "
        "arrays are read into GPU memory through kvikio (GPUDirect Storage, or kvikio's compatibility mode where GDS "
        "is not set up; headrace_kernels.gpu.numpy_read.last_mode says which ran).",
    args=(
        Arg("file_root", "str", None, "Folder of the files; relative file names are taken from it."),
        Arg("file_filter", "str", "*.npy", "Glob pattern of the files taken from file_root."),
        Arg("file_list", "str", None, "A text file listing one file per line (relative to file_root)."),
        Arg("files", "str", None, "Explicit file names (relative to file_root when it is given).", list_of=True),
        Arg("roi_start", "int", None, "Start of the region of interest, in elements, per axis of roi_axes (all "
            "axes when roi_axes is empty).", list_of=True),
        Arg("rel_roi_start", "float", None, "Start of the region of interest relative to the extent (0..1).",
            list_of=True),
        Arg("roi_end", "int", None, "End (exclusive) of the region of interest, in elements.", list_of=True),
        Arg("rel_roi_end", "float", None, "End of the region of interest relative to the extent.", list_of=True),
        Arg("roi_shape", "int", None, "Shape of the region of interest, in elements.", list_of=True),
        Arg("rel_roi_shape", "float", None, "Shape of the region of interest relative to the extent.", list_of=True),
        Arg("roi_axes", "int", [], "The axes the ROI arguments give; empty: all axes, in order.", list_of=True),
        Arg("out_of_bounds_policy", "str", "error", "A ROI reaching out of the array: 'error', 'trim_to_shape' it, "
            "or 'pad' it with fill_value.", choices=("error", "trim_to_shape", "pad")),
        Arg("fill_value", "float", 0.0, "The value of the padding with out_of_bounds_policy='pad'."),
        *_SHUFFLE_ARGS,
        *_AFTER_EPOCH_ARGS,
        *SHARD_ARGS,
        *_COMPAT_ARGS,
        Arg("cache_header_information", "bool", False, "Keep the parsed header of each file, parsed again only "
            "when the file's size or modification time changes."),
        Arg("register_buffers", "bool", True, DALI_HINT),
        Arg("use_o_direct", "bool", False, DALI_HINT),
        *READER_BUFFER_ARGS,
    ),
    devices=("cpu", "gpu"),
    stateful=True,
    batch_op=True,
    rule=_roi_rule,
    state="reader", output_spec=_numpy_read,
))


# readers.coco

def _coco_outputs(args: dict) -> int:
    """images, boxes, labels, then polygons + vertices, masks and image ids as asked."""
    polygons = bool(args.get("polygon_masks", False) or args.get("masks", False))
    return 3 + 2 * polygons + bool(args.get("pixelwise_masks", False)) + bool(args.get("image_ids", False))


def _coco_read(a: SpecArgs) -> list[OutputSpec]:
    """Encoded image (uint8), boxes (float32 (N, 4)), labels (int32 (N,)), then polygons, vertices, masks, ids."""
    specs = [OutputSpec(np.uint8, None, (-1,), "encoded image"), OutputSpec(np.float32, None, (-1, 4), "boxes"),
             OutputSpec(np.int32, None, (-1,), "labels")]
    if a.args["polygon_masks"] or a.args["masks"]:
        specs += [OutputSpec(np.int32, None, (-1, 3), "polygons (mask, first vertex, end vertex)"),
                  OutputSpec(np.float32, None, (-1, 2), "vertices")]
    if a.args["pixelwise_masks"]:
        specs.append(OutputSpec(np.int32, "HWC", (-1, -1, 1), "pixelwise mask of labels"))
    if a.args["image_ids"]:
        specs.append(OutputSpec(np.int32, None, (1,), "image id"))
    return specs


def _coco_rule(given: frozenset[str]) -> str | None:
    """annotations_file is needed (headrace reads no preprocessed annotations)."""
    return None if "annotations_file" in given else "give annotations_file"


register(OpSchema(
    name="readers.coco",
    doc="Reads a COCO detection data set: each image's file (encoded bytes) with its boxes and labels, and as asked "
        "its polygons and vertices, a pixelwise mask of labels and its image id. Images are taken in the order of "
        "the annotation file's `images`; annotations whose box is narrower or lower than size_threshold are left "
        "out, and so are crowd annotations with include_iscrowd=False.",
    args=(
        Arg("file_root", "str", REQUIRED, "Folder of the images; the file_name of each image is relative to it."),
        Arg("annotations_file", "str", "", "The COCO annotation file (JSON)."),
        Arg("images", "str", None, "The image files to read (file_name as the annotation file has it), in this "
            "order, repeats included; default: every image, in the order of the ids.", list_of=True),
        Arg("ltrb", "bool", False, "Boxes as (left, top, right, bottom) instead of COCO's (x, y, width, height)."),
        Arg("ratio", "bool", False, "Boxes and vertices relative to the image's width and height."),
        Arg("skip_empty", "bool", False, "Leave out images without a (kept) annotation."),
        Arg("size_threshold", "float", 0.1, "Leave out annotations whose box width or height is below this."),
        Arg("image_ids", "bool", False, "Output each image's id (int32)."),
        Arg("polygon_masks", "bool", False, "Output the polygons (mask index, first vertex, end vertex) and their "
            "vertices (x, y) of the annotations' segmentations."),
        Arg("masks", "bool", False, "Deprecated form of polygon_masks: the polygon rows count coordinates (twice "
            "the vertices)."),
        Arg("pixelwise_masks", "bool", False, "Output an (H, W, 1) int32 mask holding each pixel's label (0: none); "
            "overlapping objects: the larger label wins; a label's objects are its polygons when it has any, else its "
            "RLEs (as DALI)."),
        Arg("avoid_class_remapping", "bool", False, "Labels are the category ids as they are, instead of 1..C in "
            "the order of the sorted category ids."),
        Arg("include_iscrowd", "bool", True, "Keep the annotations marked iscrowd=1."),
        *_SHUFFLE_ARGS,
        *_AFTER_EPOCH_ARGS,
        *SHARD_ARGS,
        *MAPPING_READER_ARGS,
        *READER_BUFFER_ARGS,
    ),
    num_outputs=_coco_outputs,
    stateful=True,
    batch_op=True,
    rule=_coco_rule,
    state="reader", output_spec=_coco_read,
))


# readers.caffe, readers.caffe2

def _caffe_outputs(args: dict) -> int:
    """The image and the label, as image_available and label_available ask."""
    return bool(args.get("image_available", True)) + bool(args.get("label_available", True))


def _caffe_read(a: SpecArgs) -> list[OutputSpec]:
    """The Datum's image (encoded bytes, or (H, W, C) uint8 raw) and its label (int32 (1,)), as asked."""
    return [*([OutputSpec(np.uint8, None, None, "image")] if a.args["image_available"] else []),
            *([OutputSpec(np.int32, None, (1,), "label")] if a.args["label_available"] else [])]


register(OpSchema(
    name="readers.caffe",
    doc="Reads Caffe Datum records from an LMDB database, in the database's key order: the image (encoded bytes, "
        "or raw (H, W, C) uint8 when the Datum says encoded=false) and the label.",
    args=(
        Arg("path", "str", REQUIRED, "The LMDB database (its folder).", list_of=True),
        Arg("image_available", "bool", True, "Output the image."),
        Arg("label_available", "bool", True, "Output the label."),
        *_SHUFFLE_ARGS,
        *SHARD_ARGS,
        *_COMPAT_ARGS,
        *READER_BUFFER_ARGS,
    ),
    num_outputs=_caffe_outputs,
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_caffe_read,
))

CAFFE2_LABEL_TYPES = {0: "single label", 1: "multi-label sparse", 2: "multi-label dense",
                      3: "multi-label weighted sparse", 4: "no label"}


def _caffe2_outputs(args: dict) -> int:
    """The image, the label, the additional inputs and the box, as the arguments ask."""
    return (bool(args.get("image_available", True)) + (args.get("label_type", 0) != 4)
            + int(args.get("additional_inputs", 0)) + bool(args.get("bbox", False)))


def _caffe2_read(a: SpecArgs) -> list[OutputSpec]:
    """Image (encoded or raw uint8), label (int32 or float32), additional tensors, box (int32 (4,)), as asked."""
    specs = [OutputSpec(np.uint8, None, None, "image")] if a.args["image_available"] else []
    if a.args["label_type"] != 4:
        specs.append(OutputSpec(np.float32 if a.args["label_type"] == 3 else None, None, (-1,), "label"))
    specs += [OutputSpec(None, None, (-1,), "additional input")] * a.args["additional_inputs"]
    if a.args["bbox"]:
        specs.append(OutputSpec(np.int32, None, (4,), "box"))
    return specs


register(OpSchema(
    name="readers.caffe2",
    doc="Reads Caffe2 TensorProtos records from an LMDB database, in the database's key order: the image (a STRING "
        "proto: encoded bytes; a BYTE proto: raw (H, W, C) uint8), the label as label_type says, "
        "`additional_inputs` further tensors, and a box (four int32) when the record has one.",
    args=(
        Arg("path", "str", REQUIRED, "The LMDB database (its folder).", list_of=True),
        Arg("image_available", "bool", True, "The records hold an image, first."),
        Arg("label_type", "int", 0, "0: one label; 1: sparse indices into a one-hot vector of num_labels; 2: a dense "
            "vector; 3: sparse indices with weights (float32); 4: no label.", choices=(0, 1, 2, 3, 4)),
        Arg("num_labels", "int", 1, "The length of the label vector for label_type 1 and 3."),
        Arg("additional_inputs", "int", 0, "How many tensors follow the label, each an output of its own."),
        Arg("bbox", "bool", False, "Output the box of each record (a last INT32 proto of four values)."),
        *_SHUFFLE_ARGS,
        *SHARD_ARGS,
        *_COMPAT_ARGS,
        *READER_BUFFER_ARGS,
    ),
    num_outputs=_caffe2_outputs,
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_caffe2_read,
))
