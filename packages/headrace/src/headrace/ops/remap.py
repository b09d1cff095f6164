"""Schema of experimental.remap: every output pixel read from the input at the coordinates two maps give (DALI has it
on the GPU only; headrace on both, with one float32 sampling rule shared by the CPU and GPU kernels)."""

from __future__ import annotations

from headrace.enums import DALIInterpType
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _remapped(a: SpecArgs) -> list[OutputSpec]:
    """Images of the input's type and layout, of the maps' height and width (the input's channels)."""
    first = a.first
    frames = 1 if (first.layout or "").startswith("F") else 0
    dims = None
    if first.dims is not None and len(first.dims) in (2 + frames, 3 + frames):
        maps = a.inputs[1] if len(a.inputs) > 1 else None
        skip = 1 if maps is not None and (maps.layout or "").startswith("F") else 0
        hw = tuple(maps.dims[skip:skip + 2]) if maps is not None and maps.dims is not None and \
            len(maps.dims) >= skip + 2 else (-1, -1)
        dims = (*first.dims[:frames], *hw, *first.dims[2 + frames:])
    return [OutputSpec(first.dtype, first.layout, dims)]


register(OpSchema(
    name="experimental.remap",
    doc="Generic geometric transformation: output(x, y) = input(mapx(x, y), mapy(x, y)). Inputs: the image (HW or "
        "HWC, or an FHW / FHWC sequence), then mapx and mapy (float, HW or HW1, one per sample, of the output's "
        "size; for a sequence, maps whose layout starts with F are one per frame, others shared). Pixels outside the "
        "input read 0 (DALI's only border). Matches OpenCV's remap with pixel_origin='center' and BORDER_CONSTANT.",
    args=(
        Arg("interp", "interp_type", DALIInterpType.INTERP_LINEAR, "INTERP_NN, INTERP_LINEAR or INTERP_CUBIC "
            "(OpenCV's, A = -0.75).",
            choices=(DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_CUBIC)),
        Arg("pixel_origin", "str", "corner", "Which point of a pixel the map's coordinates name: 'corner' (its "
            "upper-left corner, DALI's default) or 'center' (OpenCV's).", choices=("corner", "center")),
    ),
    min_inputs=3, max_inputs=3, devices=("cpu", "gpu"), state="none", output_spec=_remapped,
    input_layouts=("HW", "HWC", "FHW", "FHWC"),
))
