"""CPU kernels of erase and paste (numpy slicing)."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.cpu.axes import default_layout, resolve_axes
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.registry import cpu_kernel


def fill_channel_axis(shape: tuple[int, ...], axes: list[int], channels: int) -> int:
    """The axis a per-channel fill runs along: the assumed layout's C if it is free, else the one free axis whose
    extent is `channels`."""
    layout = default_layout(len(shape))
    if "C" in layout and layout.index("C") not in axes and shape[layout.index("C")] == channels:
        return layout.index("C")
    free = [a for a in range(len(shape)) if a not in axes and shape[a] == channels]
    if len(free) != 1:
        raise ValueError(f"{channels} fill values for a sample of shape {shape} erased over axes {axes}: cannot tell "
                         "the channel axis (give one fill value, or one per channel of a single free axis)")
    return free[0]


def _fill_array(fill_value, shape: tuple[int, ...], axes: list[int], dtype: np.dtype) -> np.ndarray:
    """The fill as an array that broadcasts over a region of a sample of `shape`."""
    fill = np.asarray(fill_value, dtype=np.float64).ravel()
    if fill.size == 1:
        return saturate_cast(fill.reshape(()), dtype)
    axis = fill_channel_axis(shape, axes, fill.size)
    view = [1] * len(shape)
    view[axis] = fill.size
    return saturate_cast(fill.reshape(view), dtype)


@cpu_kernel("erase")
def erase(inputs, args, ctx):
    data = np.asarray(inputs[0])
    axes = resolve_axes(args["axes"], args["axis_names"] if args["axes"] is None else None, data.ndim,
                        default=resolve_axes(None, "HW", data.ndim) if data.ndim >= 2 else [0])
    anchor, shape = list(args["anchor"]), list(args["shape"])
    n = len(axes)
    if not shape:
        raise ValueError("give the region's `shape`")
    if not anchor:
        anchor = [0.0] * len(shape)
    if len(shape) % n or len(anchor) != len(shape):
        raise ValueError(f"anchor ({len(anchor)} values) and shape ({len(shape)} values) must both give "
                         f"{n} values (one per axis of {axes}) for each region")
    norm_anchor = args["normalized"] or args["normalized_anchor"]
    norm_shape = args["normalized"] or args["normalized_shape"]
    out = np.array(data)
    fill = _fill_array(args["fill_value"], data.shape, axes, data.dtype)
    for region in range(len(shape) // n):
        window = [slice(None)] * data.ndim
        channel_fill = fill
        for k, axis in enumerate(axes):
            extent = data.shape[axis]
            start, size = anchor[region * n + k], shape[region * n + k]
            start, size = start * extent if norm_anchor else start, size * extent if norm_shape else size
            if args["centered_anchor"]:
                start -= size / 2
            begin, end = math.floor(start), math.floor(start + size)  # DALI's rounding of fractional regions
            window[axis] = slice(min(max(begin, 0), extent), min(max(end, 0), extent))
        out[tuple(window)] = channel_fill
    return out


def paste_canvas(image_shape: tuple[int, ...], args: dict) -> tuple[int, int, int, int, np.ndarray]:
    """(out_h, out_w, top, left, fill per channel) of `paste` for one image, with its checks. Shared with the GPU
    kernel."""
    if len(image_shape) != 3:
        raise ValueError(f"paste expects HWC images, got shape {tuple(image_shape)}")
    height, width, channels = image_shape
    if channels != args["n_channels"]:
        raise ValueError(f"the image has {channels} channels; n_channels is {args['n_channels']}")
    ratio = args["ratio"]
    if ratio < 1:
        raise ValueError(f"ratio must be at least 1, got {ratio}")
    # DALI's placement: float32 products truncated, for the canvas and for the offset into its free space
    f32 = np.float32
    out_h = max(int(f32(height) * f32(ratio)), int(f32(args["min_canvas_size"])))
    out_w = max(int(f32(width) * f32(ratio)), int(f32(args["min_canvas_size"])))
    for name in ("paste_x", "paste_y"):
        if not 0 <= args[name] <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {args[name]}")
    top = int(f32(args["paste_y"]) * f32(out_h - height))
    left = int(f32(args["paste_x"]) * f32(out_w - width))
    fill = np.asarray(args["fill_value"], dtype=np.float64).ravel()
    if fill.size not in (1, channels):
        raise ValueError(f"fill_value has {fill.size} values; the image has {channels} channels")
    return out_h, out_w, top, left, np.broadcast_to(fill, (channels,))


@cpu_kernel("paste")
def paste(inputs, args, ctx):
    image = np.asarray(inputs[0])
    out_h, out_w, top, left, fill = paste_canvas(image.shape, args)
    height, width, channels = image.shape
    out = np.empty((out_h, out_w, channels), dtype=image.dtype)
    out[...] = saturate_cast(fill, image.dtype)
    out[top:top + height, left:left + width] = image
    return out
