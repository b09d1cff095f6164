"""Schemas of `tensor_resize` and its older name `experimental.tensor_resize`, as DALI's: resize any tensor along
up to 3 consecutive axes (the others kept), with resize's filters and size rules."""

from __future__ import annotations

from headrace.enums import DALIInterpType
from headrace.output_specs import numpy_dtype
from headrace.schema import MAX_EXTENT, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_EXTENTS = Limits(0, MAX_EXTENT)
_FLOAT_DOCS = "; one value stands for all resized axes."


def _rule(given: frozenset[str]) -> str | None:
    """DALI's: exactly one of sizes and scales; axes and axis_names exclude each other."""
    if len(given & {"sizes", "scales"}) != 1:
        return "give the output size one way: sizes or scales"
    if {"axes", "axis_names"} <= given:
        return "axes and axis_names exclude each other"
    if len(given & {"roi_start", "roi_end"}) == 1:
        return "give roi_start and roi_end together"
    return None


def _resized(a: SpecArgs) -> list[OutputSpec]:
    """The resized tensor: the input's type (or `dtype`) and layout, its number of dimensions, extents varying."""
    first = a.first
    dims = None if first.ndim is None else (-1,) * first.ndim
    return [OutputSpec(numpy_dtype(a.literal("dtype")) or first.dtype, first.layout, dims)]


_HINT = "Accepted for DALI compatibility (a memory hint); headrace ignores it."
_ARGS = (
    Arg("sizes", "float", None, "Output extent of each resized axis (0: from the other axes, see `mode`)"
        + _FLOAT_DOCS, list_of=True, list_len=(1, 64), tensor_input=True, limits=_EXTENTS),
    Arg("scales", "float", None, "Scale of each resized axis: out = size_rounding(scale * extent)" + _FLOAT_DOCS,
        list_of=True, list_len=(1, 64), tensor_input=True, limits=_EXTENTS),
    Arg("axes", "int", None, "The axes sizes, scales, max_size and the ROI refer to (negative from the back; at "
        "most 3 consecutive); default all.", list_of=True, list_len=(1, 64), limits=Limits(-64, 63)),
    Arg("axis_names", "str", None, "The resized axes by layout letters, instead of `axes`."),
    Arg("mode", "str", "default", "'default': the size asked, a missing extent scaled by the average scale of the "
        "given ones; 'stretch': a missing extent kept; 'not_larger' / 'not_smaller': one scale for all axes, "
        "fitting inside / covering the size asked.", choices=("default", "stretch", "not_larger", "not_smaller")),
    Arg("max_size", "float", None, "Upper bound of each output extent" + _FLOAT_DOCS, list_of=True,
        list_len=(1, 64), limits=_EXTENTS),
    Arg("roi_start", "float", None, "Start of the source region along each resized axis (with roi_end).",
        list_of=True, list_len=(1, 64), tensor_input=True),
    Arg("roi_end", "float", None, "End of the source region along each resized axis; before roi_start flips.",
        list_of=True, list_len=(1, 64), tensor_input=True),
    Arg("roi_relative", "bool", False, "ROI coordinates are fractions of the extents (0 to 1)."),
    Arg("alignment", "float", [0.5], "Where a region adjusted by subpixel_scale sits in the source region: 0 start, "
        "0.5 centre, 1 end" + _FLOAT_DOCS, list_of=True, list_len=(1, 64), tensor_input=True),
    Arg("size_rounding", "str", "round", "Rounding of a size computed from `scales`: 'round' (half away from zero), "
        "'truncate' or 'ceil'.", choices=("round", "truncate", "ceil")),
    Arg("subpixel_scale", "bool", True, "Keep the exact scale of a fractional size (adjusting the source region) "
        "instead of mapping the whole region onto the rounded size."),
    Arg("interp_type", "interp_type", DALIInterpType.INTERP_LINEAR, "Resampling filter (min_filter and "
        "mag_filter default to it)."),
    Arg("min_filter", "interp_type", None, "Filter of the axes that shrink; default interp_type.", tensor_input=True),
    Arg("mag_filter", "interp_type", None, "Filter of the axes that grow; default interp_type.", tensor_input=True),
    Arg("antialias", "bool", True, "Widen the filter by the scale on shrinking axes (not for NN)."),
    Arg("dtype", "dtype", None, "Output element type: the input's (default) or FLOAT."),
    Arg("minibatch_size", "int", 32, _HINT),
    Arg("temp_buffer_hint", "int", 0, _HINT),
)

for _name, _doc in (("tensor_resize", ""), ("experimental.tensor_resize", " (DALI's older name)")):
    register(OpSchema(
        name=_name,
        doc="Resizes tensors of any number of dimensions" + _doc + ", as DALI's tensor_resize: along `axes` "
            "(default all; at most 3 consecutive), to `sizes` or by `scales`, with resize's filters (LINEAR with "
            "antialias by default) and rules (mode, max_size, ROI, subpixel_scale). Other axes are kept.",
        args=_ARGS,
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
        rule=_rule, state="none", output_spec=_resized,
    ))
