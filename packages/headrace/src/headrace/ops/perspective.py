"""Schema of experimental.warp_perspective: a 3x3 homography warp of HW / HWC images, OpenCV's warpPerspective with
DALI's pixel origin, border and fill rules."""

from __future__ import annotations

from headrace.enums import DALIInterpType
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

PERSPECTIVE_BORDERS = ("constant", "replicate", "reflect", "reflect_101", "wrap")


def _warped(a: SpecArgs) -> list[OutputSpec]:
    """Warped images of the input's type and layout, of `size` (default the input's height and width)."""
    first = a.first
    dims = first.dims
    if dims is not None and len(dims) >= 2:
        if "size" in a.per_sample:
            dims = (-1, -1, *dims[2:])
        elif a.args["size"]:
            dims = (*(int(round(v)) for v in a.args["size"]), *dims[2:])
    return [OutputSpec(first.dtype, first.layout, dims)]


register(OpSchema(
    name="experimental.warp_perspective",
    doc="Perspective warp by a 3x3 matrix (row-major, 9 values, in (x, y) pixel coordinates): with inverse_map "
        "(default) it maps output to input coordinates, else input to output. The matrix may be the second input "
        "(one 3x3 per sample). Equivalent to OpenCV's warpPerspective, inverse_map as its WARP_INVERSE_MAP.",
    args=(
        Arg("matrix", "float", None, "The 3x3 matrix, row-major.", list_of=True, list_len=(9, 9), tensor_input=True),
        Arg("size", "float", None, "Output size (height, width); default the input's.", list_of=True,
            list_len=(2, 2), tensor_input=True),
        Arg("border_mode", "str", "constant", "Out-of-image pixels: constant (fill_value), replicate, reflect "
            "(cba|abc), reflect_101 (cb|abc) or wrap.", choices=PERSPECTIVE_BORDERS),
        Arg("fill_value", "float", None, "The constant border: one value, or one per channel; default 0.",
            list_of=True),
        Arg("interp_type", "interp_type", DALIInterpType.INTERP_LINEAR, "INTERP_NN, INTERP_LINEAR or INTERP_CUBIC.",
            choices=(DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC)),
        Arg("inverse_map", "bool", True, "The matrix maps output to input coordinates."),
        Arg("pixel_origin", "str", "corner", "Where (0, 0) is: 'corner' of the top-left pixel (OpenGL) or its "
            "'center' (OpenCV).", choices=("corner", "center")),
    ),
    min_inputs=1, max_inputs=2, devices=("cpu", "gpu"), state="none", output_spec=_warped,
    input_layouts=("HW", "HWC"), sequences=True,
))
