"""Schema of gaussian_blur."""

from headrace.output_specs import keeps_layout_with_dtype_arg
from headrace.schema import Arg, OpSchema, registrar

register = registrar(__name__)

register(OpSchema(
    name="gaussian_blur",
    doc="Gaussian blur over the spatial axes (HW of HW/HWC images). Give `sigma`, `window_size` or both, one value "
        "for all axes or one per axis (H, W); window_size alone gives sigma = 0.3 * ((window_size - 1) / 2 - 1) + "
        "0.8, sigma alone gives window_size = 2 * ceil(3 * sigma) + 1. Windows must be odd. Borders reflect "
        "(101), as in DALI.",
    args=(
        Arg("sigma", "float", None, "Standard deviation of the kernel, per axis or for all.", list_of=True,
            list_len=(1, 2), tensor_input=True),
        Arg("window_size", "int", None, "Odd diameter of the kernel, per axis or for all.", list_of=True,
            list_len=(1, 2), tensor_input=True),
        Arg("dtype", "dtype", None, "Output element type; default the input's."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg, input_layouts=("HW", "HWC"), sequences=True,
))
