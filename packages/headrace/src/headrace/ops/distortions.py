"""Schemas of the image distortions: the displacement filters (jitter, water, sphere), grid_mask and
jpeg_compression_distortion. Each keeps the input's shape, element type and layout."""

import math

from headrace.enums import DALIInterpType
from headrace.output_specs import same_as_input
from headrace.schema import Arg, OpSchema, registrar

register = registrar(__name__)

_DISPLACEMENT_ARGS = (
    Arg("interp_type", "interp_type", DALIInterpType.INTERP_NN, "INTERP_NN or INTERP_LINEAR.",
        choices=(DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR)),
    Arg("fill_value", "float", 0.0, "Value of the pixels that come from outside the image."),
    Arg("mask", "int", 1, "0 passes the sample through unchanged, 1 applies the distortion.", tensor_input=True),
)
_IMAGES = ("HWC",)

register(OpSchema(
    name="jitter",
    doc="Moves every pixel by a random whole number of pixels in [-(nDegree // 2), nDegree - nDegree // 2) in each "
        "direction (clamped to the image), as DALI's GPU operator does (DALI has no CPU one); whole pixels are read "
        "as they are whatever `interp_type`. HWC images.",
    args=(Arg("nDegree", "int", 2, "Range of the displacement."), *_DISPLACEMENT_ARGS),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), random=True, state="rng", output_spec=same_as_input,
    input_layouts=_IMAGES,
))

register(OpSchema(
    name="water",
    doc="Water-like wave distortion: the pixel (x, y) is read at (x + ampl_x * sin(freq_x * y + phase_x), "
        "y + ampl_y * cos(freq_y * x + phase_y)). HWC images.",
    args=(Arg("ampl_x", "float", 10.0, "Amplitude of the wave in x."),
          Arg("ampl_y", "float", 10.0, "Amplitude of the wave in y."),
          Arg("freq_x", "float", 2 * math.pi / 128, "Frequency of the wave in x."),
          Arg("freq_y", "float", 2 * math.pi / 128, "Frequency of the wave in y."),
          Arg("phase_x", "float", 0.0, "Phase of the wave in x."),
          Arg("phase_y", "float", 0.0, "Phase of the wave in y."), *_DISPLACEMENT_ARGS),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
    input_layouts=_IMAGES,
))

register(OpSchema(
    name="sphere",
    doc="Spherical (fish-eye) distortion about the image centre. HWC images.",
    args=_DISPLACEMENT_ARGS,
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
    input_layouts=_IMAGES,
))

register(OpSchema(
    name="grid_mask",
    doc="GridMask (arXiv 2001.04086): zeroes squares of side ratio * tile in a grid of period `tile`, rotated by "
        "`angle` about the origin and shifted by (shift_x, shift_y). HW or HWC images.",
    args=(Arg("tile", "int", 100, "Period of the grid in pixels (square plus spacing).", tensor_input=True),
          Arg("ratio", "float", 0.5, "Side of the black squares as a fraction of `tile`.", tensor_input=True),
          Arg("angle", "float", 0.0, "Rotation of the grid, in radians.", tensor_input=True),
          Arg("shift_x", "float", 0.0, "x of the translation, applied after rotation.", tensor_input=True),
          Arg("shift_y", "float", 0.0, "y of the translation, applied after rotation.", tensor_input=True)),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
    input_layouts=("HW", "HWC"),
))

register(OpSchema(
    name="jpeg_compression_distortion",
    doc="JPEG artefacts: each uint8 RGB HWC image is encoded as a JPEG of `quality` and decoded again (OpenCV, "
        "as DALI's CPU operator). The GPU kernel round-trips through the host.",
    args=(Arg("quality", "int", 50, "JPEG quality 1 (lowest) to 100; values outside are clamped.",
              tensor_input=True),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
    input_layouts=("HWC",), sequences=True,
))
