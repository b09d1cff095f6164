"""Schema of clahe: contrast limited adaptive histogram equalization of uint8 images, OpenCV's algorithm (as DALI's
CPU operator, which gives OpenCV's result)."""

from __future__ import annotations

from headrace.output_specs import same_as_input
from headrace.schema import REQUIRED, Arg, Limits, OpSchema, registrar

register = registrar(__name__)

register(OpSchema(
    name="clahe",
    doc="CLAHE of uint8 HWC images of 1 or 3 channels (and HW): histograms equalized per tile of a tiles_y x tiles_x "
        "grid, clipped at clip_limit * tile_area / 256, their tables blended bilinearly between tiles (OpenCV's "
        "createCLAHE). RGB images: on the L channel of CIE Lab (luma_only, the default) or per channel.",
    args=(
        Arg("tiles_x", "int", REQUIRED, "Number of tiles along the width.", limits=Limits(1, 1 << 12)),
        Arg("tiles_y", "int", REQUIRED, "Number of tiles along the height.", limits=Limits(1, 1 << 12)),
        Arg("clip_limit", "float", REQUIRED, "Relative clip limit: a bin holds at most clip_limit * tile_area / "
            "bins counts; 0 or less: no clipping."),
        Arg("luma_only", "bool", True, "RGB images: equalize the luminance (L of CIE Lab) only, else each channel."),
        Arg("bins", "int", 256, "Histogram bins, a power of 2. uint8 images are equalized over their 256 levels "
            "whatever the value, as DALI's CPU operator does.", limits=Limits(2, 1 << 16)),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=same_as_input,
    input_layouts=("HW", "HWC"),
))
