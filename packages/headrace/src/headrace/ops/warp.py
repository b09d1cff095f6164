"""Schemas of the affine warps: rotate and warp_affine (HW / HWC images)."""

from headrace.schema import REQUIRED, Arg, OpSchema, register
from headrace.types import DALIInterpType

_WARP = (
    Arg("interp_type", "interp_type", DALIInterpType.INTERP_LINEAR, "Resampling: INTERP_NN or INTERP_LINEAR "
        "(cubic is accepted and uses OpenCV's cubic filter).",
        choices=(DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC)),
    Arg("fill_value", "float", None, "Value of output pixels that map outside the input; if not given, the "
        "border pixels are repeated."),
    Arg("dtype", "dtype", None, "Output element type; default the input's."),
)

register(OpSchema(
    name="rotate",
    doc="Rotates images counter-clockwise by `angle` degrees about their centre. The output is large enough to "
        "hold the whole rotated image, unless keep_size or size says otherwise.",
    args=(Arg("angle", "float", REQUIRED, "Angle in degrees, counter-clockwise.", tensor_input=True),
          Arg("keep_size", "bool", False, "Keep the input's size."),
          Arg("size", "float", None, "Output size (height, width).", list_of=True, list_len=(2, 2),
              tensor_input=True),
          *_WARP),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none",
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
    state="none",
))
