"""CPU kernels of tensor_resize and experimental.tensor_resize: DALI's output-size rules generalized from resize's
two axes to the resized axes of any tensor, then one separable pass per resized axis with resize's filter taps
(geometry_ops.resample_taps), summed in float32."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.geometry_ops import INTERP_NN, resample_taps
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

MAX_SPATIAL_SPAN = 3
f32 = np.float32


def resized_axes(ndim: int, args: dict[str, Any]) -> list[int]:
    """The axes `sizes` / `scales` / `max_size` / ROIs refer to: `axes` (negative from the back), else all."""
    axes = args.get("axes")
    if axes is None:
        return list(range(ndim))
    out = []
    for axis in axes:
        if not -ndim <= int(axis) < ndim:
            raise ValueError(f"argument 'axes' has {axis}, out of range for {ndim}-dimensional data")
        out.append(int(axis) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"argument 'axes' repeats an axis: {list(axes)}")
    return out


def _values(args: dict, name: str, count: int) -> list[float] | None:
    value = args.get(name)
    if value is None:
        return None
    values = [float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]
    if len(values) == 1 and count > 1:
        values *= count
    if len(values) != count:
        raise ValueError(f"argument '{name}' has {len(values)} values for {count} resized axes")
    return values


def input_regions(shape: tuple[int, ...], axes: list[int], args: dict) -> list[tuple[float, float]]:
    """(start, end) of the source region along each resized axis: roi_start / roi_end (relative with
    roi_relative; end before start flips), else the whole axis."""
    starts, ends = _values(args, "roi_start", len(axes)), _values(args, "roi_end", len(axes))
    if (starts is None) != (ends is None):
        raise ValueError("give both 'roi_start' and 'roi_end', or neither")
    extents = [shape[a] for a in axes]
    if starts is None:
        return [(0.0, float(e)) for e in extents]
    if args.get("roi_relative"):
        starts = [s * e for s, e in zip(starts, extents, strict=True)]
        ends = [s * e for s, e in zip(ends, extents, strict=True)]
    return list(zip(starts, ends, strict=True))


def requested_sizes(regions: list[tuple[float, float]], args: dict) -> tuple[list[float], bool]:
    """The (unrounded) output extent asked for each resized axis by `sizes` or `scales` and `mode` / `max_size`
    (resize's rules, on any number of axes); and whether they came from `scales`."""
    count = len(regions)
    in_size = [abs(hi - lo) for lo, hi in regions]
    sizes, scales = _values(args, "sizes", count), _values(args, "scales", count)
    if (sizes is None) == (scales is None):
        raise ValueError("give exactly one of 'sizes' and 'scales'")
    if scales is not None:
        wanted = [float(f32(s) * f32(i)) for s, i in zip(scales, in_size, strict=True)]
    else:
        wanted = [float(f32(s)) for s in sizes]
    if any(w < 0 for w in wanted):
        raise ValueError(f"argument '{'sizes' if sizes is not None else 'scales'}' must not be negative")
    mode = args.get("mode") or "default"
    given = [w != 0 and i != 0 for w, i in zip(wanted, in_size, strict=True)]
    scale = [float(f32(w / i)) if i else 1.0 for w, i in zip(wanted, in_size, strict=True)]
    out = list(wanted)
    limits = _values(args, "max_size", count)
    if not any(given):
        out = list(in_size)
    elif mode in ("default", "stretch"):
        if mode == "default" and not all(given):
            present = [s for s, g in zip(scale, given, strict=True) if g]
            common = sum(present) / len(present)  # DALI: the average scale of the given extents
            out = [o if g else float(f32(i * common)) for o, i, g in zip(out, in_size, given, strict=True)]
        elif not all(given):
            out = [o if g else i for o, i, g in zip(out, in_size, given, strict=True)]
        if limits:
            out = [lim if 0 < lim < o else o for o, lim in zip(out, limits, strict=True)]
    elif mode in ("not_larger", "not_smaller"):
        present = [s for s, g in zip(scale, given, strict=True) if g]
        final = max(present) if mode == "not_smaller" else min(present)
        if limits:
            final = min([final] + [lim / i for lim, i in zip(limits, in_size, strict=True) if lim > 0 and i > 0])
        out = [o if g and s == final else float(f32(i * final))
               for o, s, i, g in zip(out, scale, in_size, given, strict=True)]
    else:
        raise ValueError(f"argument 'mode' must be default, stretch, not_larger or not_smaller, got {mode!r}")
    return out, scales is not None


def _rounded(value: float, policy: str) -> int:
    if policy == "truncate":
        return int(math.floor(value))
    if policy == "ceil":
        return int(math.ceil(value))
    return int(math.floor(value + 0.5))


def tensor_resize_plan(shape: tuple[int, ...], args: dict) -> list[tuple[int, int, float, float]]:
    """(axis, output extent, source start, source end) of each resized axis of a sample of `shape`."""
    axes = resized_axes(len(shape), args)
    if axes and max(axes) - min(axes) + 1 > MAX_SPATIAL_SPAN:
        raise ValueError(f"tensor_resize resizes at most {MAX_SPATIAL_SPAN} consecutive axes (as DALI); "
                         f"argument 'axes' spans {max(axes) - min(axes) + 1}: {axes}")
    regions = input_regions(shape, axes, args)
    wanted, from_scales = requested_sizes(regions, args)
    policy = (args.get("size_rounding") or "round") if from_scales else "round"
    if policy not in ("round", "truncate", "ceil"):
        raise ValueError(f"argument 'size_rounding' must be round, truncate or ceil, got {policy!r}")
    alignment = _values(args, "alignment", len(axes)) or [0.5] * len(axes)
    plan = []
    for axis, (lo, hi), want, align in zip(axes, regions, wanted, alignment, strict=True):
        size = max(1, _rounded(want, policy))
        if args.get("subpixel_scale", True) and want and size != want:
            extent = hi - lo
            adjusted = extent * size / want
            lo, hi = lo + (extent - adjusted) * align, lo + (extent - adjusted) * align + adjusted
        plan.append((axis, size, float(lo), float(hi)))
    return plan


def axis_filter(args: dict, shrinking: bool) -> int:
    """The filter of one axis: min_filter when it shrinks, mag_filter when it grows, each defaulting to
    interp_type."""
    chosen = args.get("min_filter") if shrinking else args.get("mag_filter")
    return int(args["interp_type"] if chosen is None else chosen)


def axis_taps(in_size: int, out_size: int, lo: float, hi: float, args: dict) -> tuple | None:
    """(source index, weight, is NN) with (out_size, taps) arrays of one axis, or None where it is a plain copy. A
    flipped region (hi < lo) samples [hi, lo) and reverses the output, as DALI's."""
    interp = axis_filter(args, out_size < abs(hi - lo))
    flipped = hi < lo
    region = (hi, 0.0, lo, 1.0) if flipped else (lo, 0.0, hi, 1.0)
    taps = resample_taps(in_size, 1, out_size, 1, interp, bool(args["antialias"]), region, np.dtype(np.float32))
    if taps is None:
        if not flipped:
            return None
        index, weight = np.arange(out_size, dtype=np.int32)[:, None], np.ones((out_size, 1), np.float32)
    else:
        index, weight = np.asarray(taps[0][0]), np.asarray(taps[0][1])
    if flipped:
        index, weight = index[::-1], weight[::-1]
    return np.ascontiguousarray(index), np.ascontiguousarray(weight), interp == INTERP_NN


def resample_axis(data, axis: int, taps: tuple, xp: Any = np):
    """`data` (float32) resampled along `axis` with the taps: sum over t of weight[:, t] * data[index[:, t]], in
    tap order; `xp` is numpy or CuPy (the GPU kernel runs the same sums)."""
    index, weight, _ = taps
    index, weight = xp.asarray(index), xp.asarray(weight)
    moved = xp.moveaxis(data, axis, 0)
    out = xp.zeros((index.shape[0], *moved.shape[1:]), xp.float32)
    shape = (index.shape[0],) + (1,) * (moved.ndim - 1)
    for t in range(index.shape[1]):
        out += weight[:, t].reshape(shape) * moved[index[:, t]]
    return xp.moveaxis(out, 0, axis)


def output_dtype(in_dtype: np.dtype, args: dict) -> np.dtype:
    """The output element type: `dtype` (the input's or float32, as DALI allows), default the input's."""
    if args.get("dtype") is None:
        return np.dtype(in_dtype)
    dtype = numpy_dtype(args["dtype"])
    if dtype not in (np.dtype(in_dtype), np.dtype(np.float32)):
        raise ValueError(f"argument 'dtype' must be the input's type ({np.dtype(in_dtype)}) or float, got {dtype}")
    return dtype


def sample_taps(shape: tuple[int, ...], dtype, args: dict) -> tuple[np.dtype, list[tuple[int, tuple]]]:
    """(output dtype, [(axis, taps)] of the axes that are not plain copies) of one sample, checked."""
    if np.dtype(dtype).kind not in "uif":
        raise ValueError(f"tensor_resize needs numeric data, got {np.dtype(dtype)}")
    passes = []
    for axis, size, lo, hi in tensor_resize_plan(shape, args):
        if shape[axis] == 0:
            raise ValueError(f"tensor_resize cannot resize the empty axis {axis} of shape {shape}")
        taps = axis_taps(shape[axis], size, lo, hi, args)
        if taps is not None:
            passes.append((axis, taps))
    return output_dtype(dtype, args), passes


def tensor_resize_sample(data: np.ndarray, args: dict) -> np.ndarray:
    """One sample resized along its resized axes."""
    dtype, passes = sample_taps(data.shape, data.dtype, args)
    out = data.astype(np.float32)
    for axis, taps in passes:
        out = resample_axis(out, axis, taps)
    return saturate_cast(out, dtype)


def with_axes(args: dict, layout: str) -> dict:
    """`args` with `axis_names` turned into `axes` through the input's layout (the graph does it where the layout
    is known when it is built)."""
    names = args.get("axis_names")
    if not names or args.get("axes") is not None:
        return args
    if not layout:
        raise ValueError(f"argument 'axis_names' ({names!r}) needs an input with a layout")
    missing = [n for n in names if n not in layout]
    if missing:
        raise ValueError(f"argument 'axis_names' names {''.join(missing)!r}, not in the input's layout {layout!r}")
    return {**args, "axes": [layout.index(n) for n in names]}


@cpu_kernel("tensor_resize", "experimental.tensor_resize")
def tensor_resize(inputs, args, ctx):
    layout = ctx.input_layouts[0] if ctx.input_layouts else ""
    return tensor_resize_sample(np.asarray(inputs[0]), with_axes(args, layout))
