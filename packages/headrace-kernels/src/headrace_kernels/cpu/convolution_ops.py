"""CPU kernels of filter / experimental.filter and laplacian: float32 correlations (OpenCV) of HW / HWC images, the
border made by padding (numpy), converted to the output type as DALI's ConvertSat. The argument checks and windows
are shared with the GPU kernels."""

from __future__ import annotations

from math import comb
from typing import Any

import cv2
import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

PAD_MODES = {"reflect_101": "reflect", "reflect_1001": "symmetric", "wrap": "wrap", "clamp": "edge",
             "constant": "constant"}
"""DALI's border names -> numpy.pad's (and cupy.pad's) modes."""


def checked_image(image: Any, op: str) -> Any:
    """An HW or HWC sample, else a ValueError naming the op."""
    if image.ndim not in (2, 3):
        raise ValueError(f"{op} expects HW or HWC images, got shape {tuple(image.shape)}")
    return image


def output_dtype(args: dict, source: np.dtype) -> np.dtype:
    """The output type: `dtype` (the input's or float32), default the input's."""
    source = np.dtype(source)
    if args.get("dtype") is None:
        return source
    dtype = numpy_dtype(args["dtype"])
    if dtype != source and dtype != np.float32:
        raise ValueError(f"argument 'dtype' must be the input's type ({source}) or FLOAT, got {dtype}")
    return dtype


def filter_geometry(image_hw: tuple[int, int], window: np.ndarray, args: dict) -> tuple[list[tuple[int, int]],
                                                                                         tuple[int, int]]:
    """((pad before, pad after) for H and W, output (height, width)) of a correlation with `window`."""
    if window.ndim != 2 or window.size == 0:
        raise ValueError(f"the filter (second input) must be a non-empty 2D array for HW / HWC images, got shape "
                         f"{tuple(window.shape)}")
    extents = window.shape
    if args.get("mode", "same") == "valid":
        out = tuple(n - r + 1 for n, r in zip(image_hw, extents, strict=True))
        if min(out) < 1:
            raise ValueError(f"mode 'valid': the filter {tuple(extents)} is larger than the image "
                             f"{tuple(image_hw)}")
        return [(0, 0), (0, 0)], out
    anchor = [int(a) for a in np.asarray(args.get("anchor", [-1])).ravel()]
    anchor = anchor * 2 if len(anchor) == 1 else anchor
    if len(anchor) != 2:
        raise ValueError(f"argument 'anchor' needs 1 or 2 values, got {len(anchor)}")
    pads = []
    for a, r in zip(anchor, extents, strict=True):
        a = r // 2 if a == -1 else a
        if not 0 <= a < r:
            raise ValueError(f"argument 'anchor' must lie within the filter's extents {tuple(extents)} (or be -1), "
                             f"got {anchor}")
        pads.append((a, r - 1 - a))
    return pads, tuple(image_hw)


def fill_value(inputs: list, dtype: np.dtype) -> float:
    """The constant border's value: the third input's scalar, default 0."""
    if len(inputs) < 3:
        return 0.0
    value = np.asarray(inputs[2])
    if value.size != 1:
        raise ValueError(f"the fill value (third input) must be one scalar, got shape {value.shape}")
    if value.dtype != dtype:
        raise ValueError(f"the fill value (third input) must have the input's type {dtype}, got {value.dtype}")
    return float(value.ravel()[0])


def padded(image: np.ndarray, pads: list[tuple[int, int]], border: str, fill: float) -> np.ndarray:
    """`image` as float32 padded over H and W with DALI's `border` rule."""
    source = image.astype(np.float32)
    widths = [*pads, *([(0, 0)] if image.ndim == 3 else [])]
    if border == "constant":
        return np.pad(source, widths, mode="constant", constant_values=np.float32(fill))
    return np.pad(source, widths, mode=PAD_MODES[border])


def correlate_valid(source: np.ndarray, window: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """out[y, x] = sum window[i, j] * source[y + i, x + j] over (out_h, out_w): no border is read."""
    planes = [source] if source.ndim == 2 or source.shape[2] <= 4 else [source[..., c] for c in range(source.shape[2])]
    kernel = np.ascontiguousarray(window, dtype=np.float32)
    results = [cv2.filter2D(p, cv2.CV_32F, kernel, anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)
               for p in planes]
    out = results[0] if len(results) == 1 else np.stack(results, axis=-1)
    out = out.reshape(source.shape)
    return out[:out_hw[0], :out_hw[1]]


def filter_image(inputs: list, args: dict, op: str) -> np.ndarray:
    image = checked_image(np.asarray(inputs[0]), op)
    window = np.asarray(inputs[1], dtype=np.float32)
    dtype = output_dtype(args, image.dtype)
    pads, out_hw = filter_geometry(image.shape[:2], window, args)
    source = padded(image, pads, args.get("border", "reflect_101"), fill_value(inputs, image.dtype))
    return saturate_cast(correlate_valid(source, window, out_hw), dtype)


@cpu_kernel("filter", "experimental.filter")
def filter_op(inputs, args, ctx):
    return filter_image(inputs, args, "filter")


def _per_axis(args: dict, name: str, default: list | None = None) -> list | None:
    value = args.get(name)
    if value is None:
        return default
    values = np.asarray(value).ravel().tolist()
    if len(values) not in (1, 2):
        raise ValueError(f"argument '{name}' needs 1 or 2 values (H, W), got {len(values)}")
    return values * 2 if len(values) == 1 else values


def binomial(size: int) -> np.ndarray:
    """The smoothing window of `size`: the binomial coefficients C(size - 1, k)."""
    return np.array([comb(size - 1, k) for k in range(size)], dtype=np.float64)


def derivative(size: int) -> np.ndarray:
    """The second-derivative window of odd `size` >= 3: [1, -2, 1] convolved with the binomial of size - 2."""
    return np.convolve([1.0, -2.0, 1.0], binomial(size - 2))


def laplacian_windows(args: dict) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """For d2/dy2 and d2/dx2: (window along H, window along W, factor), as DALI builds them."""
    windows = [int(w) for w in _per_axis(args, "window_size", [3, 3])]
    smoothing = _per_axis(args, "smoothing_size")
    scale = [float(s) for s in _per_axis(args, "scale", [1.0, 1.0])]
    for w in windows:
        if w % 2 == 0 or not 3 <= w <= 23:
            raise ValueError(f"argument 'window_size' must be odd and in [3, 23], got {w}")
    for s in smoothing or []:
        if int(s) % 2 == 0 or not 1 <= int(s) <= 23:
            raise ValueError(f"argument 'smoothing_size' must be odd and in [1, 23], got {int(s)}")
    if args.get("normalized_kernel") and scale != [1.0, 1.0]:
        raise ValueError("argument 'scale' cannot be used with normalized_kernel=True")
    out = []
    for axis in (0, 1):
        other = 1 - axis
        smooth = int(smoothing[other]) if smoothing is not None else windows[axis]  # DALI: the derivative's size
        factor = scale[axis]
        if args.get("normalized_kernel"):
            factor = 2.0 ** (-(windows[axis] + smooth) + 2 + 2)
        pair = (derivative(windows[axis]), binomial(smooth))
        out.append((pair[0], pair[1], factor) if axis == 0 else (pair[1], pair[0], factor))
    return out


def laplacian_window_2d(args: dict) -> np.ndarray:
    """The whole Laplacian as one 2D window (the sum of the partials' outer products, centred): the GPU's filter."""
    parts = [factor * np.outer(wy, wx) for wy, wx, factor in laplacian_windows(args)]
    height, width = max(p.shape[0] for p in parts), max(p.shape[1] for p in parts)
    total = np.zeros((height, width))
    for p in parts:
        top, left = (height - p.shape[0]) // 2, (width - p.shape[1]) // 2
        total[top:top + p.shape[0], left:left + p.shape[1]] += p
    return total


@cpu_kernel("laplacian")
def laplacian(inputs, args, ctx):
    image = checked_image(np.asarray(inputs[0]), "laplacian")
    dtype = output_dtype(args, image.dtype)
    source = image.astype(np.float32)
    planes = [source] if image.ndim == 2 or image.shape[2] <= 4 else [source[..., c] for c in range(image.shape[2])]
    results = []
    for plane in planes:
        total = np.zeros(plane.shape, np.float32)
        for wy, wx, factor in laplacian_windows(args):
            total += np.float32(factor) * cv2.sepFilter2D(plane, cv2.CV_32F, wx.astype(np.float32),
                                                          wy.astype(np.float32), borderType=cv2.BORDER_REFLECT_101)
        results.append(total)
    out = results[0] if len(results) == 1 else np.stack(results, axis=-1)
    return saturate_cast(out.reshape(image.shape), dtype)
