"""Schemas of the affine warps: rotate and warp_affine (HW / HWC images)."""

import math

import numpy as np

from headrace.enums import DALIInterpType
from headrace.output_specs import numpy_dtype
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_WARP = (
    Arg("interp_type", "interp_type", DALIInterpType.INTERP_LINEAR, "Resampling: INTERP_NN (the pixel the "
        "source position falls in) or INTERP_LINEAR, as DALI's; INTERP_CUBIC, which DALI refuses here, is accepted "
        "and uses OpenCV's cubic filter (A = -0.75).",
        choices=(DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC)),
    Arg("fill_value", "float", None, "Value of output pixels that map outside the input; if not given, the "
        "border pixels are repeated."),
    Arg("dtype", "dtype", None, "Output element type; default the input's."),
)

def _warped(a: SpecArgs, height: int, width: int) -> OutputSpec:
    """The spec of a warp's output of (height, width) (-1 where it varies): the input's other axes and layout."""
    first = a.first
    dims = None if first.dims is None or len(first.dims) < 2 else (height, width, *first.dims[2:])
    return OutputSpec(numpy_dtype(a.args["dtype"]) or first.dtype, first.layout, dims)


def _rounded(extent: float) -> int:
    """An extent of `size` as DALI reads it: float32, rounded half away from zero, at least 1."""
    return max(1, int(math.floor(float(np.float32(extent)) + 0.5)))


def _output_size(a: SpecArgs) -> tuple[int, int] | None:
    """The literal `size` rounded as the kernels round it; None when not given, (-1, -1) when given per sample."""
    if "size" in a.per_sample:
        return -1, -1
    size = a.args["size"]
    return None if size is None else (_rounded(size[0]), _rounded(size[1]))


def _rotated(a: SpecArgs) -> list[OutputSpec]:
    """Rotated images: the input's type (or `dtype`) and layout, of `size`, the input's size with keep_size."""
    size = _output_size(a)
    if size is None:
        dims = a.first.dims
        size = (dims[0], dims[1]) if a.args["keep_size"] and dims is not None and len(dims) >= 2 else (-1, -1)
    return [_warped(a, *size)]


def _affine(a: SpecArgs) -> list[OutputSpec]:
    """Warped images: the input's type (or `dtype`) and layout, of `size` (default the input's size)."""
    size = _output_size(a)
    if size is None:
        dims = a.first.dims
        size = (dims[0], dims[1]) if dims is not None and len(dims) >= 2 else (-1, -1)
    return [_warped(a, *size)]


register(OpSchema(
    name="rotate",
    doc="Rotates images counter-clockwise by `angle` degrees about their centre. Unless keep_size or size says "
        "otherwise, the output holds the whole rotated image, each extent given the parity of the input extent it "
        "mostly comes from (DALI's canvas rule).",
    args=(Arg("angle", "float", REQUIRED, "Angle in degrees, counter-clockwise.", tensor_input=True),
          Arg("keep_size", "bool", False, "Keep the input's size."),
          Arg("size", "float", None, "Output size (height, width).", list_of=True, list_len=(2, 2),
              tensor_input=True),
          *_WARP),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_rotated, input_layouts=("HW", "HWC"), sequences=True,
))

register(OpSchema(
    name="warp_affine",
    doc="Affine warp by a 2x3 matrix (row-major, 6 values, in (x, y) pixel coordinates with pixel centres at "
        "+0.5). With inverse_map (default) the matrix maps output to input coordinates. The matrix may also be "
        "the second input.",
    args=(Arg("matrix", "float", None, "The 2x3 matrix, row-major.", list_of=True, list_len=(6, 6),
              tensor_input=True),
          Arg("size", "float", None, "Output size (height, width); default the input's.", list_of=True,
              list_len=(2, 2), tensor_input=True),
          Arg("inverse_map", "bool", True, "The matrix maps output to input coordinates."),
          *_WARP),
    min_inputs=1, max_inputs=2, devices=("cpu", "gpu"),
    state="none", output_spec=_affine, input_layouts=("HW", "HWC"), sequences=True,
))
