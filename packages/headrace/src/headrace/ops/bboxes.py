"""Schemas of the bounding-box ops of detection pipelines: bb_flip, coord_flip, bbox_paste, bbox_rotate, box_encoder
and random_bbox_crop, with DALI's names, arguments and outputs. Boxes are float32 rows of 4 coordinates (2D) or 6
(3D), relative to the image ([0, 1]); labels are int32."""

from __future__ import annotations

import itertools

import numpy as np

from headrace.errors import SchemaError
from headrace.schema import REQUIRED, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

FRACTION = Limits(0.0, 1.0)
"""An IoU, an overlap or a fraction of an area."""

_LTRB = Arg("ltrb", "bool", False, "True for boxes as [left, top, right, bottom], False for [x, y, width, height].")
START_END_2D, START_SHAPE_2D = "xyXY", "xyWH"
START_END_3D, START_SHAPE_3D = "xyzXYZ", "xyzWHD"


def bbox_layouts(ndim: int | None = None) -> frozenset[str]:
    """Every box layout DALI reads: a permutation of xyXY / xyWH (2D) or xyzXYZ / xyzWHD (3D)."""
    bases = {2: (START_END_2D, START_SHAPE_2D), 3: (START_END_3D, START_SHAPE_3D)}
    chosen = [b for d, pair in bases.items() if ndim in (None, d) for b in pair]
    return frozenset("".join(p) for base in chosen for p in itertools.permutations(base))


def check_bbox_layout(op: str, layout: str | None) -> None:
    """A SchemaError naming the op and `bbox_layout` when the layout is none DALI knows."""
    if layout is not None and (len(layout) not in (4, 6) or layout not in bbox_layouts(len(layout) // 2)):
        raise SchemaError(f"{op}: argument 'bbox_layout': {layout!r} is not a permutation of {START_END_2D!r} or "
                          f"{START_SHAPE_2D!r} (2D boxes), {START_END_3D!r} or {START_SHAPE_3D!r} (3D boxes)")


def _boxes_like_input(a: SpecArgs) -> list[OutputSpec]:
    """Float32 boxes of the input's shape, moved as the op says."""
    return [OutputSpec(np.float32, a.first.layout, a.first.dims)]


register(OpSchema(
    name="bb_flip",
    doc="Flips boxes (relative coordinates, [0, 1]) horizontally and/or vertically, as a flip of the image does: "
        "x -> 1 - x. The input is float32, any shape of 4k elements (boxes one after the other); the output has "
        "the input's shape.",
    args=(
        _LTRB,
        Arg("horizontal", "int", 1, "1 flips left-right.", tensor_input=True),
        Arg("vertical", "int", 0, "1 flips top-bottom.", tensor_input=True),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_boxes_like_input,
))


register(OpSchema(
    name="coord_flip",
    doc="Flips points (rows of 1 to 3 coordinates, float32 [N, D]) about a center per axis: c -> 2 * center - c "
        "on the flipped axes. `layout` names the coordinates of a row ('x', 'xy', 'xyz' by default).",
    args=(
        Arg("layout", "str", "", "Order of the coordinates of a row: letters x, y, z (default by the row length)."),
        Arg("flip_x", "int", 1, "1 flips the x coordinate.", tensor_input=True),
        Arg("flip_y", "int", 0, "1 flips the y coordinate.", tensor_input=True),
        Arg("flip_z", "int", 0, "1 flips the z coordinate.", tensor_input=True),
        Arg("center_x", "float", 0.5, "Flip center of x.", tensor_input=True),
        Arg("center_y", "float", 0.5, "Flip center of y.", tensor_input=True),
        Arg("center_z", "float", 0.5, "Flip center of z.", tensor_input=True),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_boxes_like_input,
))

register(OpSchema(
    name="bbox_paste",
    doc="Moves boxes as pasting the image onto a canvas `ratio` times larger does (fn.paste): corners become "
        "x / ratio + paste_x * (ratio - 1) / ratio, sizes (xywh) w / ratio; the offset is nudged down so that "
        "boxes inside [0, 1] stay inside, as in DALI.",
    args=(
        Arg("ratio", "float", REQUIRED, "Canvas size over the input size (at least 1).", tensor_input=True),
        _LTRB,
        Arg("paste_x", "float", 0.5, "Horizontal place of the paste: 0 left, 1 right.", tensor_input=True),
        Arg("paste_y", "float", 0.5, "Vertical place of the paste: 0 top, 1 bottom.", tensor_input=True),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_boxes_like_input,
))


def _encoded(a: SpecArgs) -> list[OutputSpec]:
    """Per anchor: its encoded box (float32 [M, 4]) and its label (int32 [M], 0 for background)."""
    anchors = a.args.get("anchors") or []
    if len(anchors) % 4:
        raise SchemaError(f"box_encoder: argument 'anchors': expected a multiple of 4 values (ltrb per anchor), "
                          f"got {len(anchors)}")
    m = len(anchors) // 4
    return [OutputSpec(np.float32, None, (m, 4)), OutputSpec(np.int32, None, (m,))]


register(OpSchema(
    name="box_encoder",
    doc="SSD's box encoding: each ground-truth box (ltrb, float32 [N, 4]; labels int32 [N]) is matched to the "
        "anchors it overlaps by IoU > `criteria`, and to its best anchor always; each anchor takes its "
        "best-overlapping box. Outputs, per anchor, the matched box as [cx, cy, w, h] (or, with `offset`, its "
        "normalized offsets from the anchor) and its label; unmatched anchors keep themselves (zeros with "
        "`offset`) and label 0.",
    args=(
        Arg("anchors", "float", REQUIRED, "The anchors, ltrb, 4 values each, one after the other.", list_of=True),
        Arg("criteria", "float", 0.5, "IoU above which a box matches an anchor (0 to 1).", limits=FRACTION),
        Arg("offset", "bool", False, "Output ((box * scale - anchor * scale) - means) / stds offsets (log of the "
            "size ratios) instead of boxes."),
        Arg("scale", "float", 1.0, "Scale of boxes and anchors before the offsets are taken."),
        Arg("means", "float", [0.0, 0.0, 0.0, 0.0], "Means of the offsets (x, y, w, h).", list_of=True,
            list_len=(4, 4)),
        Arg("stds", "float", [1.0, 1.0, 1.0, 1.0], "Standard deviations of the offsets (x, y, w, h).",
            list_of=True, list_len=(4, 4)),
    ),
    min_inputs=2, max_inputs=2, num_outputs=2, devices=("cpu", "gpu"),
    state="none", output_spec=_encoded,
))


def _rotate_outputs(args: dict, num_inputs: int = 2) -> int:
    """The boxes, and the labels kept with them when labels are given (the second input)."""
    return 2 if num_inputs > 1 else 1


def _rotated(a: SpecArgs) -> list[OutputSpec]:
    """The rotated boxes (float32 [K, 4]), and with labels the labels of the boxes kept (int32)."""
    check_bbox_layout("bbox_rotate", a.args.get("bbox_layout"))
    boxes = OutputSpec(np.float32, None, (-1, 4))
    if len(a.inputs) > 1:
        label = a.inputs[1]
        dims = None if label.dims is None else (-1, *label.dims[1:])
        return [boxes, OutputSpec(np.int32, None, dims)]
    return [boxes]


register(OpSchema(
    name="bbox_rotate",
    doc="Moves boxes as fn.rotate moves the image (rotate the boxes first: the input shape is the unrotated "
        "image's): each box's corners are rotated by `angle` degrees (counter-clockwise) about the image center, "
        "and the box becomes their bounding box (mode 'expand'), keeps its size ('fixed') or half-way "
        "('halfway'). The boxes are then clipped to the output canvas (the input's size with keep_size, `size`, "
        "else the rotated image's) and those left with less than remove_threshold of their area are dropped, "
        "with their labels (second input).",
    args=(
        Arg("angle", "float", REQUIRED, "Rotation angle, degrees (counter-clockwise).", tensor_input=True),
        Arg("input_shape", "int", REQUIRED, "Shape of the unrotated image, in `shape_layout`'s order.",
            list_of=True, tensor_input=True),
        Arg("shape_layout", "str", "HW", "Meaning of input_shape's values: H, W and optionally C ('HW', 'HWC')."),
        Arg("bbox_layout", "str", "xyXY", "The box layout: 'xyXY' (ltrb) or 'xyWH'.", choices=("xyXY", "xyWH")),
        Arg("bbox_normalized", "bool", True, "The boxes are relative to the image ([0, 1]); False: in pixels."),
        Arg("keep_size", "bool", False, "The rotated image keeps the input's size (fn.rotate's keep_size)."),
        Arg("size", "float", [], "The output canvas size (H, W) given to fn.rotate, if any.", list_of=True,
            tensor_input=True),
        Arg("mode", "str", "expand", "'expand', 'fixed' or 'halfway'.", choices=("expand", "fixed", "halfway")),
        Arg("remove_threshold", "float", 0.1, "The least fraction of a box's area left inside the canvas for it "
            "to be kept (0 to 1).", limits=FRACTION),
    ),
    min_inputs=1, max_inputs=2, num_outputs=_rotate_outputs, devices=("cpu", "gpu"),
    state="none", output_spec=_rotated,
))


def _crop_outputs(args: dict, num_inputs: int = 2) -> int:
    """anchor, shape and boxes; then the labels when labels are given (the second input); then the indices of
    the kept boxes with output_bbox_indices."""
    return 3 + (num_inputs > 1) + bool(args.get("output_bbox_indices"))


def _crop_rule(given: frozenset[str]) -> str | None:
    """DALI's: crop_shape needs input_shape, and excludes aspect_ratio or scaling; ltrb or bbox_layout."""
    if "crop_shape" in given and "input_shape" not in given:
        return "crop_shape needs input_shape (the window is in pixels of the input)"
    if "crop_shape" in given and given & {"aspect_ratio", "scaling"}:
        return "crop_shape fixes the window: aspect_ratio and scaling do not apply"
    if {"ltrb", "bbox_layout"} <= given:
        return "ltrb (deprecated) and bbox_layout exclude each other: give bbox_layout"
    return None


def _cropped_boxes(a: SpecArgs) -> list[OutputSpec]:
    """Window anchor and shape (float32 [D]), kept boxes (float32 [K, 2D]), their labels and indices (int32)."""
    layout = a.args.get("bbox_layout")
    check_bbox_layout("random_bbox_crop", layout)
    box_dims = a.first.dims
    coords = len(layout) if layout else (box_dims[1] if box_dims is not None and len(box_dims) == 2 else -1)
    ndim = coords // 2 if coords > 0 else -1
    specs = [OutputSpec(np.float32, None, (ndim,)), OutputSpec(np.float32, None, (ndim,)),
             OutputSpec(np.float32, None, (-1, coords))]
    if len(a.inputs) > 1:
        label = a.inputs[1]
        specs.append(OutputSpec(np.int32, None, None if label.dims is None else (-1, *label.dims[1:])))
    if a.args.get("output_bbox_indices"):
        specs.append(OutputSpec(np.int32, None, (-1,)))
    return specs


register(OpSchema(
    name="random_bbox_crop",
    doc="Picks a random crop window that keeps the boxes valid, as SSD training does: each sample draws one of "
        "`thresholds` (or no crop, with allow_no_crop) and tries windows (`scaling` of the input per axis, "
        "`aspect_ratio` range; or a fixed crop_shape in pixels of input_shape) until the boxes' IoU (or overlap) "
        "with the window reaches it, after num_attempts drawing a new threshold; after total_num_attempts the "
        "best window so far is used. Boxes whose center is outside the window (or, with bbox_prune_threshold, "
        "with less of their area inside) are dropped; the rest are clipped and mapped to the window. Outputs the "
        "window's anchor and shape (relative, or pixels with crop_shape), the boxes, the labels (second input) "
        "and, with output_bbox_indices, the kept boxes' indices. Where DALI would search forever (no window can "
        "succeed and total_num_attempts is not given), the search stops after 100000 attempts with the best "
        "window.",
    args=(
        Arg("aspect_ratio", "float", [1.0, 1.0], "Range of the window's width/height ratio (relative to the input "
            "without input_shape); 6 values for 3D boxes (xy, xz, yz).", list_of=True, list_len=(2, 6)),
        Arg("thresholds", "float", [0.0], "Least IoU (or overlap) of the boxes with the window; one is drawn per "
            "sample.", list_of=True, limits=FRACTION),
        Arg("scaling", "float", [1.0, 1.0], "Range of the window's extent per axis, as a fraction of the input.",
            list_of=True, list_len=(2, 2)),
        Arg("bbox_layout", "str", None, "The box layout: a permutation of xyXY or xyWH (xyzXYZ / xyzWHD for 3D); "
            "default by ltrb."),
        Arg("ltrb", "bool", None, "Deprecated: True (default) for xyXY boxes, False for xyWH."),
        Arg("allow_no_crop", "bool", None, "Also allow not cropping, as one more threshold (default True; False "
            "with crop_shape, where True is an error)."),
        Arg("num_attempts", "int", 1, "Windows tried per drawn threshold."),
        Arg("total_num_attempts", "int", -1, "Most windows tried in all before the best so far is used; -1: no "
            "limit."),
        Arg("threshold_type", "str", "iou", "'iou' (of window and box) or 'overlap' (fraction of the box's area "
            "inside the window).", choices=("iou", "overlap")),
        Arg("all_boxes_above_threshold", "bool", True, "Every box must reach the threshold (else one is "
            "enough)."),
        Arg("bbox_prune_threshold", "float", None, "If given, keep the boxes with at least this fraction of their "
            "area inside the window, instead of those whose center is inside.", limits=FRACTION),
        Arg("output_bbox_indices", "bool", False, "Also output the indices of the kept boxes."),
        Arg("crop_shape", "int", None, "A fixed window, in pixels (in shape_layout's order; with input_shape).",
            list_of=True, tensor_input=True),
        Arg("input_shape", "int", None, "The input's shape in pixels (in shape_layout's order).", list_of=True,
            tensor_input=True),
        Arg("shape_layout", "str", None, "Order of crop_shape's and input_shape's values: a permutation of 'WH' "
            "(default) or 'WHD'."),
        Arg("quiet", "bool", False, "Accepted for DALI compatibility: headrace prints no warning when it falls "
            "back to the best window."),
    ),
    min_inputs=1, max_inputs=2, num_outputs=_crop_outputs, devices=("cpu", "gpu"),
    random=True, state="rng", rule=_crop_rule, output_spec=_cropped_boxes,
))


def _ssd_cropped(a: SpecArgs) -> list[OutputSpec]:
    """The cropped image (input's type and layout), the kept boxes (float32 [K, 4]) and their labels (int32)."""
    image = a.first
    channels = image.dims[2] if image.dims is not None and len(image.dims) == 3 else -1
    labels = a.inputs[2] if len(a.inputs) > 2 else OutputSpec()
    one_d = labels.dims is not None and len(labels.dims) == 1
    return [OutputSpec(image.dtype, image.layout, (-1, -1, channels)), OutputSpec(np.float32, None, (-1, 4)),
            OutputSpec(np.int32, None, (-1,) if one_d else None)]


register(OpSchema(
    name="ssd_random_crop",
    doc="DALI's deprecated SSD crop (use random_bbox_crop): per sample draws no crop, or a least IoU of every "
        "box with the window among any, 0.1, 0.3, 0.5, 0.7, 0.9, then windows of 0.3 to 1 of each extent "
        "(width/height ratio 0.5 to 2) until one meets it and holds a box center; crops the HWC image (input 0) "
        "to it and keeps the boxes (ltrb, input 1) whose center is inside, mapped to the window, with their "
        "labels (input 2, as 1D int32).",
    args=(Arg("num_attempts", "int", 1, "Windows tried per drawn threshold."),),
    min_inputs=3, max_inputs=3, num_outputs=3, devices=("cpu", "gpu"),
    random=True, state="rng", output_spec=_ssd_cropped,
))
