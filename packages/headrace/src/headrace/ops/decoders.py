"""Schemas of the image decoders."""

import numpy as np

from headrace.enums import DALIDataType, DALIImageType
from headrace.schema import Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)
CHANNELS = {DALIImageType.RGB: 3, DALIImageType.BGR: 3, DALIImageType.YCbCr: 3, DALIImageType.GRAY: 1}
"""Channels of a decoded image, by `output_type` (ANY_DATA: the file's)."""

_DALI_HINT = "Accepted for DALI compatibility; no effect in headrace."

MAX_PIXELS = 178_956_970
"""`max_pixels`' default: Pillow's DecompressionBombError threshold (2 x `PIL.Image.MAX_IMAGE_PIXELS`): it passes
every camera photo (medium-format frames are about 150 megapixels) and refuses a forged 30000x30000 header."""

HYBRID_HUFFMAN_THRESHOLD = 1_000_000
"""`hybrid_huffman_threshold`'s default, DALI's and nvImageCodec's CUDA JPEG decoder's (pixels)."""

DECODER_ARGS = (
    Arg("output_type", "image_type", DALIImageType.RGB, "Colour space of the output: RGB, BGR, GRAY or YCbCr."),
    Arg("dtype", "dtype", DALIDataType.UINT8, "Element type of the output; only UINT8 is supported.",
        choices=(DALIDataType.UINT8,)),
    Arg("adjust_orientation", "bool", True, "Apply the EXIF orientation."),
    Arg("max_pixels", "int", MAX_PIXELS,
        "Largest image decoded, in pixels (height x width as its header states; with image_random_crop too, which "
        "decodes only a window of it). A larger one fails as its sample's error, from its header alone, before "
        "anything is allocated: a decompression bomb costs milliseconds, not its claimed memory. The default, "
        f"{MAX_PIXELS:,}, is Pillow's bomb threshold (2 x MAX_IMAGE_PIXELS): it passes 100-150 megapixel photos "
        "and refuses 30000x30000. 0: no limit. headrace's own: DALI has no such argument.",
        limits=Limits(0, 1 << 62)),
    Arg("on_error", "str", "raise", "An image that cannot be decoded: 'raise' an error naming the sample, its file "
        "and the op, or 'skip' it: its slot gets the reader's next sample (every op before runs on it), the batch "
        "stays full and the epoch keeps its length (a repeat at its end); a warning per batch, and Pipeline.skipped "
        "lists what was skipped. Needs readers that can give replacements (not external_source). headrace's own.",
        choices=("raise", "skip")),
    Arg("hw_decoder_load", "float", 0.65, "Share of images sent to the hardware JPEG decoder (mixed only)."),
    Arg("hybrid_huffman_threshold", "int", HYBRID_HUFFMAN_THRESHOLD, "Mixed only: the CUDA JPEG decoder "
        "Huffman-decodes images of more pixels (height x width) than this on the GPU, and smaller ones on the CPU "
        "threads (nvImageCodec's `hybrid_huffman_threshold`; its default and DALI's).", limits=Limits(0, 1 << 62)),
    Arg("use_fast_idct", "bool", False, _DALI_HINT),
    Arg("jpeg_fancy_upsampling", "bool", True, "Mixed only: upsample JPEG chroma by interpolation, as the CPU "
        "decoder (libjpeg-turbo) does, so that mixed and CPU decodes agree closely; false: by replication, as DALI's "
        "mixed decoder does by default (DALI's default is false; headrace's keeps GPU and CPU pixels close)."),
    Arg("preallocate_width_hint", "int", 0, "Mixed only: where this or preallocate_height_hint is given, the "
        "hardware JPEG decoder's resources are made with the decoder, for the pipeline's batch of images of about "
        "this size, rather than at the decodes that first need them. 0: not given.", limits=Limits(0, 1 << 20)),
    Arg("preallocate_height_hint", "int", 0, "Mixed only: the image height for the same (preallocate_width_hint).",
        limits=Limits(0, 1 << 20)),
    Arg("device_memory_padding", "int", 16 << 20, "Mixed only, with the executor option decoder_memory='pool': "
        "the decoder's device buffers grow in steps of this many bytes."),
    Arg("host_memory_padding", "int", 8 << 20, "Mixed only, with the executor option decoder_memory='pool': the "
        "decoder's pinned host buffers grow in steps of this many bytes."),
    Arg("device_memory_padding_jpeg2k", "int", 0, _DALI_HINT),
    Arg("host_memory_padding_jpeg2k", "int", 0, _DALI_HINT),
    Arg("affine", "bool", True, _DALI_HINT),
    Arg("memory_stats", "bool", False, _DALI_HINT),
)

RANDOM_CROP_ARGS = (
    Arg("random_area", "float", [0.08, 1.0], "Range of the crop's area as a fraction of the image's.",
        list_of=True, list_len=(1, 2)),
    Arg("random_aspect_ratio", "float", [3 / 4, 4 / 3], "Range of the crop's width/height ratio (log-uniform).",
        list_of=True, list_len=(1, 2)),
    Arg("num_attempts", "int", 10, "Tries at a window that fits before falling back to a centre crop."),
)

def decoded(a: SpecArgs) -> list[OutputSpec]:
    """Decoded images: uint8 HWC in the colour space `output_type` (height and width vary)."""
    output_type = a.args["output_type"]
    return [OutputSpec(np.uint8, "HWC", (-1, -1, CHANNELS.get(output_type, -1)), output_type.name)]


CACHE_ARGS = (
    Arg("cache_size", "int", 0, "DALI's cache of decoded images in GPU memory (mixed), in MB: " + _DALI_HINT +
        " Its outputs are the same with or without it; headrace decodes every image each time.",
        limits=Limits(0, 1 << 40)),
    Arg("cache_threshold", "int", 0, "The smallest image DALI's decoder cache keeps, in bytes. " + _DALI_HINT),
    Arg("cache_type", "str", "", "DALI's decoder cache policy ('threshold' or 'largest'). " + _DALI_HINT),
    Arg("cache_debug", "bool", False, "DALI's decoder cache's debug output. " + _DALI_HINT),
    Arg("cache_batch_copy", "bool", True, "How DALI's decoder cache copies cached images. " + _DALI_HINT),
)
"""DALI's decoded-image cache (decoders.image, mixed): a speed feature that changes no output."""

register(OpSchema(
    name="decoders.image",
    doc="Decodes encoded images (JPEG, PNG, TIFF, JPEG 2000, BMP, WebP, ...) into HWC uint8.",
    args=DECODER_ARGS + CACHE_ARGS,
    min_inputs=1, max_inputs=1,
    devices=("cpu", "mixed"),
    state="none", output_spec=decoded,
))

register(OpSchema(
    name="decoders.image_random_crop",
    doc="Decodes only a random window of each image (Inception-style area and aspect ratio): the ROI decode is "
        "where the speed comes from.",
    args=DECODER_ARGS + RANDOM_CROP_ARGS,
    min_inputs=1, max_inputs=1,
    devices=("cpu", "mixed"),
    random=True,
    state="rng", output_spec=decoded,
))

CROP_ARGS = (
    Arg("crop", "float", None, "Window size (crop_H, crop_W); excludes crop_h / crop_w.", list_of=True,
        list_len=(2, 3), tensor_input=True),
    Arg("crop_h", "float", 0.0, "Window height in pixels, with crop_w (none given: the whole image).",
        tensor_input=True),
    Arg("crop_w", "float", 0.0, "Window width in pixels, with crop_h.", tensor_input=True),
    Arg("crop_d", "float", 0.0, "Window depth, for volumes only: " + _DALI_HINT, tensor_input=True),
    Arg("crop_pos_x", "float", 0.5, "Horizontal position of the window, 0 (left) to 1 (right): its left column is "
        "crop_pos_x * (W - crop_W).", tensor_input=True),
    Arg("crop_pos_y", "float", 0.5, "Vertical position of the window, 0 (top) to 1 (bottom): its top row is "
        "crop_pos_y * (H - crop_H).", tensor_input=True),
    Arg("crop_pos_z", "float", 0.5, "Depth position, for volumes only: " + _DALI_HINT, tensor_input=True),
    Arg("rounding", "str", "round", "How the window's position becomes whole pixels: 'round' (half away from zero) "
        "or 'truncate'.", choices=("round", "truncate")),
)

SLICE_ARGS = (
    Arg("axes", "int", None, "The axes the coordinates refer to, in order (default [1, 0]: x before y); negative "
        "counts from the end.", list_of=True),
    Arg("axis_names", "str", None, "The axes by the letters of HWC (default 'WH'); takes precedence over axes."),
    Arg("normalized_anchor", "bool", True, "A float anchor input is a fraction of the image's extents."),
    Arg("normalized_shape", "bool", True, "A float shape input is a fraction of the image's extents."),
    Arg("start", "int", None, "Start coordinates.", list_of=True, tensor_input=True),
    Arg("rel_start", "float", None, "Start coordinates as fractions of the extents.", list_of=True, tensor_input=True),
    Arg("end", "int", None, "End coordinates (exclusive).", list_of=True, tensor_input=True),
    Arg("rel_end", "float", None, "End coordinates as fractions of the extents.", list_of=True, tensor_input=True),
    Arg("shape", "int", None, "Extents of the window.", list_of=True, tensor_input=True),
    Arg("rel_shape", "float", None, "Extents as fractions of the image's.", list_of=True, tensor_input=True),
)


def _crop_rule(given: frozenset[str]) -> str | None:
    """DALI's: the window's size is `crop` or crop_h with crop_w, not both."""
    extents = sorted(given & {"crop_h", "crop_w", "crop_d"})
    if "crop" in given and extents:
        return f"crop and {', '.join(extents)} exclude each other"
    if len(given & {"crop_h", "crop_w"}) == 1:
        return "crop_h and crop_w must be given together"
    return None


def _slice_rule(given: frozenset[str]) -> str | None:
    """DALI's: one way to give the start and one to give the end; axes and axis_names exclude each other."""
    for group in (("start", "rel_start"), ("end", "rel_end", "shape", "rel_shape"), ("axes", "axis_names")):
        both = sorted(given & set(group))
        if len(both) > 1:
            return f"{' and '.join(both)} exclude each other"
    return None


def _decoded_crop(a: SpecArgs) -> list[OutputSpec]:
    """Decoded windows: uint8 HWC in the colour space `output_type`, of the crop's size where it is fixed."""
    (spec,) = decoded(a)
    crop = a.literal("crop")
    extents = crop if crop and len(crop) == 2 else (a.literal("crop_h"), a.literal("crop_w"))
    if all(extents):  # given, and not per sample (a missing crop_h / crop_w is the whole image: unknown)
        spec = OutputSpec(spec.dtype, spec.layout, (int(extents[0]), int(extents[1]), spec.dims[2]), spec.note)
    return [spec]


_ROI_DOC = (" Only the window is decoded where the format allows it (nvImageCodec's ROI decode), on the CPU and "
            "mixed alike; coordinates refer to the image as displayed (after its EXIF orientation, when "
            "adjust_orientation). A window that is empty or reaches outside the image is the sample's error, as in "
            "DALI.")

register(OpSchema(
    name="decoders.image_crop",
    doc="Decodes a fixed-size window of each image: `crop` (or crop_h with crop_w; fractions truncated, as DALI's) "
        "placed at (crop_pos_y, crop_pos_x) as fractions of the free space." + _ROI_DOC,
    args=DECODER_ARGS + CROP_ARGS,
    min_inputs=1, max_inputs=1,
    devices=("cpu", "mixed"), rule=_crop_rule,
    state="none", output_spec=_decoded_crop,
))

register(OpSchema(
    name="decoders.image_slice",
    doc="Decodes a window of each image given as slice gives it: positional inputs `anchor` and `shape` (1D per "
        "sample; integers are absolute, floats normalized unless normalized_anchor / normalized_shape are False), "
        "or the arguments start / rel_start with end / rel_end / shape / rel_shape, over `axes` or `axis_names` "
        "(default 'WH': x before y). Coordinates round half away from zero." + _ROI_DOC,
    args=DECODER_ARGS + SLICE_ARGS,
    min_inputs=1, max_inputs=3,
    devices=("cpu", "mixed"), rule=_slice_rule,
    state="none", output_spec=decoded,
))
