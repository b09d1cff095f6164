"""Schemas of the rank and histogram image ops of HW / HWC images: experimental.median_blur, experimental.dilate,
experimental.erode (DALI has them on the GPU only, through CV-CUDA; headrace on both, to OpenCV's definitions) and
equalize (and its DALI alias experimental.equalize)."""

from __future__ import annotations

from headrace.output_specs import same_as_input
from headrace.schema import Arg, Limits, OpSchema, registrar

register = registrar(__name__)

MORPHOLOGY_BORDERS = ("constant", "replicate", "reflect", "reflect_101", "wrap")
_SIZE = Limits(1, 1 << 10)

register(OpSchema(
    name="experimental.median_blur",
    doc="Replaces every pixel (each channel alike) with the median of the window_size neighbourhood around it; "
        "borders repeat the edge pixel (OpenCV's medianBlur, which DALI's tests compare it with).",
    args=(Arg("window_size", "int", [3, 3], "Odd window size: one value, or (width, height) as CV-CUDA and OpenCV "
              "take it.", list_of=True, list_len=(1, 2), tensor_input=True, limits=_SIZE),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
    input_layouts=("HW", "HWC"),
))

_MORPHOLOGY_ARGS = (
    Arg("mask_size", "int", [3, 3], "Size of the rectangular structuring element, (width, height) as CV-CUDA and "
        "OpenCV take it, or one value for both.", list_of=True, list_len=(1, 2), tensor_input=True, limits=_SIZE),
    Arg("anchor", "int", [-1, -1], "The element's point placed on the output pixel, (x, y); -1: the centre.",
        list_of=True, list_len=(1, 2), tensor_input=True),
    Arg("iterations", "int", 1, "Times the operation is applied: as a mask (iterations * (size - 1) + 1) wide.",
        limits=Limits(1, 1 << 10)),
    Arg("border_mode", "str", "constant", "Out-of-image pixels: constant (they never win, OpenCV's default), "
        "replicate, reflect (cba|abc), reflect_101 (cb|abc) or wrap.", choices=MORPHOLOGY_BORDERS),
)

for _name, _what in (("experimental.dilate", "maximum"), ("experimental.erode", "minimum")):
    register(OpSchema(
        name=_name,
        doc=f"Morphological {_name.split('.')[1]}: every pixel (each channel alike) becomes the {_what} over a "
            "rectangular structuring element of mask_size placed at `anchor`, as OpenCV's (the reference of DALI's "
            "tests).",
        args=_MORPHOLOGY_ARGS, min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none",
        output_spec=same_as_input, input_layouts=("HW", "HWC"),
    ))

for _name in ("equalize", "experimental.equalize"):
    register(OpSchema(
        name=_name,
        doc=("" if _name == "equalize" else "DALI's earlier name of `equalize`: ") +
            "Histogram equalization of uint8 HW / HWC images, each channel on its own histogram (OpenCV's "
            "equalizeHist per channel, as DALI).",
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
        input_layouts=("HW", "HWC"), sequences=True,
    ))
