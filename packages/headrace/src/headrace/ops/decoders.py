"""Schemas of the image decoders."""

import numpy as np

from headrace.enums import DALIDataType, DALIImageType
from headrace.schema import Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)
CHANNELS = {DALIImageType.RGB: 3, DALIImageType.BGR: 3, DALIImageType.YCbCr: 3, DALIImageType.GRAY: 1}
"""Channels of a decoded image, by `output_type` (ANY_DATA: the file's)."""

_DALI_HINT = "Accepted for DALI compatibility; no effect in headrace."

MAX_PIXELS = 178_956_970
"""`max_pixels`' default: Pillow's DecompressionBombError threshold (2 x `PIL.Image.MAX_IMAGE_PIXELS`): it passes
every camera photo (medium-format frames are about 150 megapixels) and refuses a forged 30000x30000 header."""

DECODER_ARGS = (
    Arg("output_type", "image_type", DALIImageType.RGB, "Colour space of the output: RGB, BGR, GRAY or YCbCr."),
    Arg("dtype", "dtype", DALIDataType.UINT8, "Element type of the output; only UINT8 is supported.",
        choices=(DALIDataType.UINT8,)),
    Arg("adjust_orientation", "bool", True, "Apply the EXIF orientation."),
    Arg("max_pixels", "int", MAX_PIXELS,
        "Largest image decoded, in pixels (height x width as its header states; with image_random_crop too, which "
        "decodes only a window of it). A larger one fails as its sample's error, from its header alone, before "
        "anything is allocated: a decompression bomb costs milliseconds, not its claimed memory. The default, "
        f"{MAX_PIXELS:,}, is Pillow's bomb threshold (2 x MAX_IMAGE_PIXELS): it passes 100-150 megapixel photos "
        "and refuses 30000x30000. 0: no limit. headrace's own: DALI has no such argument.",
        limits=Limits(0, 1 << 62)),
    Arg("on_error", "str", "raise", "An image that cannot be decoded: 'raise' an error naming the sample, its file "
        "and the op, or 'skip' it: its slot gets the reader's next sample (every op before runs on it), the batch "
        "stays full and the epoch keeps its length (a repeat at its end); a warning per batch, and Pipeline.skipped "
        "lists what was skipped. Needs readers that can give replacements (not external_source). headrace's own.",
        choices=("raise", "skip")),
    Arg("hw_decoder_load", "float", 0.65, "Share of images sent to the hardware JPEG decoder (mixed only)."),
    Arg("use_fast_idct", "bool", False, _DALI_HINT),
    Arg("jpeg_fancy_upsampling", "bool", False, _DALI_HINT),
    Arg("preallocate_width_hint", "int", 0, _DALI_HINT),
    Arg("preallocate_height_hint", "int", 0, _DALI_HINT),
    Arg("device_memory_padding", "int", 16 << 20, _DALI_HINT),
    Arg("host_memory_padding", "int", 8 << 20, _DALI_HINT),
    Arg("device_memory_padding_jpeg2k", "int", 0, _DALI_HINT),
    Arg("host_memory_padding_jpeg2k", "int", 0, _DALI_HINT),
    Arg("affine", "bool", True, _DALI_HINT),
    Arg("memory_stats", "bool", False, _DALI_HINT),
)

RANDOM_CROP_ARGS = (
    Arg("random_area", "float", [0.08, 1.0], "Range of the crop's area as a fraction of the image's.",
        list_of=True, list_len=(1, 2)),
    Arg("random_aspect_ratio", "float", [3 / 4, 4 / 3], "Range of the crop's width/height ratio (log-uniform).",
        list_of=True, list_len=(1, 2)),
    Arg("num_attempts", "int", 10, "Tries at a window that fits before falling back to a centre crop."),
)

def decoded(a: SpecArgs) -> list[OutputSpec]:
    """Decoded images: uint8 HWC in the colour space `output_type` (height and width vary)."""
    output_type = a.args["output_type"]
    return [OutputSpec(np.uint8, "HWC", (-1, -1, CHANNELS.get(output_type, -1)), output_type.name)]


register(OpSchema(
    name="decoders.image",
    doc="Decodes encoded images (JPEG, PNG, TIFF, JPEG 2000, BMP, WebP, ...) into HWC uint8.",
    args=DECODER_ARGS,
    min_inputs=1, max_inputs=1,
    devices=("cpu", "mixed"),
    state="none", output_spec=decoded,
))

register(OpSchema(
    name="decoders.image_random_crop",
    doc="Decodes only a random window of each image (Inception-style area and aspect ratio): the ROI decode is "
        "where the speed comes from.",
    args=DECODER_ARGS + RANDOM_CROP_ARGS,
    min_inputs=1, max_inputs=1,
    devices=("cpu", "mixed"),
    random=True,
    state="rng", output_spec=decoded,
))
