"""Separable linear/triangular resampling on the CPU, compiled by numba: DALI's LINEAR filter, widened by the scale
on axes that shrink when antialiasing, with the edge pixels replicated beyond the border.

Both passes combine whole rows (vectorized, GIL released); the image is transposed (OpenCV) between them so the
horizontal pass is a row pass too.
"""

from __future__ import annotations

import math

import cv2
import numba
import numpy as np

from headrace_kernels.cpu.scratch import scratch

# cv2.transpose moves elements of these sizes (bytes); others go through numpy
_CV_TRANSPOSE_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


@numba.njit(nogil=True, cache=True)
def triangle_taps(in_size: int, out_size: int, antialias: bool, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(source index, weight) of every output pixel's taps, shape (out_size, taps), resampling the source span
    [lo, hi) onto out_size pixels. Pixel centres are aligned (lo + (o + 0.5) * (hi - lo) / out - 0.5); the
    triangle's half-width is the scale when shrinking with antialias, else 1; weights are normalized (in float64,
    then rounded to float32) and taps beyond the border read the edge pixel. Unused taps have weight 0. A span with
    hi < lo is read flipped."""
    scale = (hi - lo) / out_size
    stretch = max(1.0, abs(scale)) if antialias else 1.0
    taps = int(math.ceil(2 * stretch)) + 1
    index = np.zeros((out_size, taps), np.int32)
    weight = np.zeros((out_size, taps), np.float32)
    _fill_triangle_taps(in_size, out_size, antialias, lo, hi, index, weight, np.empty(taps, np.float64))
    return index, weight


@numba.njit(nogil=True, cache=True)
def _fill_triangle_taps(in_size, out_size, antialias, lo, hi, index, weight, raw) -> None:
    """triangle_taps into zeroed (out_size, taps) `index` and `weight`, with `raw` (taps) as scratch."""
    scale = (hi - lo) / out_size
    stretch = max(1.0, abs(scale)) if antialias else 1.0
    taps = index.shape[1]
    for o in range(out_size):
        centre = lo + (o + 0.5) * scale - 0.5
        first = int(math.floor(centre - stretch)) + 1
        last = int(math.ceil(centre + stretch)) - 1
        total = 0.0
        n = 0
        for t in range(first, last + 1):
            w = 1.0 - abs(t - centre) / stretch
            if w > 0.0:
                raw[n] = w
                index[o, n] = min(max(t, 0), in_size - 1)
                total += w
                n += 1
        for k in range(n):
            weight[o, k] = raw[k] / total
        for k in range(n, taps):
            index[o, k] = index[o, n - 1]


@numba.njit(nogil=True, cache=True)
def batch_triangle_taps(in_sizes: np.ndarray, out_sizes: np.ndarray, antialias: bool, lo: np.ndarray,
                        hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`triangle_taps` of many axes at once (one call instead of one per sample, for the GPU kernels' tables),
    written in place: (indices, weights, first element of each axis's table, taps per output pixel of each axis)."""
    n = in_sizes.shape[0]
    starts = np.zeros(n + 1, np.int64)
    counts = np.zeros(n, np.int32)
    widest = 1
    for i in range(n):
        stretch = max(1.0, abs(hi[i] - lo[i]) / out_sizes[i]) if antialias else 1.0
        counts[i] = int(math.ceil(2 * stretch)) + 1
        widest = max(widest, counts[i])
        starts[i + 1] = starts[i] + out_sizes[i] * counts[i]
    index = np.zeros(starts[n], np.int32)
    weight = np.zeros(starts[n], np.float32)
    raw = np.empty(widest, np.float64)
    for i in range(n):
        shape = (np.int64(out_sizes[i]), np.int64(counts[i]))
        _fill_triangle_taps(in_sizes[i], out_sizes[i], antialias, lo[i], hi[i],
                            index[starts[i]:starts[i + 1]].reshape(shape),
                            weight[starts[i]:starts[i + 1]].reshape(shape), raw)
    return index, weight, starts[:n], counts


@numba.njit(nogil=True, cache=True)
def _positive_taps(centre: float, stretch: float) -> tuple[int, int]:
    """The first and last source positions (before clamping) whose triangle weight `_fill_triangle_taps` finds
    positive, computed with its arithmetic."""
    first = int(math.floor(centre - stretch)) + 1
    last = int(math.ceil(centre + stretch)) - 1
    while first < last and 1.0 - abs(first - centre) / stretch <= 0.0:
        first += 1
    while last > first and 1.0 - abs(last - centre) / stretch <= 0.0:
        last -= 1
    return first, last


@numba.njit(nogil=True, cache=True)
def triangle_spans(in_sizes: np.ndarray, out_sizes: np.ndarray, antialias: bool, lo: np.ndarray,
                   hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What `batch_triangle_taps` would make of these axes without making the tables (the GPU makes them): taps
    per output pixel of each axis, and the lowest and highest source index each axis's table holds. Centres are
    monotonic in the output pixel, so the extremes lie at the first and last output pixel."""
    n = in_sizes.shape[0]
    counts = np.zeros(n, np.int32)
    lowest = np.zeros(n, np.int64)
    highest = np.zeros(n, np.int64)
    for i in range(n):
        scale = (hi[i] - lo[i]) / out_sizes[i]
        stretch = max(1.0, abs(scale)) if antialias else 1.0
        counts[i] = int(math.ceil(2 * stretch)) + 1
        low, high = in_sizes[i] - 1, 0
        for o in (0, out_sizes[i] - 1):
            first, last = _positive_taps(lo[i] + (o + 0.5) * scale - 0.5, stretch)
            low = min(low, min(max(first, 0), in_sizes[i] - 1))
            high = max(high, min(max(last, 0), in_sizes[i] - 1))
        lowest[i], highest[i] = low, high
    return counts, lowest, highest


@numba.njit(nogil=True, cache=True)
def combine_rows(src: np.ndarray, index: np.ndarray, weight: np.ndarray, out: np.ndarray, to_uint8: bool) -> None:
    """out[o, :] = sum_k weight[o, k] * src[index[o, k], :], in float32; with `to_uint8` the sums are rounded to
    nearest and saturated to 0..255."""
    width = src.shape[1]
    acc = np.empty(width, np.float32)
    for o in range(index.shape[0]):
        first = src[index[o, 0]]
        w0 = weight[o, 0]
        for j in range(width):
            acc[j] = w0 * np.float32(first[j])
        for k in range(1, index.shape[1]):
            w = weight[o, k]
            if w != 0.0:
                row = src[index[o, k]]
                for j in range(width):
                    acc[j] += w * np.float32(row[j])
        target = out[o]
        if to_uint8:
            for j in range(width):  # + 0.5, then the cast truncates: round half up (rint does not vectorize)
                target[j] = min(max(acc[j] + np.float32(0.5), np.float32(0.0)), np.float32(255.0))
        else:
            for j in range(width):
                target[j] = acc[j]


def _transpose(image: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`out` (W, H, C), C-contiguous, = `image` (H, W, C) with its first two axes swapped."""
    if image.shape[2] * image.itemsize in _CV_TRANSPOSE_SIZES and image.shape[2] <= 4:
        if image.shape[2] == 1:
            cv2.transpose(image[..., 0], dst=out[..., 0])
        else:
            cv2.transpose(image, dst=out)
    else:
        out[...] = image.transpose(1, 0, 2)
    return out


def resample_linear(image: np.ndarray, out_h: int, out_w: int, antialias: bool = True,
                    region: tuple[float, float, float, float] | None = None,
                    out: np.ndarray | None = None) -> np.ndarray:
    """Resize the source `region` (y0, x0, y1, x1; default the whole image) of an (H, W, C) uint8 or float32
    image to (out_h, out_w, C), same dtype, with the triangle filter (see `triangle_taps`). `out`, when given,
    must be a C-contiguous (out_h, out_w, C) array of that dtype."""
    in_h, in_w = image.shape[:2]
    y0, x0, y1, x1 = (0.0, 0.0, float(in_h), float(in_w)) if region is None else (float(v) for v in region)
    if image.size == 0 or out_h < 1 or out_w < 1:
        raise ValueError(f"cannot resample a {image.shape} image to {out_h}x{out_w}")
    rows = triangle_taps(in_h, out_h, antialias, y0, y1)
    cols = triangle_taps(in_w, out_w, antialias, x0, x1)
    return resample_with_taps(image, rows, cols, out)


def resample_with_taps(image: np.ndarray, rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray],
                       out: np.ndarray | None = None) -> np.ndarray:
    """Separable resampling of an (H, W, C) uint8 or float32 image by (index, weight) taps per output row and per
    output column (any filter), into the same dtype. Sums run in float32 in a fixed order, with no BLAS: the
    result does not depend on the thread count, the process or the BLAS build (train/serve parity). The
    temporaries come from this thread's scratch arrays: nothing but the result is allocated."""
    in_h, in_w, channels = image.shape
    out_h, out_w = rows[0].shape[0], cols[0].shape[0]
    if image.dtype not in (np.uint8, np.float32):
        raise TypeError(f"resample_linear takes uint8 or float32 images, got {image.dtype}")
    if image.size == 0 or out_h < 1 or out_w < 1:
        raise ValueError(f"cannot resample a {image.shape} image to {out_h}x{out_w}")
    if not image.flags.c_contiguous:
        source = scratch("resample.source", image.shape, image.dtype)
        source[...] = image
        image = source
    vertical = scratch("resample.vertical", (out_h, in_w * channels), np.float32)
    combine_rows(image.reshape(in_h, in_w * channels), rows[0], rows[1], vertical, False)
    turned = _transpose(vertical.reshape(out_h, in_w, channels),
                        scratch("resample.turned", (in_w, out_h, channels), np.float32))
    horizontal = scratch("resample.horizontal", (out_w, out_h * channels), image.dtype)
    combine_rows(turned.reshape(in_w, out_h * channels), cols[0], cols[1], horizontal, image.dtype == np.uint8)
    if out is None:
        out = np.empty((out_h, out_w, channels), image.dtype)
    elif out.shape != (out_h, out_w, channels) or out.dtype != image.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {(out_h, out_w, channels)} {image.dtype} array")
    return _transpose(horizontal.reshape(out_w, out_h, channels), out)
