"""Schemas of filter (and its DALI alias experimental.filter) and laplacian: 2D correlations over the spatial axes
of HW / HWC images, float32 inside, as DALI's."""

from __future__ import annotations

from headrace.output_specs import numpy_dtype
from headrace.schema import Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

BORDERS = ("reflect_101", "reflect_1001", "wrap", "clamp", "constant")


def _filtered(a: SpecArgs) -> list[OutputSpec]:
    """The images filtered: the input's layout, of `dtype` (default the input's); 'valid' mode shrinks H and W."""
    first = a.first
    dims = first.dims
    if dims is not None and a.args["mode"] == "valid":
        dims = (-1, -1, *dims[2:])
    return [OutputSpec(numpy_dtype(a.literal("dtype")) or first.dtype, first.layout, dims)]


def _laplacian(a: SpecArgs) -> list[OutputSpec]:
    """The Laplacian of the images: the input's layout and shape, of `dtype` (default the input's)."""
    first = a.first
    return [OutputSpec(numpy_dtype(a.literal("dtype")) or first.dtype, first.layout, first.dims)]


_FILTER_DOC = ("Correlates each image (HW or HWC, every channel alike) with a 2D float32 filter given per sample as "
               "the second input (the filter is not flipped, as in DALI and OpenCV's filter2D). The optional third "
               "input is the per-sample scalar padding value of border='constant' (default 0). Computed in "
               "float32; integer outputs are rounded and clamped.")
_FILTER_ARGS = (
    Arg("anchor", "int", [-1], "Position of the filter over the output pixel, (row, column) within the filter; "
        "-1: the filter's middle (extent // 2). Ignored in 'valid' mode.", list_of=True, list_len=(1, 2),
        tensor_input=True),
    Arg("border", "str", "reflect_101", "Out-of-image positions: reflect_101 (dcb|abcd), reflect_1001 (cba|abcd), "
        "wrap, clamp or constant (the fill value, default 0).", choices=BORDERS),
    Arg("mode", "str", "same", "'same': the output has the input's size; 'valid': only positions where the filter "
        "lies wholly inside (H - r + 1, W - s + 1).", choices=("same", "valid")),
    Arg("dtype", "dtype", None, "Output element type: the input's (default) or FLOAT."),
)

for _name in ("filter", "experimental.filter"):
    register(OpSchema(
        name=_name,
        doc=_FILTER_DOC if _name == "filter" else "DALI's earlier name of `filter`: " + _FILTER_DOC,
        args=_FILTER_ARGS, min_inputs=2, max_inputs=3, devices=("cpu", "gpu"), state="none",
        output_spec=_filtered, input_layouts=("HW", "HWC"), sequences=True,
    ))

_WINDOW = Limits(1, 23)
register(OpSchema(
    name="laplacian",
    doc="The Laplacian of HW / HWC images (every channel alike): d2/dy2 + d2/dx2, each partial derivative a "
        "separable correlation of a second-derivative window (size window_size of its axis) along its axis and "
        "binomial smoothing windows (size smoothing_size, default the derivative's window_size) along the other; "
        "reflect-101 borders, float32 inside, as DALI's.",
    args=(
        Arg("window_size", "int", [3], "Derivative window, odd, 3 to 23; one value or one per axis (H, W).",
            list_of=True, list_len=(1, 2), tensor_input=True, limits=_WINDOW),
        Arg("smoothing_size", "int", None, "Smoothing window, odd, 1 to 23 (1: no smoothing); one value or one per "
            "axis (H, W).", list_of=True, list_len=(1, 2), tensor_input=True, limits=_WINDOW),
        Arg("scale", "float", [1.0], "Factor of each partial derivative (one value or one per axis).",
            list_of=True, list_len=(1, 2), tensor_input=True),
        Arg("normalized_kernel", "bool", False, "Scale each partial derivative by 2^(-s + n + 2) (s: the sum of "
            "its window sizes, n = 2); not with `scale`."),
        Arg("dtype", "dtype", None, "Output element type: the input's (default) or FLOAT."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=_laplacian,
    input_layouts=("HW", "HWC"), sequences=True,
))
