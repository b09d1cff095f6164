"""Schemas of the colour adjustments: hsv, brightness_contrast and color_twist (HWC images, 3 channels for hue and
saturation), and color_space_conversion (RGB, BGR, GRAY, YCbCr)."""

from headrace.enums import DALIDataType, DALIImageType
from headrace.output_specs import keeps_layout_with_dtype_arg
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_DTYPE = Arg("dtype", "dtype", None, "Output element type; default the input's.")

register(OpSchema(
    name="hsv",
    doc="Shifts hue (degrees) and scales saturation and value of RGB images, as a linear map in YIQ space.",
    args=(Arg("hue", "float", 0.0, "Hue rotation in degrees.", tensor_input=True),
          Arg("saturation", "float", 1.0, "Saturation multiplier.", tensor_input=True),
          Arg("value", "float", 1.0, "Value (brightness) multiplier.", tensor_input=True),
          Arg("dtype", "dtype", DALIDataType.UINT8, "Output element type (uint8 by default, as in DALI, even for "
              "float input).")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg, input_layouts=("HWC",), sequences=True,
))

register(OpSchema(
    name="brightness_contrast",
    doc="out = brightness_shift * max + brightness * (contrast_center + contrast * (in - contrast_center)), where "
        "max is the type's largest value (1 for floats).",
    args=(Arg("brightness", "float", 1.0, "Brightness multiplier.", tensor_input=True),
          Arg("brightness_shift", "float", 0.0, "Brightness shift, as a fraction of the type's range.",
              tensor_input=True),
          Arg("contrast", "float", 1.0, "Contrast multiplier.", tensor_input=True),
          Arg("contrast_center", "float", None, "Value kept by contrast; default half the type's range (0.5 for "
              "floats).", tensor_input=True), _DTYPE),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg,
))

register(OpSchema(
    name="color_twist",
    doc="Brightness, contrast, hue and saturation in one linear map of RGB images (YIQ space for hue and "
        "saturation; contrast around the half of the type's range).",
    args=(Arg("brightness", "float", 1.0, "Brightness multiplier.", tensor_input=True),
          Arg("contrast", "float", 1.0, "Contrast multiplier.", tensor_input=True),
          Arg("hue", "float", 0.0, "Hue rotation in degrees.", tensor_input=True),
          Arg("saturation", "float", 1.0, "Saturation multiplier.", tensor_input=True), _DTYPE,
          Arg("image_type", "image_type", DALIImageType.RGB, "The colour space of the input and the output, as "
              "DALI declares it. DALI 2.4's CPU build gives the same output for every value, and so does "
              "headrace (tests/test_dali_arguments.py).")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg, input_layouts=("HWC",), sequences=True,
))

_SPACES = (DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY, DALIImageType.YCbCr)


def _converted(a: SpecArgs) -> list[OutputSpec]:
    """uint8 images of the input's layout (HWC when unknown) and extents, with output_type's channels (GRAY: 1)."""
    first, space = a.first, a.args.get("output_type")
    channels = -1 if space is None else 1 if space == DALIImageType.GRAY else 3
    dims = None if not first.dims else (*first.dims[:-1], channels)
    layout = first.layout or ("HWC" if first.ndim == 3 else None)
    return [OutputSpec("uint8", layout, dims, space.name if space is not None else "")]


register(OpSchema(
    name="color_space_conversion",
    doc="Converts uint8 images between RGB, BGR, GRAY and YCbCr (ITU-R BT.601, Y in 16..235), channels last, as "
        "DALI's op: any two different spaces.",
    args=(Arg("image_type", "image_type", REQUIRED, "Colour space of the input.", choices=_SPACES),
          Arg("output_type", "image_type", REQUIRED, "Colour space of the output.", choices=_SPACES)),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_converted, input_layouts=("HWC", "FHWC", "DHWC", "FDHWC"),
))
