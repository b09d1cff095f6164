"""Schemas of debayer (and its DALI alias experimental.debayer): demosaicing of single-channel Bayer images into
RGB, with OpenCV's algorithms as DALI's CPU operator uses them."""

from __future__ import annotations

from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

DEBAYER_ALGORITHMS = ("default_npp", "bilinear_ocv", "edgeaware_ocv", "vng_ocv", "gray_ocv")


def _debayered(a: SpecArgs) -> list[OutputSpec]:
    """HWC images (FHWC sequences) of the input's type and extents: 3 channels (RGB), 1 for algorithm 'gray_ocv'."""
    first = a.first
    channels = 1 if a.args.get("algorithm") == "gray_ocv" else 3
    frames = 1 if (first.layout or "").startswith("F") else 0
    dims = first.dims
    if dims is not None and len(dims) in (2 + frames, 3 + frames):
        dims = (*dims[:2 + frames], channels)
    else:
        dims = None
    return [OutputSpec(first.dtype, "FHWC" if frames else "HWC", dims)]


for _name in ("debayer", "experimental.debayer"):
    register(OpSchema(
        name=_name,
        doc=("" if _name == "debayer" else "DALI's earlier name of `debayer`: ") +
            "Demosaics uint8 / uint16 Bayer images (HW, or HWC of 1 channel; FHW / FHWC sequences frame by frame) "
            "into RGB (HWC / FHWC). Algorithms: "
            "bilinear_ocv (the default; default_npp, DALI's GPU default, is taken as the same bilinear rule), "
            "edgeaware_ocv, vng_ocv (uint8 only) and gray_ocv (1 channel out), OpenCV's demosaicing as in DALI's "
            "CPU operator.",
        args=(
            Arg("blue_position", "int", REQUIRED, "(row, column) of blue in the 2x2 Bayer tile that starts at the "
                "sensor's second row and column: (0, 0) BGGR, (0, 1) GBRG, (1, 0) GRBG, (1, 1) RGGB (OpenCV's "
                "names); for sequences one pair, or one per frame (fn.per_frame, flattened).", list_of=True,
                list_len=(2, 1 << 16), tensor_input=True),
            Arg("algorithm", "str", None, "The demosaicing algorithm; default bilinear.", choices=DEBAYER_ALGORITHMS),
        ),
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=_debayered,
        input_layouts=("HW", "HWC", "FHW", "FHWC"),
    ))
