"""Schemas of resize_crop_mirror (and DALI's legacy fast_resize_crop_mirror): resize, crop and flip of HWC images in
one resampling of the source region under the crop window, as DALI's fused operator (its arguments are resize's,
crop's window and mirror)."""

from __future__ import annotations

import dataclasses

from headrace.ops.geometry import CROP_WINDOW_ARGS
from headrace.output_specs import hwc_dims, numpy_dtype, round_half_up
from headrace.schema import SCHEMAS, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_RESIZE = SCHEMAS["resize"]
_WINDOW = tuple(a for a in CROP_WINDOW_ARGS if a.name not in ("out_of_bounds_policy", "fill_values", "rounding"))


def _windows(a: SpecArgs) -> list[OutputSpec]:
    """The crop windows of the resized images: the input's type (or `dtype`), layout and channels, crop-sized."""
    first = a.first
    height = width = -1
    if a.literal("crop"):
        height, width = (round_half_up(v) for v in a.args["crop"])
    elif "crop" not in a.per_sample and a.literal("crop_h") and a.literal("crop_w"):
        height, width = round_half_up(a.args["crop_h"]), round_half_up(a.args["crop_w"])
    return [OutputSpec(numpy_dtype(a.args["dtype"]) or first.dtype, first.layout, (height, width, hwc_dims(first)[2]))]


def _rule(given: frozenset[str]) -> str | None:
    if "crop" in given and {"crop_h", "crop_w"} & given:
        return "give `crop` or crop_h / crop_w, not both"
    return _RESIZE.rule(given) if _RESIZE.rule is not None else None


_DOC = ("Resize (as `resize`, of a region of interest where roi_start / roi_end are given), then a crop window (as "
        "`crop`, placed by crop_pos_x / crop_pos_y and `rounding`), then a flip by `mirror`, computed as one "
        "resampling of the source region under the window, as DALI's fused operator. HWC images.")
_ARGS = (
    *(a for a in _RESIZE.args if a.name != "save_attrs"),
    *_WINDOW,
    Arg("rounding", "str", "round", "How the window's anchor becomes a whole pixel: 'round' (half away from "
        "zero) or 'truncate'.", choices=("round", "truncate")),
    Arg("mirror", "int", 0, "Flip mask: 1 horizontal, 2 vertical, 3 both.", tensor_input=True),
)

for _name, _doc, _antialias in (
        ("resize_crop_mirror", _DOC, True),
        ("fast_resize_crop_mirror", "DALI's legacy name of resize_crop_mirror, with antialias off by default. " + _DOC,
         False)):
    register(OpSchema(
        name=_name, doc=_doc,
        args=tuple(dataclasses.replace(a, default=_antialias) if a.name == "antialias" else a for a in _ARGS),
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=_windows, rule=_rule,
        input_layouts=("HWC",), sequences=True,
    ))
