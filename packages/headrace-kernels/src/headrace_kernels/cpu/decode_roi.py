"""decoders.image_crop and decoders.image_slice on the CPU: the window comes from the image's header (its size as
displayed) and the arguments, and only that region is decoded (nvImageCodec's ROI decode). The window rules are
shared with the mixed decoders (gpu/decode_roi.py), so CPU and GPU decode the same region."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.cpu import decode as cpu_decode
from headrace_kernels.cpu.signal_ops import llround_array, positional_span, slice_axes, slice_window
from headrace_kernels.registry import cpu_kernel
from headrace_kernels.windows import crop_anchor

_WINDOW_ARGS = ("start", "rel_start", "end", "rel_end", "shape", "rel_shape")
Window = tuple[int, int, int, int]
"""(y, x, h, w) of a region of the displayed image."""

_SLICE_ONLY = {"out_of_bounds_policy": "pad", "fill_values": [0.0], "dtype": None}
"""slice's own arguments that the decoder does not have (a window outside the image is then check_window's
error, as in DALI)."""


def check_window(window: Window, height: int, width: int, source: str) -> Window:
    """The window, or DALI's error (naming the arguments it came from) when it is empty or reaches outside."""
    y, x, h, w = window
    if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > height or x + w > width:
        raise ValueError(f"the cropping window [{y}..{y + h}, {x}..{x + w}] given by {source} is not valid for the "
                         f"image's dimensions [{height} x {width}]: it must be non-empty and inside the image")
    return window


def _anchor(extent: int, crop: int, pos: float, rounding: str) -> int:
    """Top/left of the window: pos * (extent - crop), rounded half away from zero or truncated."""
    if rounding == "truncate":
        return math.trunc(pos * (extent - crop))
    return crop_anchor(extent, crop, pos)


def crop_region(height: int, width: int, args: dict) -> Window:
    """decoders.image_crop's window of a `height` x `width` image: `crop` (h, w) or crop_h / crop_w (a missing
    extent is the image's; fractions truncated, as DALI's), placed at crop_pos_y / crop_pos_x with `rounding`."""
    crop = args.get("crop")
    if crop is not None and len(crop) != 2:
        raise ValueError(f"argument 'crop': an image takes 2 values (crop_H, crop_W), got {len(crop)}")
    extents = crop if crop is not None else (args.get("crop_h") or 0.0, args.get("crop_w") or 0.0)
    crop_h, crop_w = (math.trunc(e) if e else whole for e, whole in zip(extents, (height, width), strict=True))
    y = _anchor(height, crop_h, float(args["crop_pos_y"]), args["rounding"])
    x = _anchor(width, crop_w, float(args["crop_pos_x"]), args["rounding"])
    size = "argument 'crop'" if crop is not None else "arguments 'crop_h' / 'crop_w'"
    return check_window((y, x, crop_h, crop_w), height, width, f"{size} at 'crop_pos_y' / 'crop_pos_x'")


def slice_region(height: int, width: int, args: dict, anchor=None, extent=None) -> Window:
    """decoders.image_slice's window of a `height` x `width` image: slice's coordinates (positional anchor and shape,
    or start / rel_start with end / rel_end / shape / rel_shape, over `axes` / `axis_names`, default 'WH')."""
    if (anchor is None) != (extent is None):
        raise ValueError("give both positional inputs, anchor and shape, or neither")
    window = slice_window((height, width, 3), {**_SLICE_ONLY, **args}, anchor, extent, np.dtype(np.uint8))
    if window.shape[2] != 3 or window.anchor[2] != 0:
        raise ValueError("the slice may cover only the H and W axes of an image (axes 0 and 1)")
    (y, x, _), (h, w, _) = window.anchor, window.shape
    named = [f"'{n}'" for n in _WINDOW_ARGS if args.get(n) is not None]
    source = "the anchor and shape inputs" if anchor is not None else "arguments " + " / ".join(named)
    return check_window((y, x, h, w), height, width, source)


def _stacked(anchors: list, extents: list) -> tuple[np.ndarray, np.ndarray] | None:
    """The anchor and shape inputs as two (n, ...) float arrays of one sample shape, or None where they are not: the
    batch's own arrays where both are Columns of one (the rows of the CPU stage's output), else the samples
    stacked."""
    dense = getattr(anchors, "dense", None), getattr(extents, "dense", None)
    if dense[0] is not None and dense[1] is not None:
        same = dense[0].shape == dense[1].shape
        return dense if same and dense[0].dtype.kind == "f" and dense[1].dtype.kind == "f" else None
    anchors, extents = [np.asarray(a) for a in anchors], [np.asarray(e) for e in extents]
    shape = anchors[0].shape
    if any(a.dtype.kind != "f" or e.dtype.kind != "f" or a.shape != shape or e.shape != shape
           for a, e in zip(anchors, extents, strict=True)):
        return None
    return np.asarray(anchors), np.asarray(extents)


def slice_regions(heights: np.ndarray, widths: np.ndarray, args: dict, anchors: list,
                  extents: list) -> np.ndarray | None:
    """slice_region of every image of a batch from float anchor and shape inputs, in one pass of array arithmetic:
    (n, 4) windows (y, x, h, w), or None when a sample needs the per-sample rules (other input types or sizes,
    named coordinates, a window that is empty or reaches outside: slice_region gives those their errors)."""
    n = len(anchors)
    if n == 0 or len(extents) != n or any(args.get(name) is not None for name in _WINDOW_ARGS):
        return None
    stacked = _stacked(anchors, extents)
    if stacked is None:
        return None
    starts, sizes = (a.astype(np.float64).reshape(n, -1) for a in stacked)
    axes = slice_axes({**_SLICE_ONLY, **args}, 3)
    if sorted(axes) != [0, 1] or starts.shape[1] != 2:
        return None
    image = np.stack([heights, widths], axis=1).astype(np.float64)[:, axes]  # each axis' extent, in axes' order
    begins, ends = positional_span(starts, sizes, image, args["normalized_anchor"], args["normalized_shape"])
    if not (np.isfinite(begins).all() and np.isfinite(ends).all() and (np.abs(begins) < 2**62).all()
            and (np.abs(ends) < 2**62).all() and (ends >= begins).all()):
        return None
    first_pixel = llround_array(begins)
    length = llround_array(ends) - first_pixel
    windows = np.zeros((n, 4), np.int64)
    for k, axis in enumerate(axes):  # axis 0: y and h; axis 1: x and w
        windows[:, axis], windows[:, 2 + axis] = first_pixel[:, k], length[:, k]
    y, x, h, w = windows.T
    if ((y < 0) | (x < 0) | (h <= 0) | (w <= 0) | (y + h > heights) | (x + w > widths)).any():
        return None
    return windows


def decode_region(data, args: dict, region) -> np.ndarray:
    """Parse the header of `data`, choose the window by `region(height, width)` in the displayed frame, and
    decode only that window."""
    stream = cpu_decode.code_stream(data, args["max_pixels"])
    height, width, _ = cpu_decode.displayed_size(stream, data, args["adjust_orientation"])
    window = region(height, width)
    return cpu_decode.decode_stream(stream, int(args["output_type"]), args["adjust_orientation"], window)


@cpu_kernel("decoders.image_crop")
def decode_crop(inputs, args, ctx):
    return decode_region(inputs[0], args, lambda h, w: crop_region(h, w, args))


@cpu_kernel("decoders.image_slice")
def decode_slice(inputs, args, ctx):
    anchor, extent = (inputs[1], inputs[2]) if len(inputs) == 3 else (None, None)
    if len(inputs) == 2:
        raise ValueError("give both positional inputs, anchor and shape, or neither")
    return decode_region(inputs[0], args, lambda h, w: slice_region(h, w, args, anchor, extent))
