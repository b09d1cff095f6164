"""CPU kernels of preemphasis_filter, nonsilent_region, slice, normalize (whole batch) and shapes, with DALI's
arithmetic where it decides the result: float32 preemphasis, the sequential float32 running sum of
nonsilent_region, llround'ed slice windows. The window and normalization plans are shared with the GPU kernels."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from headrace_kernels.cpu.axes import default_layout, resolve_axes
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT16_MAX = 65504.0
MAX_WINDOW_ELEMENTS = 1 << 28
"""The most elements a slice window reaching outside its input may have (the schemas' limit of a sample): a window
from a hostile anchor or shape is refused instead of exhausting memory."""


# preemphasis_filter

def preemphasis_work_type(dtype: np.dtype) -> np.dtype:
    """The type the filter computes in: float64 for float64 input, else float32 (DALI's promotion with a float
    coefficient)."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def check_preemphasis_input(dtype: np.dtype) -> None:
    """ValueError for a type the filter cannot compute with (DALI's take integers and floats)."""
    if np.dtype(dtype).kind not in "iuf":
        raise ValueError(f"preemphasis_filter takes numeric samples, got {np.dtype(dtype)}")


@cpu_kernel("preemphasis_filter")
def preemphasis_filter(inputs, args, ctx):
    data = np.asarray(inputs[0])
    check_preemphasis_input(data.dtype)
    out_dtype = numpy_dtype(args["dtype"])
    flat = data.reshape(-1)
    work = preemphasis_work_type(data.dtype)
    coeff = work.type(np.float32(args["preemph_coeff"]))
    if coeff == 0 or flat.size == 0:  # DALI copies (converts) the input as it is
        return saturate_cast(flat, out_dtype).reshape(data.shape)
    x = np.ascontiguousarray(flat, dtype=work)
    border = args["border"]
    if border == "zero":
        first = x[0]
    else:
        previous = x[1] if border == "reflect" and x.size > 1 else x[0]
        first = x[0] - coeff * previous
    out = np.empty(x.shape, dtype=work)
    from headrace_kernels import audio_loops  # rocket_fft: imported when first needed

    audio_loops.preemphasis(x, coeff, first, out)
    return (out if out.dtype == out_dtype else saturate_cast(out, out_dtype)).reshape(data.shape)


# nonsilent_region

def _running_sum(squares: np.ndarray, start: int, stop: int, window: int) -> np.ndarray:
    """DALI's float32 moving sum of squares at positions start..stop-1: summed afresh at `start` (in order, from
    0), then for each next position the square leaving the window subtracted and the newest one added, each
    rounded to float32 in that order (the order DALI's build gives; np.cumsum accumulates sequentially)."""
    first = np.cumsum(squares[max(start - window + 1, 0):start + 1], dtype=np.float32)[-1]
    positions = np.arange(start + 1, stop)
    steps = np.zeros(2 * positions.size + 1, dtype=np.float32)
    steps[0] = first
    leaving = positions - window
    inside = leaving >= 0
    steps[1::2][inside] = -squares[leaving[inside]]
    steps[2::2] = squares[start + 1:stop]
    return np.cumsum(steps, dtype=np.float32)[0::2]


def moving_mean_square(signal: np.ndarray, window: int, reset_interval: int) -> np.ndarray:
    """The mean square of the `window` samples ending at each sample (fewer at the start, still divided by
    `window`), in float32 as DALI's MovingMeanSquareCpu: exact int64 sums for integers of up to 16 bits, else a
    float32 running sum recomputed from scratch every reset_interval + 1 positions (-1: never)."""
    n = signal.size
    factor = np.float32(1.0) / np.float32(window)
    if signal.dtype.kind in "iu" and signal.dtype.itemsize <= 2:
        squares = signal.astype(np.int64) ** 2
        sums = np.concatenate([[0], np.cumsum(squares)])
        totals = sums[1:] - sums[np.maximum(np.arange(n) - window + 1, 0)]
        return totals.astype(np.float32) * factor
    values = signal.astype(np.float32)
    squares = values * values
    period = n if reset_interval == -1 else reset_interval
    out = np.empty(n, dtype=np.float32)
    for start in range(0, n, period + 1):
        stop = min(start + period + 1, n)
        out[start:stop] = _running_sum(squares, start, stop, window)
    return out * factor


def nonsilent_region_of(signal: np.ndarray, args: dict) -> tuple[int, int]:
    """(begin, length) of the non-silent region of one 1D signal, as DALI computes it."""
    signal = np.asarray(signal)
    if signal.ndim != 1:
        raise ValueError(f"nonsilent_region takes 1D audio, got shape {signal.shape}")
    if signal.dtype.kind not in "iuf":
        raise ValueError(f"nonsilent_region takes numeric audio, got {signal.dtype}")
    window, reset = args["window_length"], args["reset_interval"]
    if window < 1:
        raise ValueError(f"argument 'window_length': must be positive, got {window}")
    floating = signal.dtype.kind == "f"
    if floating and (reset == 0 or reset < -1 or (reset != -1 and reset % window)):
        raise ValueError(f"argument 'reset_interval': must be -1 or a positive multiple of window_length "
                         f"({window}), got {reset}")
    reference = args["reference_power"]
    if reference is not None and not reference > 0:
        raise ValueError(f"argument 'reference_power': must be positive, got {reference}")
    if signal.size == 0:
        return 0, 0
    window = min(window, signal.size)
    power = moving_mean_square(signal, window, reset if floating else -1)
    level = power.max() if reference is None else np.float32(reference)
    threshold = np.float32(level) * np.power(np.float32(10.0), np.float32(args["cutoff_db"]) * np.float32(0.1))
    loud = np.flatnonzero(power >= threshold)
    if loud.size == 0:
        return 0, 0
    first, last = int(loud[0]), int(loud[-1])
    begin = max(first - (window - 1), 0) if first else 0  # DALI widens the start only when it is not 0
    return begin, last - begin + 1


@cpu_kernel("nonsilent_region")
def nonsilent_region(inputs, args, ctx):
    begin, length = nonsilent_region_of(inputs[0], args)
    return np.array(begin, dtype=np.int32), np.array(length, dtype=np.int32)


# slice

def llround(value: float) -> int:
    """C's llround: to nearest, halves away from zero (exactly, without adding 0.5 in floating point)."""
    low = math.floor(value)
    fraction = value - low
    return low + 1 if fraction > 0.5 or (fraction == 0.5 and value > 0) else low


def llround_array(values: np.ndarray) -> np.ndarray:
    """llround of every float64 value, as int64."""
    low = np.floor(values)
    fraction = values - low
    return (low + ((fraction > 0.5) | ((fraction == 0.5) & (values > 0)))).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class SliceWindow:
    """One sample's window: its start per axis (negative or past the end where out of bounds), the output's shape,
    how positions outside the input are filled ('inside' when none are), and the fill values in the output type:
    one (`channel_axis` -1) or one per index along `channel_axis`."""

    anchor: tuple[int, ...]
    shape: tuple[int, ...]
    policy: str
    fill: np.ndarray
    channel_axis: int


def slice_axes(args: dict, ndim: int) -> list[int]:
    """The axes slice's coordinates refer to: `axes`, `axis_names`, else 'WH' (x before y), in order."""
    if args["axes"] is not None:
        axes = resolve_axes(args["axes"], None, ndim)
        if len(set(axes)) != len(axes):
            raise ValueError(f"argument 'axes': an axis occurs more than once in {list(args['axes'])}")
        return axes
    return resolve_axes(None, args["axis_names"] or "WH", ndim)


def _numbers(value, what: str) -> np.ndarray:
    """A positional anchor or shape input as a flat array of numbers."""
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"the {what} input must be integers or floats, got {array.dtype}")
    return array.reshape(-1)


def _positional_bounds(shape, axes, anchor, extent, args) -> list[tuple[float, float]]:
    """[start, end) per axis from the anchor and shape inputs (DALI's arithmetic in double)."""
    anchor, extent = _numbers(anchor, "anchor"), _numbers(extent, "shape")
    if (anchor.dtype.kind == "f") != (extent.dtype.kind == "f"):
        raise ValueError(f"the anchor and shape inputs must both be integers or both floats, got {anchor.dtype} "
                         f"and {extent.dtype}")
    if anchor.size != len(axes) or extent.size != len(axes):
        raise ValueError(f"the anchor and shape inputs need one value per sliced axis ({len(axes)}, axes "
                         f"{axes}), got {anchor.size} and {extent.size}")
    floating = anchor.dtype.kind == "f"
    norm_anchor, norm_shape = floating and args["normalized_anchor"], floating and args["normalized_shape"]
    return [positional_span(float(anchor[k]), float(extent[k]), shape[axis], norm_anchor, norm_shape)
            for k, axis in enumerate(axes)]


def positional_span(start, size, extent, normalized_anchor: bool, normalized_shape: bool) -> tuple:
    """[start, end) along an axis of `extent` from an anchor and a shape, floats or float64 arrays alike (DALI's
    arithmetic in double): normalized coordinates are scaled by the extent, both at once after their sum."""
    if normalized_anchor and normalized_shape:  # one multiplication after the sum, as DALI
        return start * extent, (start + size) * extent
    start = start * extent if normalized_anchor else start
    return start, start + (size * extent if normalized_shape else size)


def _named_bounds(shape, axes, args) -> list[tuple[float, float]]:
    """[start, end) per axis from start / rel_start and end / rel_end / shape / rel_shape."""
    given = {}
    for name in ("start", "rel_start", "end", "rel_end", "shape", "rel_shape"):
        if args[name] is not None:
            if len(args[name]) != len(axes):
                raise ValueError(f"argument '{name}': needs one value per sliced axis ({len(axes)}, axes {axes}), "
                                 f"got {len(args[name])}")
            given[name] = [float(v) for v in args[name]]
    bounds = []
    for k, axis in enumerate(axes):
        extent = shape[axis]
        start = given["start"][k] if "start" in given else \
            given["rel_start"][k] * extent if "rel_start" in given else 0.0
        if "end" in given:
            end = given["end"][k]
        elif "rel_end" in given:
            end = given["rel_end"][k] * extent
        elif "shape" in given:
            if given["shape"][k] < 0:
                raise ValueError(f"argument 'shape': extents must not be negative, got {args['shape']}")
            end = start + given["shape"][k]
        elif "rel_shape" in given:
            if given["rel_shape"][k] < 0:
                raise ValueError(f"argument 'rel_shape': extents must not be negative, got {args['rel_shape']}")
            end = (given["rel_start"][k] + given["rel_shape"][k]) * extent if "rel_start" in given else \
                start + given["rel_shape"][k] * extent
        else:
            end = float(extent)
        bounds.append((start, end))
    return bounds


def _fill_values(fill, policy: str, ndim: int, out_shape: list[int], dtype: np.dtype) -> tuple[np.ndarray, int]:
    """The fill values converted to the output type (DALI's static_cast) and the channel axis they run along."""
    values = np.asarray(fill, dtype=np.float32).reshape(-1)
    if policy not in ("pad", "constant") or values.size == 1:
        return static_cast(values[:1], dtype), -1
    layout = default_layout(ndim)
    if "C" not in layout:
        raise ValueError(f"argument 'fill_values': {values.size} values need a channel axis, and a "
                         f"{ndim}-dimensional sample has none (give one value)")
    channel = layout.index("C")
    if values.size != out_shape[channel]:
        raise ValueError(f"argument 'fill_values': {values.size} values for {out_shape[channel]} output channels "
                         f"(give one value, or one per channel)")
    return static_cast(values, dtype), channel


def slice_window(shape: tuple[int, ...], args: dict, anchor, extent, out_dtype: np.dtype) -> SliceWindow:
    """One sample's slice window (CPU and GPU kernels): DALI's coordinates, checks and out-of-bounds policy."""
    ndim = len(shape)
    axes = slice_axes(args, ndim)
    named = [n for n in ("start", "rel_start", "end", "rel_end", "shape", "rel_shape") if args[n] is not None]
    if anchor is not None:
        if named:
            raise ValueError(f"arguments {', '.join(named)} cannot be used with the anchor and shape inputs")
        bounds = _positional_bounds(shape, axes, anchor, extent, args)
    elif named:
        bounds = _named_bounds(shape, axes, args)
    else:
        raise ValueError("give the window: the anchor and shape inputs, or start / rel_start with end / rel_end / "
                         "shape / rel_shape")
    begin, size = [0] * ndim, list(shape)
    for axis, (start, end) in zip(axes, bounds, strict=True):
        if not (math.isfinite(start) and math.isfinite(end) and abs(start) < 2**62 and abs(end) < 2**62):
            raise ValueError(f"slice coordinates out of range on axis {axis}: start={start}, end={end}")
        if end < start:
            raise ValueError(f"end coordinates can't be before start coordinates on axis {axis}: start={start}, "
                             f"end={end}")
        begin[axis] = llround(start)
        size[axis] = llround(end) - begin[axis]
    policy = {"constant": "pad", "clamp": "edge", "reflect_1001": "reflect"}.get(args["out_of_bounds_policy"],
                                                                                   args["out_of_bounds_policy"])
    outside = [a for a in range(ndim) if begin[a] < 0 or begin[a] + size[a] > shape[a]]
    if outside and math.prod(size) > MAX_WINDOW_ELEMENTS:
        raise ValueError(f"the window (shape {tuple(size)}) has more than {MAX_WINDOW_ELEMENTS} elements")
    if outside and policy == "error":
        raise ValueError(f"the window (anchor {tuple(begin)}, shape {tuple(size)}) reaches outside the input of "
                         f"shape {tuple(shape)}; choose an out_of_bounds_policy to allow it")
    if policy == "trim_to_shape":
        for a in outside:
            end = min(begin[a] + size[a], shape[a])
            begin[a] = min(max(begin[a], 0), shape[a])
            size[a] = max(end - begin[a], 0)
        outside = []
    elif policy in ("edge", "reflect", "reflect_101", "wrap"):
        empty = [a for a in outside if shape[a] == 0 and size[a] > 0]
        if empty:
            raise ValueError(f"out_of_bounds_policy '{policy}' cannot fill from the empty axis {empty[0]} of shape "
                             f"{tuple(shape)}")
    fill, channel = _fill_values(args["fill_values"], policy, ndim, size, out_dtype)
    return SliceWindow(tuple(begin), tuple(size), policy if outside else "inside", fill, channel)


def source_indices(start: int, count: int, extent: int, policy: str) -> np.ndarray:
    """The input index each output position reads along one axis (-1: the fill), by the out-of-bounds policy."""
    index = np.arange(start, start + count, dtype=np.int64)
    if policy in ("pad", "error", "inside"):
        return np.where((index >= 0) & (index < extent), index, -1)
    if policy == "edge":
        return np.clip(index, 0, extent - 1)
    if policy == "wrap":
        return np.mod(index, extent)
    if policy == "reflect":  # reflect_1001: the edge repeats (numpy's 'symmetric')
        folded = np.mod(index, 2 * extent)
        return np.where(folded >= extent, 2 * extent - 1 - folded, folded)
    if extent == 1:  # reflect_101: the edge does not repeat (numpy's 'reflect')
        return np.zeros_like(index)
    folded = np.mod(index, 2 * extent - 2)
    return np.where(folded >= extent, 2 * extent - 2 - folded, folded)


def static_cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 values as C++'s static_cast gives them on x86 (DALI's fill values): floats round to nearest;
    integers truncate through a 32-bit int (64-bit for uint32 and 8-byte types) whose overflow and NaN give its
    minimum, then wrap to the type's width."""
    dtype, values = np.dtype(dtype), np.asarray(values, dtype=np.float32).astype(np.float64)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return values.astype(np.float32).astype(dtype)
    if dtype.kind == "b":
        return values != 0
    if dtype == np.uint64:  # values from 2**63 up convert from value - 2**63 with the top bit set
        high = values >= 2.0**63
        low = static_cast(np.where(high, values - 2.0**63, values), np.int64)
        return np.where(high, low.view(np.uint64) | np.uint64(1 << 63), low.view(np.uint64))
    bits = 64 if dtype.itemsize == 8 or dtype == np.uint32 else 32
    fits = np.isfinite(values) & (values > -(2.0 ** (bits - 1)) - 1) & (values < 2.0 ** (bits - 1))
    whole = np.trunc(np.where(fits, values, 0.0)).astype(np.int64)
    return np.where(fits, whole, -(2 ** (bits - 1))).astype(np.int64).astype(dtype)


def slice_convert(data: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`data` converted as DALI's slice converts (kernels/signal.cu alike): to float32, float16 or uint8, clamped to
    the type's range, then floats round to nearest and uint8 truncates (NaN gives 0)."""
    dtype = np.dtype(dtype)
    if data.dtype == dtype:
        return data
    if data.dtype.kind == "b":
        return data.astype(dtype)
    if dtype == np.uint8:
        if data.dtype.kind == "f":
            return np.trunc(np.clip(np.where(np.isnan(data), 0, data), 0, 255)).astype(np.uint8)
        return np.clip(data.astype(np.int64) if data.dtype != np.uint64 else data, 0, 255).astype(np.uint8)
    if (data.dtype.kind == "f" and data.dtype.itemsize <= dtype.itemsize) or \
            (data.dtype.kind in "iu" and dtype == np.float32):
        return data.astype(dtype)  # nothing to clamp
    limit = FLOAT16_MAX if dtype == np.float16 else FLOAT32_MAX
    wide = data.astype(np.float64) if data.dtype.kind in "iu" else data
    return np.clip(wide, -limit, limit).astype(dtype)


def slice_sample(data: np.ndarray, window: SliceWindow, dtype: np.dtype) -> np.ndarray:
    """The window of one sample, of element type `dtype`, filled where the policy says so."""
    if window.policy == "inside":
        region = tuple(slice(b, b + n) for b, n in zip(window.anchor, window.shape, strict=True))
        return np.ascontiguousarray(slice_convert(data[region], dtype))
    indices = [source_indices(b, n, e, window.policy)
               for b, n, e in zip(window.anchor, window.shape, data.shape, strict=True)]
    if window.policy != "pad":
        return np.ascontiguousarray(slice_convert(data[np.ix_(*indices)], dtype))
    if window.fill.size == 1:
        out = np.full(window.shape, window.fill[0], dtype=dtype)
    else:
        view = [1] * data.ndim
        view[window.channel_axis] = window.fill.size
        out = np.ascontiguousarray(np.broadcast_to(window.fill.reshape(view), window.shape))
    valid = [np.flatnonzero(i >= 0) for i in indices]
    if all(v.size for v in valid):
        spans = tuple(slice(int(v[0]), int(v[-1]) + 1) for v in valid)
        source = tuple(slice(int(i[v[0]]), int(i[v[-1]]) + 1) for i, v in zip(indices, valid, strict=True))
        out[spans] = slice_convert(data[source], dtype)
    return out


def slice_output_type(data_dtype: np.dtype, args: dict) -> np.dtype:
    """slice's output type: `dtype`, else the input's."""
    return np.dtype(data_dtype) if args["dtype"] is None else numpy_dtype(args["dtype"])


@cpu_kernel("slice")
def slice_(inputs, args, ctx):
    data = np.asarray(inputs[0])
    if len(inputs) == 2:
        raise ValueError("give both positional inputs, anchor and shape, or neither")
    out_dtype = slice_output_type(data.dtype, args)
    anchor, extent = (inputs[1], inputs[2]) if len(inputs) == 3 else (None, None)
    window = slice_window(data.shape, args, anchor, extent, out_dtype)
    return slice_sample(data, window, out_dtype)


# normalize

class SampleValueError(ValueError):
    """A ValueError about sample `index` of a whole-batch kernel (the GPU kernel reports that sample)."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


@dataclasses.dataclass(frozen=True)
class NormalizePlan:
    """What normalize does to a batch: the reduced axes, each sample's parameter shape (reduced axes of extent 1),
    and the given mean and standard deviation per sample (None where they are computed)."""

    axes: tuple[int, ...]
    param_shapes: list[tuple[int, ...]]
    means: list[np.ndarray | None]
    stddevs: list[np.ndarray | None]
    batch: bool


def _infer_axes(shapes: list[tuple[int, ...]], counts: list[int]) -> tuple[int, ...]:
    """The reduced axes of per-sample parameters of `counts` values (their shapes do not reach the kernels): the
    one set of kept axes of extent > 1 whose extents multiply to every sample's count."""
    ndim = len(shapes[0])
    found = set()
    for r in range(ndim + 1):
        for kept in itertools.combinations(range(ndim), r):
            if all(math.prod(s[a] for a in kept) == c for s, c in zip(shapes, counts, strict=True)):
                found.add(tuple(a for a in kept if any(s[a] != 1 for s in shapes)))
    if len(found) != 1:
        raise ValueError(f"cannot tell which axes per-sample mean / stddev of {counts[0]} values keep for samples "
                         f"of shape {shapes[0]}; give axes or axis_names")
    kept = found.pop()
    return tuple(a for a in range(ndim) if a not in kept)


def normalize_plan(shapes: list[tuple[int, ...]], batch_args: list[dict]) -> NormalizePlan:
    """The plan of normalize over samples of `shapes` (CPU and GPU kernels), with DALI's checks."""
    args = batch_args[0]
    ndims = {len(s) for s in shapes}
    if len(ndims) > 1:
        raise ValueError(f"normalize: samples have different numbers of dimensions {sorted(ndims)}")
    ndim = ndims.pop()
    given = {name: [None if a[name] is None else np.asarray(a[name], dtype=np.float32) for a in batch_args]
             for name in ("mean", "stddev")}
    counts = [[v.size for v in given[name] if v is not None] for name in ("mean", "stddev")]
    if args["axes"] is not None:
        if not args["axes"]:
            raise ValueError("argument 'axes': give at least one axis to reduce")
        axes = tuple(sorted(set(resolve_axes(args["axes"], None, ndim))))
    elif args["axis_names"]:
        axes = tuple(sorted(set(resolve_axes(None, args["axis_names"], ndim))))
    elif any(c > 1 for cs in counts for c in cs):
        source = "mean" if counts[0] else "stddev"
        axes = _infer_axes(shapes, [v.size for v in given[source]])
    else:
        axes = tuple(range(ndim))
    param_shapes = [tuple(1 if a in axes else n for a, n in enumerate(s)) for s in shapes]
    if args["batch"]:
        for i, shape in enumerate(param_shapes[1:], 1):
            if shape != param_shapes[0]:
                raise SampleValueError(i, f"sample {i}: with batch=True the samples must agree on the axes not "
                                          f"reduced; shape {shapes[i]} differs from sample 0's {shapes[0]} outside "
                                          f"axes {axes}")
    for name, values in given.items():
        for i, (value, shape) in enumerate(zip(values, param_shapes, strict=True)):
            if value is not None and value.size not in (1, math.prod(shape)):
                raise SampleValueError(i, f"sample {i}: argument '{name}' has {value.size} values; normalizing "
                                          f"shape {shapes[i]} over axes {axes} needs 1 or {math.prod(shape)}")
    shaped = {name: [None if v is None else (v.reshape(()) if v.size == 1 else v.reshape(shape))
                     for v, shape in zip(values, param_shapes, strict=True)] for name, values in given.items()}
    return NormalizePlan(axes, param_shapes, shaped["mean"], shaped["stddev"], bool(args["batch"]))


def inverse_stddev(xp, sum_squares, count: int, args: dict):
    """scale / sqrt(sum_squares / (count - ddof) + epsilon), 0 where that variance is 0 (DALI keeps zero), in
    float64 (numpy or CuPy as `xp`)."""
    scale, epsilon, ddof = float(args["scale"]), float(args["epsilon"]), int(args["ddof"])
    if count > ddof:
        variance = sum_squares / (count - ddof) + epsilon
    elif epsilon:
        variance = sum_squares * 0.0 + epsilon
    else:
        return xp.zeros_like(sum_squares)
    positive = variance > 0
    return xp.where(positive, scale / xp.sqrt(xp.where(positive, variance, 1.0)), 0.0)


def given_inverse_stddev(stddev: np.ndarray, args: dict) -> np.ndarray:
    """scale / stddev (scale / sqrt(stddev² + epsilon) with an epsilon), 0 for a zero stddev, in float32."""
    scale, epsilon = np.float32(args["scale"]), np.float32(args["epsilon"])
    stddev = np.asarray(stddev, dtype=np.float32)
    if epsilon:
        return (scale / np.sqrt(stddev * stddev + epsilon)).astype(np.float32)
    nonzero = stddev != 0
    return np.where(nonzero, scale / np.where(nonzero, stddev, np.float32(1)), np.float32(0)).astype(np.float32)


def _work(data: np.ndarray) -> np.ndarray:
    """A sample in the type normalize computes in: float64 stays, everything else float32."""
    if data.dtype.kind not in "iuf":
        raise ValueError(f"normalize takes numeric samples, got {data.dtype}")
    return data if data.dtype in (np.float32, np.float64) else data.astype(np.float32)


@cpu_kernel("normalize")
def normalize(batch_inputs, batch_args, contexts):
    """Whole batch (batch=True pools the statistics of every sample)."""
    from headrace_kernels import audio_loops  # rocket_fft: imported when first needed

    samples = [_work(np.asarray(inputs[0])) for inputs in batch_inputs]
    if not samples:
        return []
    plan = normalize_plan([s.shape for s in samples], batch_args)
    args, axes = batch_args[0], plan.axes
    counts = [math.prod(s.shape[a] for a in axes) for s in samples]
    means = list(plan.means)
    views = [_reduction_view(s, axes) for s in samples]
    squares = [None] * len(samples)
    if plan.batch and means[0] is None:
        total = sum(s.sum(axis=axes, dtype=np.float64, keepdims=True) for s in samples)
        mean = (total / max(sum(counts), 1)).astype(np.float32)
        means = [mean] * len(samples)
    for i, sample in enumerate(samples):
        if means[i] is None and views[i] is not None and plan.stddevs[0] is None:
            mean, sum_squares = audio_loops.row_moments(views[i])
            means[i], squares[i] = mean.reshape(plan.param_shapes[i]), sum_squares.reshape(plan.param_shapes[i])
        elif means[i] is None:
            means[i] = sample.mean(axis=axes, dtype=np.float64, keepdims=True).astype(np.float32) if counts[i] \
                else np.zeros(plan.param_shapes[i], dtype=np.float32)
    if plan.stddevs[0] is not None:
        invs = [given_inverse_stddev(s, args) for s in plan.stddevs]
    else:
        squares = [_sum_squares(s, m, axes) if q is None else q
                   for s, m, q in zip(samples, means, squares, strict=True)]
        if plan.batch:
            inv = inverse_stddev(np, sum(squares), sum(counts), args).astype(np.float32)
            invs = [inv] * len(samples)
        else:
            invs = [inverse_stddev(np, q, c, args).astype(np.float32) for q, c in zip(squares, counts, strict=True)]
    out_dtype = numpy_dtype(args["dtype"])
    shift = samples[0].dtype.type(args["shift"])
    outputs = []
    for sample, view, mean, inv, shape in zip(samples, views, means, invs, plan.param_shapes, strict=True):
        if view is not None and out_dtype == np.float32:
            out = np.empty(sample.shape, np.float32)
            rows = (view.shape[0], view.shape[2])
            audio_loops.scale_rows(view, _rows_of(mean, shape, rows), _rows_of(inv, shape, rows), shift,
                                   out.reshape(view.shape))
            outputs.append(out)
            continue
        work = sample.dtype
        out = (sample - mean.astype(work)) * inv.astype(work) + shift
        outputs.append(saturate_cast(out, out_dtype))
    return outputs


def _reduction_view(sample: np.ndarray, axes: tuple[int, ...]) -> np.ndarray | None:
    """A float32 sample as (outer, reduced, inner) when `axes` are consecutive (the compiled loops' case), else
    None."""
    if sample.dtype != np.float32 or not axes or axes != tuple(range(axes[0], axes[-1] + 1)):
        return None
    shape = sample.shape
    return np.ascontiguousarray(sample).reshape(math.prod(shape[:axes[0]]), math.prod(shape[axes[0]:axes[-1] + 1]),
                                                math.prod(shape[axes[-1] + 1:]))


def _rows_of(parameter: np.ndarray, shape: tuple[int, ...], rows: tuple[int, int]) -> np.ndarray:
    """A per-sample mean or scale (a scalar or of the parameter `shape`) as a contiguous float32 (outer, inner)."""
    return np.ascontiguousarray(np.broadcast_to(np.asarray(parameter, np.float32), shape)).reshape(rows)


def _sum_squares(sample: np.ndarray, mean: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The sum of squared deviations from `mean` over `axes`, in float64."""
    deviation = sample.astype(np.float64) - mean
    return np.square(deviation).sum(axis=axes, keepdims=True)


# shapes

@cpu_kernel("shapes")
def shapes(inputs, args, ctx):
    return saturate_cast(np.array(np.shape(inputs[0]), dtype=np.int64), numpy_dtype(args["dtype"]))
