"""CPU kernels of resize (and experimental.resize), crop, flip, random_resized_crop and the fused
crop_mirror_normalize."""

from __future__ import annotations

import math

import cv2
import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.lut_loops import lookup_into
from headrace_kernels.cpu.resampling import resample_with_taps, triangle_taps
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel, output_array
from headrace_kernels.windows import crop_anchor, crop_size, random_crop_window, resize_plan

INTERP_NN, INTERP_LINEAR, INTERP_CUBIC, INTERP_LANCZOS3, INTERP_TRIANGULAR, INTERP_GAUSSIAN = range(6)
_FLOAT_OUTPUTS = (np.float16, np.float32, np.float64)


def _hwc(image: np.ndarray, op: str) -> np.ndarray:
    if image.ndim == 2:
        return image[..., None]
    if image.ndim != 3:
        raise ValueError(f"{op} expects HWC images (3 dims), got shape {image.shape}")
    return image


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, 1.0 - np.abs(x))


def _cubic(x: np.ndarray) -> np.ndarray:
    """Catmull-Rom (a = -0.5), DALI's and Pillow's cubic."""
    x = np.abs(x)
    return np.where(x < 1, (1.5 * x - 2.5) * x * x + 1, np.where(x < 2, ((-0.5 * x + 2.5) * x - 4) * x + 2, 0.0))


def _lanczos3(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


_FILTERS = {INTERP_LINEAR: (_triangle, 1.0), INTERP_TRIANGULAR: (_triangle, 1.0), INTERP_CUBIC: (_cubic, 2.0),
            INTERP_LANCZOS3: (_lanczos3, 3.0)}

_F32 = np.float32
_GAUSSIAN_TABLE = np.exp(-np.square(_F32(4) * (np.arange(65, dtype=_F32) - _F32(32)) / _F32(64)), dtype=_F32)


def _table_lerp(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """DALI's tabulated filter at (float32) table positions x: linear between entries, 0 before -1 and from
    len(table) on (so it falls to 0 over one step past either end)."""
    x0 = np.floor(x)
    inside = (x > -1) & (x < table.size)
    i0 = np.clip(x0.astype(np.int64), -1, table.size)
    padded = np.concatenate([[0], table, [0, 0]]).astype(_F32)
    f0, f1 = padded[i0 + 1], padded[i0 + 2]
    return np.where(inside, f0 + (x - x0).astype(_F32) * (f1 - f0), _F32(0)).astype(_F32)


def _gaussian_taps(in_size: int, out_size: int, antialias: bool, lo: float, hi: float) -> tuple[np.ndarray, ...]:
    """INTERP_GAUSSIAN's taps as DALI's CPU resampler makes them, in its float32 arithmetic: exp(-x^2) tabulated
    at 65 points over a window of 2 * radius pixels (radius = the scale when shrinking with antialias, else 1),
    its taps from the first pixel at or right of the window's start, weights interpolated in the table and
    normalized. (It is not centred: at scale 1 it still smooths, a little to one side.)"""
    scale = (_F32(hi) - _F32(lo)) / _F32(out_size)
    extent = abs(_F32(hi) - _F32(lo))
    radius = extent / _F32(out_size) if antialias and extent > out_size else _F32(1)
    sigma = _F32(float(radius * _F32(0.5)) / np.sqrt(2.0))
    width = max(_F32(1), _F32(4 * np.sqrt(2.0)) * sigma)
    table_scale = _F32(64) / width
    anchor = _F32(32) / table_scale
    support = int(np.ceil(_F32(64) / table_scale))
    start = _F32(lo) + (_F32(0.5) * scale - _F32(0.5) - anchor)
    first = np.arange(out_size, dtype=_F32) * scale + start
    index = np.ceil(first)
    offsets = ((index - first)[:, None] + np.arange(support, dtype=_F32)[None, :]).astype(_F32)
    weights = _table_lerp(_GAUSSIAN_TABLE, (offsets * table_scale).astype(_F32))
    total = weights.sum(axis=1, dtype=_F32, keepdims=True)
    weights = np.where(total != 0, weights / np.where(total != 0, total, 1), weights).astype(_F32)
    taps = index.astype(np.int64)[:, None] + np.arange(support)[None, :]
    return (np.ascontiguousarray(np.clip(taps, 0, in_size - 1), dtype=np.int32),
            np.ascontiguousarray(weights, dtype=np.float32))


def _filter_taps(in_size: int, out_size: int, interp: int, antialias: bool, lo: float,
                 hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(source index, weight) of every output pixel, shape (out_size, taps), resampling the source span [lo, hi)
    onto out_size pixels: pixel centres aligned, the filter widened by the scale when shrinking with antialias,
    taps beyond the border clamped to the edge pixel (as DALI does); weights normalized in float64."""
    kernel, support = _FILTERS[interp]
    scale = (hi - lo) / out_size
    stretch = max(1.0, abs(scale)) if antialias else 1.0  # a flipped span (hi < lo) has a negative scale
    radius = int(np.ceil(support * stretch))
    centres = lo + (np.arange(out_size) + 0.5) * scale - 0.5
    taps = np.floor(centres)[:, None].astype(np.int64) + np.arange(-radius, radius + 2)[None, :]
    weights = kernel((taps - centres[:, None]) / stretch)
    weights /= weights.sum(axis=1, keepdims=True)
    return (np.ascontiguousarray(np.clip(taps, 0, in_size - 1), dtype=np.int32),
            np.ascontiguousarray(weights, dtype=np.float32))


def _nearest_indices(in_size: int, out_size: int, lo: float, hi: float, accumulate: bool) -> np.ndarray:
    """Source index of each output pixel: the pixel centre lo + (i + 0.5) * (hi - lo) / out in float32, as DALI
    computes it (rows by accumulating the step, columns by multiplying), so that ties land on the same side."""
    step = (np.float32(hi) - np.float32(lo)) / np.float32(out_size)
    start = np.float32(lo) + step * np.float32(0.5)
    if accumulate:
        positions = np.full(out_size, step, np.float32)
        positions[0] = start
        positions = np.cumsum(positions, dtype=np.float32)
    else:
        positions = np.arange(out_size, dtype=np.float32) * step + start
    return np.clip(np.floor(positions).astype(np.int64), 0, in_size - 1)


Taps = tuple[np.ndarray, np.ndarray]  # (source index int32, weight float32), shape (out_size, taps)
Filters = int | tuple[int, int]  # one filter for both axes, or (min_filter, mag_filter)


def interp_filters(args) -> tuple[int, int]:
    """(min_filter, mag_filter) of resize-family arguments: the filter of axes that shrink and of the others;
    each is interp_type unless given, as DALI's."""
    interp = int(args["interp_type"])
    low, high = args.get("min_filter"), args.get("mag_filter")
    return interp if low is None else int(low), interp if high is None else int(high)


def axis_filter(filters: Filters, out_size: int, lo: float, hi: float) -> int:
    """The filter of one axis: DALI's min_filter where the output is smaller than the source span, else mag_filter."""
    if not isinstance(filters, tuple):
        return int(filters)
    return filters[0] if out_size < abs(hi - lo) else filters[1]


def _axis_taps(in_size: int, out_size: int, interp: int, antialias: bool, lo: float, hi: float, dtype: np.dtype,
               accumulate: bool, gaussian: bool) -> Taps:
    """One axis's (index, weight) table; NN as one tap of weight 1 at DALI's nearest pixel."""
    if interp == INTERP_NN:
        index = _nearest_indices(in_size, out_size, lo, hi, accumulate).astype(np.int32)[:, None]
        return index, np.ones(index.shape, np.float32)
    if interp == INTERP_GAUSSIAN:
        if not gaussian:
            raise ValueError("INTERP_GAUSSIAN is not supported here")
        return _gaussian_taps(in_size, out_size, antialias, lo, hi)
    if interp not in _FILTERS:
        raise ValueError(f"unknown interpolation type {interp}")
    if interp in (INTERP_CUBIC, INTERP_LANCZOS3) or np.dtype(dtype) not in (np.uint8, np.float32):
        return _filter_taps(in_size, out_size, interp, antialias, lo, hi)
    return triangle_taps(in_size, out_size, antialias, lo, hi)


def resample_taps(in_h: int, in_w: int, out_h: int, out_w: int, interp: Filters, antialias: bool,
                  region: tuple[float, float, float, float], dtype: np.dtype,
                  gaussian: bool = False) -> tuple[Taps, Taps] | None:
    """The (rows, columns) tap tables with which `resample` maps `region` of an (in_h, in_w) image of `dtype` onto
    (out_h, out_w), or None when it is a plain copy. `interp` is one filter, or (min_filter, mag_filter) chosen per
    axis (`axis_filter`). A region with y1 < y0 (x1 < x0) is read flipped. INTERP_GAUSSIAN (DALI's window of 2-D
    image resizing, which smooths even at scale 1) only with `gaussian`. The GPU kernels take the same tables, so
    both devices sum the same terms in the same order."""
    y0, x0, y1, x1 = region
    row_filter, col_filter = axis_filter(interp, out_h, y0, y1), axis_filter(interp, out_w, x0, x1)
    if region == (0.0, 0.0, float(in_h), float(in_w)) and (in_h, in_w) == (out_h, out_w) and \
            INTERP_GAUSSIAN not in (row_filter, col_filter):  # the Gaussian smooths even at scale 1
        return None
    rows = _axis_taps(in_h, out_h, row_filter, antialias, y0, y1, dtype, True, gaussian)
    cols = _axis_taps(in_w, out_w, col_filter, antialias, x0, x1, dtype, False, gaussian)
    return rows, cols


def resample(image: np.ndarray, out_h: int, out_w: int, interp: Filters, antialias: bool,
             region: tuple[float, float, float, float] | None = None) -> np.ndarray:
    """Resize the source `region` (y0, x0, y1, x1; default the whole HWC image; y1 < y0 or x1 < x0 flips) with
    DALI's filters (`interp`: one, or (min_filter, mag_filter) chosen per axis): NN at pixel centres; LINEAR a
    triangle, widened by the scale on shrinking axes with antialias (numba, border replicated as DALI does); CUBIC
    (Catmull-Rom) and LANCZOS3 through exact separable taps; TRIANGULAR is LINEAR; GAUSSIAN DALI's tabulated
    window (`_gaussian_taps`). Sums run in float32 in a fixed
    order with no OpenCV or BLAS, whose results may depend on threads and CPU features."""
    in_h, in_w = image.shape[:2]
    region = (0.0, 0.0, float(in_h), float(in_w)) if region is None else tuple(float(v) for v in region)
    taps = resample_taps(in_h, in_w, out_h, out_w, interp, antialias, region, image.dtype, gaussian=True)
    if taps is None:
        return image.copy()
    if taps[0][0].shape[1] == 1 and taps[1][0].shape[1] == 1 and \
            axis_filter(interp, out_h, region[0], region[2]) == INTERP_NN == \
            axis_filter(interp, out_w, region[1], region[3]):
        return image[taps[0][0][:, 0][:, None], taps[1][0][:, 0][None, :]]
    if image.dtype in (np.uint8, np.float32):
        return resample_with_taps(image, *taps)
    return saturate_cast(resample_with_taps(np.ascontiguousarray(image, dtype=np.float32), *taps), image.dtype)


def _roi_corners(height: int, width: int, args) -> tuple[np.ndarray, np.ndarray] | None:
    """(start, end) of the region of interest in pixels, (y, x) each, or None where none is given."""
    start, end = args.get("roi_start"), args.get("roi_end")
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise ValueError("arguments 'roi_start' and 'roi_end' must be given together")
    start, end = (np.asarray(v, np.float64).ravel() for v in (start, end))
    if start.size != 2 or end.size != 2:
        raise ValueError(f"arguments 'roi_start' and 'roi_end' need 2 values (y, x) for an image, got {start.size} "
                         f"and {end.size}")
    if args.get("roi_relative"):
        start, end = start * (height, width), end * (height, width)
    if (start == end).any():
        raise ValueError(f"the region of interest from 'roi_start' {start.tolist()} to 'roi_end' {end.tolist()} is "
                         "empty")
    return start, end


def _flips(args) -> tuple[bool, bool]:
    """Whether a negative requested extent (resize_y / resize_x or `size`) flips the (y, x) axis, as in DALI."""
    size = args.get("size")
    wanted = size if size else (args.get("resize_y") or 0, args.get("resize_x") or 0)
    return float(wanted[0]) < 0, float(wanted[-1]) < 0


def plain_resize(args) -> bool:
    """Whether `resize_region` of any input is just its `resize_plan`: no region of interest and no negative
    (flipping) extent. False where the arguments cannot be read, so that the per-sample path reports them."""
    if args.get("roi_start") is not None or args.get("roi_end") is not None:
        return False
    try:
        return not any(_flips(args))
    except (TypeError, ValueError, IndexError):
        return False


def resize_region(height: int, width: int, args) -> tuple[int, int, tuple[float, float, float, float]]:
    """(out_h, out_w, source region (y0, x0, y1, x1)) of `resize` (and of its family) for an input of (height,
    width): `resize_plan` of the region of interest (roi_start / roi_end, in pixels or relative with
    roi_relative; a start past its end flips that axis) or of the whole image, placed in the image. A region with
    y1 < y0 (x1 < x0) is read flipped."""
    corners = _roi_corners(height, width, args)
    flip_y, flip_x = _flips(args)
    if corners is None and not (flip_y or flip_x):
        return resize_plan(height, width, args)
    start, end = corners if corners is not None else (np.zeros(2), np.array([height, width], np.float64))
    extent = np.abs(end - start)
    out_h, out_w, (y0, x0, y1, x1) = resize_plan(float(extent[0]), float(extent[1]), args)
    sign = np.where(end > start, 1.0, -1.0)
    y0, y1 = (float(start[0] + sign[0] * v) for v in (y0, y1))
    x0, x1 = (float(start[1] + sign[1] * v) for v in (x0, x1))
    if flip_y:
        y0, y1 = y1, y0
    if flip_x:
        x0, x1 = x1, x0
    return out_h, out_w, (y0, x0, y1, x1)


@cpu_kernel("resize", "experimental.resize")
def resize(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "resize")
    out_h, out_w, region = resize_region(image.shape[0], image.shape[1], args)
    out = resample_as(image, out_h, out_w, args, region)
    return (out, np.array(image.shape[:2], np.int32)) if args.get("save_attrs") else out


def resample_as(image: np.ndarray, out_h: int, out_w: int, args, region=None) -> np.ndarray:
    """`resample` with the resize family's arguments: its filters (interp_type, min_filter, mag_filter), antialias
    and output type (`dtype`: the input's or float; a float output is resampled from float values)."""
    dtype = image.dtype if args.get("dtype") is None else numpy_dtype(args["dtype"])
    if dtype.kind == "f" and image.dtype.kind != "f":
        image = image.astype(np.float32)  # a float output is not rounded to the input's levels
    out = resample(image, out_h, out_w, interp_filters(args), args["antialias"], region)
    return out if out.dtype == dtype else saturate_cast(out, dtype)


def window_anchor(extent: int, crop: int, pos: float, rounding: str) -> int:
    """Top / left of a `crop`-long window at relative position `pos` (a float32, as DALI reads it) in `extent`:
    pos * (extent - crop) rounded half away from zero (`rounding` 'round', DALI's default) or truncated toward zero
    ('truncate')."""
    pos = float(np.float32(pos))
    if rounding == "truncate":
        return math.trunc(pos * (extent - crop))
    return crop_anchor(extent, crop, pos)


def crop_window(image: np.ndarray, args, op: str) -> tuple[np.ndarray, int, int, int, int]:
    """The crop of `image` as a view plus the padding it needs: (view, pad_top, pad_left, out_h, out_w)."""
    height, width = image.shape[:2]
    crop_h, crop_w = crop_size(args, height, width)
    rounding = args.get("rounding", "round")
    y = window_anchor(height, crop_h, args["crop_pos_y"], rounding)
    x = window_anchor(width, crop_w, args["crop_pos_x"], rounding)
    inside = 0 <= y and 0 <= x and y + crop_h <= height and x + crop_w <= width
    if not inside:
        policy = args["out_of_bounds_policy"]
        if policy == "error":
            raise ValueError(f"crop window {crop_h}x{crop_w} at ({y}, {x}) does not fit in the {height}x{width} "
                             "image (set out_of_bounds_policy='pad' or 'trim_to_shape')")
        if policy == "trim_to_shape":
            y0, x0 = max(y, 0), max(x, 0)
            y1, x1 = min(y + crop_h, height), min(x + crop_w, width)
            return image[y0:y1, x0:x1], 0, 0, y1 - y0, x1 - x0
    y0, x0 = max(y, 0), max(x, 0)
    view = image[y0:max(y0, min(y + crop_h, height)), x0:max(x0, min(x + crop_w, width))]
    return view, y0 - y, x0 - x, crop_h, crop_w


def _fill(args, channels: int, extra: int = 0) -> np.ndarray:
    """fill_values for `channels` (+ `extra` padding channels): one value for all, or one per channel; the extra
    channels take 0 when only the image's channels are given."""
    fill = np.asarray(args["fill_values"], dtype=np.float32).ravel()
    if fill.size == 1:
        return np.full(channels + extra, fill[0], dtype=np.float32)
    if fill.size == channels + extra:
        return fill
    if fill.size == channels:
        return np.concatenate([fill, np.zeros(extra, np.float32)])
    raise ValueError(f"fill_values has {fill.size} values; the output has {channels + extra} channels")


def normalize_fill(args, channels: int, extra: int) -> np.ndarray:
    """crop_mirror_normalize's fill per output channel (float32, output values), as DALI's: with
    out_of_bounds_policy='pad', fill_values (one for all, or one per output channel, pad_output's included) fill
    the padding and the pad_output channel; with another policy fill_values are unused and that channel is 0."""
    total = channels + extra
    if args["out_of_bounds_policy"] != "pad":
        return np.zeros(total, np.float32)
    fill = np.asarray(args["fill_values"], dtype=np.float32).ravel()
    if fill.size == 1:
        return np.full(total, fill[0], dtype=np.float32)
    if fill.size != total:
        raise ValueError(f"argument 'fill_values' has {fill.size} values; with out_of_bounds_policy='pad' give one, "
                         f"or one per output channel ({total})")
    return fill


def _place(view: np.ndarray, top: int, left: int, out_h: int, out_w: int, fill: np.ndarray,
           dtype) -> np.ndarray:
    """`view` at (top, left) of an out_h x out_w canvas of `fill`; no copy of the canvas when nothing is padded."""
    if view.shape[:2] == (out_h, out_w):
        return view
    out = np.empty((out_h, out_w, view.shape[2]), dtype=dtype)
    out[...] = fill.astype(dtype)
    out[top:top + view.shape[0], left:left + view.shape[1]] = view
    return out


@cpu_kernel("crop")
def crop(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "crop")
    view, top, left, out_h, out_w = crop_window(image, args, "crop")
    out = _place(view, top, left, out_h, out_w, _fill(args, image.shape[2]), image.dtype)
    dtype = args.get("dtype")
    return np.array(out) if dtype is None else saturate_cast(out, numpy_dtype(dtype))


def normalize_coefficients(args, channels: int) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """Per-channel (mean, multiplier, shift) in float32: out = (x - mean) * multiplier + shift, with
    multiplier = scale / std. The GPU kernel uses exactly these numbers and the same rounding."""
    mean = np.asarray(args["mean"], dtype=np.float32).ravel()
    std = np.asarray(args["std"], dtype=np.float32).ravel()
    if mean.size not in (1, channels) or std.size not in (1, channels):
        raise ValueError(f"mean has {mean.size} and std {std.size} values; the image has {channels} channels")
    mean = np.broadcast_to(mean, (channels,)).astype(np.float32)
    multiplier = (np.float32(args["scale"]) / np.broadcast_to(std, (channels,))).astype(np.float32)
    return mean, multiplier, np.float32(args["shift"])


def _normalize_lut(mean: np.ndarray, multiplier: np.ndarray, shift: np.float32, dtype: np.dtype) -> np.ndarray:
    """(channels, 256) table of the normalized value of every uint8 level, already in the output type."""
    levels = np.arange(256, dtype=np.float32)[None, :]
    values = (levels - mean[:, None]) * multiplier[:, None] + shift
    return saturate_cast(values, dtype)


_tables: dict[tuple, np.ndarray] = {}


def _arg_key(value) -> tuple:
    return tuple(value) if isinstance(value, list | tuple) else tuple(np.ravel(value).tolist())


def _normalize_table(args, channels: int, dtype: np.dtype) -> np.ndarray:
    """`_normalize_lut` of the arguments, made once per distinct (mean, std, scale, shift, channels, dtype)."""
    key = (_arg_key(args["mean"]), _arg_key(args["std"]), args["scale"], args["shift"], channels, dtype.str)
    table = _tables.get(key)
    if table is None:
        table = _normalize_lut(*normalize_coefficients(args, channels), dtype)
        if len(_tables) >= 64:
            _tables.clear()
        _tables[key] = table
    return table


@cpu_kernel("crop_mirror_normalize")
def crop_mirror_normalize(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "crop_mirror_normalize")
    channels = image.shape[2]
    dtype = numpy_dtype(args["dtype"])
    view, top, left, out_h, out_w = crop_window(image, args, "crop_mirror_normalize")
    mirror = bool(int(args["mirror"]))
    if mirror:
        left = out_w - left - view.shape[1]
    out_channels = channels + 1 if args["pad_output"] else channels
    chw = args["output_layout"] == "CHW"
    out = output_array(ctx, (out_channels, out_h, out_w) if chw else (out_h, out_w, out_channels), dtype)
    padded = view.shape[:2] != (out_h, out_w)
    if padded or out_channels != channels:
        fill = saturate_cast(normalize_fill(args, channels, out_channels - channels), dtype)  # output values
        for c in range(out_channels):
            (out[c] if chw else out[..., c]).fill(fill[c])
    rows, cols = slice(top, top + view.shape[0]), slice(left, left + view.shape[1])
    if image.dtype == np.uint8:
        lookup_into(view, _normalize_table(args, channels, dtype), out, top, left, chw, mirror)
    else:
        mean, multiplier, shift = normalize_coefficients(args, channels)
        view = view[:, ::-1] if mirror else view
        values = saturate_cast((view.astype(np.float32) - mean) * multiplier + shift, dtype)
        if chw:
            out[:channels, rows, cols] = values.transpose(2, 0, 1)
        else:
            out[rows, cols, :channels] = values
    return out


@cpu_kernel("flip")
def flip(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "flip")
    horizontal, vertical = int(args["horizontal"]), int(args["vertical"])
    if (horizontal or vertical) and image.dtype in _CV_FLIP_TYPES and image.size \
            and (image.ndim == 2 or image.shape[2] <= 4):  # OpenCV's flip: ~25x numpy's strided copy, same values
        code = -1 if horizontal and vertical else (1 if horizontal else 0)
        return cv2.flip(np.ascontiguousarray(image), code).reshape(image.shape)
    if horizontal:
        image = image[:, ::-1]
    if vertical:
        image = image[::-1]
    return np.ascontiguousarray(image)


_CV_FLIP_TYPES = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32,
                                                 np.float64))
"""Element types OpenCV's flip takes."""


@cpu_kernel("random_resized_crop")
def random_resized_crop(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "random_resized_crop")
    y, x, h, w = random_crop_window(image.shape[0], image.shape[1], args["random_area"], args["random_aspect_ratio"],
                                    args["num_attempts"], ctx.rng)
    out_h, out_w = (int(round(v)) for v in args["size"])
    return resample_as(image[y:y + h, x:x + w], out_h, out_w, args)
