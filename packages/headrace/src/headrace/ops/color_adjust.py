"""Schemas of DALI's standalone colour adjustments: brightness, contrast, hue and saturation (the single-factor
forms of brightness_contrast and hsv, with the input's element type kept by default)."""

from headrace.enums import DALIImageType
from headrace.output_specs import keeps_layout_with_dtype_arg
from headrace.schema import Arg, OpSchema, registrar

register = registrar(__name__)

_LAYOUTS = ("HWC", "FHWC", "DHWC")
_DTYPE = Arg("dtype", "dtype", None, "Output element type; default the input's.")
_IMAGE_TYPE = Arg("image_type", "image_type", DALIImageType.RGB, "Colour space of the input and the output (accepted "
                  "as in DALI, whose result is the same for every value: the map is applied to the three channels).")

register(OpSchema(
    name="brightness",
    doc="out = brightness_shift * max + brightness * in, where max is the output type's largest value (1 for "
        "floats). Images (HWC) or sequences and volumes (FHWC, DHWC).",
    args=(Arg("brightness", "float", 1.0, "Brightness multiplier.", tensor_input=True),
          Arg("brightness_shift", "float", 0.0, "Brightness shift, as a fraction of the output type's range.",
              tensor_input=True), _DTYPE),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg, input_layouts=_LAYOUTS,
))

register(OpSchema(
    name="contrast",
    doc="out = contrast_center + contrast * (in - contrast_center). Images (HWC) or sequences and volumes (FHWC, "
        "DHWC).",
    args=(Arg("contrast", "float", 1.0, "Contrast multiplier; 0 gives a uniform grey.", tensor_input=True),
          Arg("contrast_center", "float", None, "Value kept by contrast; default half the input type's positive "
              "range (0.5 for floats).", tensor_input=True), _DTYPE),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg, input_layouts=_LAYOUTS,
))

register(OpSchema(
    name="hue",
    doc="Rotates the hue of RGB images by `hue` degrees, as a linear map in YIQ space (hsv with only its hue). "
        "3 channels, last: HWC, FHWC or DHWC.",
    args=(Arg("hue", "float", 0.0, "Hue rotation in degrees.", tensor_input=True), _IMAGE_TYPE, _DTYPE),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg, input_layouts=_LAYOUTS,
))

register(OpSchema(
    name="saturation",
    doc="Scales the saturation of RGB images by `saturation` (0: grey, 1: unchanged), as a linear map in YIQ space "
        "(hsv with only its saturation). 3 channels, last: HWC, FHWC or DHWC.",
    args=(Arg("saturation", "float", 1.0, "Saturation factor (DALI documents it as non-negative; a negative one is "
              "applied as given).", tensor_input=True), _IMAGE_TYPE, _DTYPE),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg, input_layouts=_LAYOUTS,
))
