"""CPU kernel of resize_crop_mirror: the resize plan and the crop window in the resized image, mapped back to a
source region that is resampled once onto the window (resize's resampler), then flipped, as DALI's fused op."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.cpu.geometry_ops import resample_as, resize_region
from headrace_kernels.registry import cpu_kernel
from headrace_kernels.windows import crop_size


def window_anchor(extent: int, crop: int, pos: float, rounding: str) -> int:
    """The window's top / left in the resized image, pos (a float32, as DALI reads it) * (extent - crop), rounded
    half away from zero or truncated toward zero."""
    offset = float(np.float32(pos)) * (extent - crop)
    if rounding == "truncate":
        return math.trunc(offset)
    return int(math.copysign(math.floor(abs(offset) + 0.5), offset))


def source_window(height: int, width: int, args: dict) -> tuple[int, int, tuple[float, float, float, float]]:
    """(crop_h, crop_w, source region (y0, x0, y1, x1)) that resizing then cropping reads from the input."""
    out_h, out_w, region = resize_region(height, width, args)
    crop_h, crop_w = crop_size(args, out_h, out_w)
    if crop_h <= 0 or crop_w <= 0:
        raise ValueError(f"argument 'crop' gives an empty window {crop_h}x{crop_w}")
    y = window_anchor(out_h, crop_h, float(args["crop_pos_y"]), args.get("rounding", "round"))
    x = window_anchor(out_w, crop_w, float(args["crop_pos_x"]), args.get("rounding", "round"))
    f32 = np.float32  # DALI maps the window back in float32: nearest-neighbour picks depend on its rounding
    zoom_y, zoom_x = f32(out_h) / f32(region[2] - region[0]), f32(out_w) / f32(region[3] - region[1])
    top, left = f32(region[0]), f32(region[1])
    return crop_h, crop_w, (float(top + f32(y) / zoom_y), float(left + f32(x) / zoom_x),
                            float(top + f32(y + crop_h) / zoom_y), float(left + f32(x + crop_w) / zoom_x))


@cpu_kernel("resize_crop_mirror", "fast_resize_crop_mirror")
def resize_crop_mirror(inputs, args, ctx):
    image = np.asarray(inputs[0])
    if image.ndim != 3:
        raise ValueError(f"resize_crop_mirror expects HWC images, got shape {image.shape}")
    crop_h, crop_w, region = source_window(image.shape[0], image.shape[1], args)
    out = resample_as(image, crop_h, crop_w, args, region)
    mirror = int(args["mirror"])
    if mirror & 1:
        out = out[:, ::-1]
    if mirror & 2:
        out = out[::-1]
    return np.ascontiguousarray(out)
