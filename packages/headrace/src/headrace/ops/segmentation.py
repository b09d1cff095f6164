"""Schemas of the segmentation helpers (random_object_bbox, random_mask_pixel, select_masks) and the crop-window
generators that feed ROI crops and decoders (roi_random_crop, random_crop_generator), with DALI's names, arguments,
defaults and outputs. DALI runs them on the CPU only; headrace's GPU versions give the same numbers (the random
choices are made from the same per-sample streams)."""

import numpy as np

from headrace.output_specs import per_sample_scalar
from headrace.schema import REQUIRED, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

BOX_FORMATS = ("anchor_shape", "start_end", "box")


def _ndim(a: SpecArgs) -> int:
    """The first input's number of dimensions, -1 when unknown."""
    ndim = a.first.ndim
    return -1 if ndim is None else ndim


def _box_outputs(args: dict) -> int:
    """random_object_bbox's outputs: one ('box') or two, and the class label with output_class."""
    return (1 if args.get("format", "anchor_shape") == "box" else 2) + int(bool(args.get("output_class", False)))


def _boxes(a: SpecArgs) -> list[OutputSpec]:
    """int32 box coordinates (one per input dimension; start and end concatenated for 'box'), then the int32 class."""
    ndim = _ndim(a)
    if a.args["format"] == "box":
        specs = [OutputSpec(np.int32, None, (2 * ndim if ndim >= 0 else -1,))]
    else:
        specs = [OutputSpec(np.int32, None, (ndim,))] * 2
    if a.args["output_class"]:
        specs.append(per_sample_scalar(np.int32, "class label"))
    return specs


def _object_rule(given: frozenset[str]) -> str | None:
    """DALI's: ignore_class excludes classes, class_weights and output_class."""
    if "ignore_class" in given:
        clash = sorted(given & {"classes", "class_weights", "output_class"})
        if clash:
            return f"ignore_class excludes {', '.join(clash)}"
    return None


register(OpSchema(
    name="segmentation.random_object_bbox",
    doc="A random object's bounding box in a label map (any number of dimensions, integer or bool labels): with "
        "probability `foreground_prob` a foreground class is drawn (by `class_weights`, or uniformly among the "
        "classes present), its blobs are found (face-connected pixels of that label), those smaller than "
        "`threshold` on any axis are dropped, the `k_largest` by box volume kept, and one is drawn; a class with no "
        "blob left is set aside and another drawn. Otherwise, or when nothing qualifies, the whole input. With "
        "ignore_class, blobs of every class are drawn from alike.",
    args=(
        Arg("background", "int", None, "The background label; default 0, or one below the smallest class when 0 "
            "is one of `classes`.", tensor_input=True),
        Arg("classes", "int", None, "The foreground labels; default every label present but the background.",
            list_of=True, tensor_input=True),
        Arg("class_weights", "float", None, "Relative probabilities of `classes` (without classes: of the labels "
            "1, 2, ... skipping the background).", list_of=True, tensor_input=True),
        Arg("foreground_prob", "float", 1.0, "Probability of drawing a foreground box.", tensor_input=True),
        Arg("format", "str", "anchor_shape", "Outputs: 'anchor_shape' (two), 'start_end' (two: start and "
            "one-past-end) or 'box' (one: start and end concatenated).", choices=BOX_FORMATS),
        Arg("ignore_class", "bool", False, "Draw among all blobs alike instead of a class first."),
        Arg("k_largest", "int", None, "Keep only the k largest boxes (by volume) of the drawn class.",
            limits=Limits(1, 1 << 31)),
        Arg("output_class", "bool", False, "A further output: the drawn class (the background for a whole-input "
            "box)."),
        Arg("threshold", "int", None, "Smallest box extent per axis (one value for all axes, or one per axis).",
            list_of=True, tensor_input=True),
        Arg("cache_objects", "bool", False, "Accepted for DALI compatibility; headrace finds the blobs every time."),
    ),
    min_inputs=1, max_inputs=1, num_outputs=_box_outputs, devices=("cpu", "gpu"), rule=_object_rule,
    random=True, state="rng", output_spec=_boxes,
))


def _pixel(a: SpecArgs) -> list[OutputSpec]:
    """int64 coordinates of the drawn pixel, one per input dimension."""
    return [OutputSpec(np.int64, None, (_ndim(a),))]


def _pixel_rule(given: frozenset[str]) -> str | None:
    """DALI's: value and threshold exclude each other."""
    return "value and threshold exclude each other" if {"value", "threshold"} <= given else None


register(OpSchema(
    name="segmentation.random_mask_pixel",
    doc="A random pixel of a mask, as coordinates (int64, one per dimension): with `foreground` nonzero drawn "
        "uniformly among the foreground pixels (equal to `value`, or above `threshold`), else (or when there are "
        "none) among all pixels.",
    args=(
        Arg("value", "int", None, "Foreground is the pixels equal to it (integer masks).", tensor_input=True),
        Arg("threshold", "float", 0.0, "Foreground is the pixels above it.", tensor_input=True),
        Arg("foreground", "int", 0, "Nonzero: draw a foreground pixel.", tensor_input=True),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), rule=_pixel_rule,
    random=True, state="rng", output_spec=_pixel,
))


def _selected(a: SpecArgs) -> list[OutputSpec]:
    """The selected polygons (int32 rows mask_id, start, end) and their vertices (the vertices' type)."""
    vertices = a.inputs[2] if len(a.inputs) > 2 else OutputSpec()
    return [OutputSpec(np.int32, None, (-1, 3)), OutputSpec(vertices.dtype, None, (-1, -1))]


register(OpSchema(
    name="segmentation.select_masks",
    doc="Keeps the polygons of the masks listed in `mask_ids` (inputs: mask_ids, polygons as rows (mask_id, "
        "start_vertex, end_vertex), vertices as rows of coordinates, as the COCO reader gives them): mask by mask "
        "in the order of mask_ids, with their vertex ranges renumbered, and the vertices they use. With "
        "reindex_masks, a mask's id becomes its position in mask_ids. A mask of several polygons keeps them all "
        "(DALI 2.4 keeps only its last one); an id absent from the polygons is the sample's error, as in DALI.",
    args=(Arg("reindex_masks", "bool", False, "Replace each mask id by its index in mask_ids."),),
    min_inputs=3, max_inputs=3, num_outputs=2, devices=("cpu", "gpu"),
    state="none", output_spec=_selected,
))


def _window_start(a: SpecArgs) -> list[OutputSpec]:
    """int64 start coordinates of the cropping window, one per dimension of crop_shape."""
    crop = a.literal("crop_shape")
    return [OutputSpec(np.int64, None, (len(crop) if crop else -1,))]


def _roi_rule(given: frozenset[str]) -> str | None:
    """DALI's: the ROI's end is roi_end or roi_shape, one of them."""
    ways = given & {"roi_end", "roi_shape"}
    return None if len(ways) == 1 else "give exactly one of roi_end and roi_shape"


register(OpSchema(
    name="roi_random_crop",
    doc="The start of a `crop_shape` window placed at random so that it holds as much of the region of interest "
        "as it can: inside the ROI when the ROI is larger, around it when smaller, and inside the input's shape "
        "(`in_shape`, or the optional input's shape) when one is given. int64, one value per dimension.",
    args=(
        Arg("crop_shape", "int", REQUIRED, "The window's extents.", list_of=True, tensor_input=True),
        Arg("roi_start", "int", REQUIRED, "The ROI's start.", list_of=True, tensor_input=True),
        Arg("roi_end", "int", None, "The ROI's end (exclusive); excludes roi_shape.", list_of=True,
            tensor_input=True),
        Arg("roi_shape", "int", None, "The ROI's extents; excludes roi_end.", list_of=True, tensor_input=True),
        Arg("in_shape", "int", None, "The input's shape, to keep the window inside (not with an input).",
            list_of=True, tensor_input=True),
    ),
    min_inputs=0, max_inputs=1, devices=("cpu", "gpu"), rule=_roi_rule,
    random=True, state="rng", output_spec=_window_start,
))


def _crop_window(a: SpecArgs) -> list[OutputSpec]:
    """The window's int32 anchor (y, x) and shape (h, w)."""
    return [OutputSpec(np.int32, None, (2,)), OutputSpec(np.int32, None, (2,))]


register(OpSchema(
    name="random_crop_generator",
    doc="A random crop window of an image whose shape (HW or HWC) is the input, by DALI's rule: area fraction "
        "uniform in `random_area`, aspect ratio (w/h) log-uniform in `random_aspect_ratio`, up to `num_attempts` "
        "tries, then the largest window the ranges allow; placed uniformly. Outputs anchor (y, x) and shape (h, w), "
        "int32, ready for slice or decoders.image_slice with axis_names='HW'.",
    args=(
        Arg("random_area", "float", [0.08, 1.0], "Range of the window's area as a fraction of the image's.",
            list_of=True, list_len=(1, 2)),
        Arg("random_aspect_ratio", "float", [0.75, 1.333333], "Range of the window's width/height ratio.",
            list_of=True, list_len=(1, 2)),
        Arg("num_attempts", "int", 10, "Tries at a window in range before the fallback."),
    ),
    min_inputs=1, max_inputs=1, num_outputs=2, devices=("cpu", "gpu"),
    random=True, state="rng", output_spec=_crop_window,
))
