"""CPU kernels of the reductions (numpy), with DALI's output types: sum keeps floats and widens integers to 64
bits, mean/mean_square/rms give float32, min/max keep the type."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.axes import resolve_axes
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


def _data_axes(inputs, args) -> tuple[np.ndarray, tuple[int, ...]]:
    data = np.asarray(inputs[0])
    axes = tuple(resolve_axes(args["axes"], args["axis_names"], data.ndim))
    if any(data.shape[a] == 0 for a in axes):
        raise ValueError(f"cannot reduce an empty axis (shape {data.shape}, axes {axes})")
    return data, axes


def sum_type(dtype: np.dtype) -> np.dtype:
    """The type sum gives for `dtype` (DALI's rule): float32 or float64 for floats, 64-bit integers otherwise."""
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize <= 4 else dtype
    return np.dtype(np.uint64) if dtype.kind in "ub" else np.dtype(np.int64)


def _out(value, args, default: np.dtype) -> np.ndarray:
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else default
    return np.asarray(value).astype(dtype)


@cpu_kernel("reductions.sum")
def reduce_sum(inputs, args, ctx):
    data, axes = _data_axes(inputs, args)
    accumulate = np.float64 if data.dtype.kind == "f" else sum_type(data.dtype)
    return _out(data.sum(axis=axes, keepdims=args["keep_dims"], dtype=accumulate), args, sum_type(data.dtype))


@cpu_kernel("reductions.mean")
def reduce_mean(inputs, args, ctx):
    data, axes = _data_axes(inputs, args)
    return _out(data.mean(axis=axes, keepdims=args["keep_dims"], dtype=np.float64), args, np.dtype(np.float32))


@cpu_kernel("reductions.mean_square")
def reduce_mean_square(inputs, args, ctx):
    data, axes = _data_axes(inputs, args)
    squares = np.square(data, dtype=np.float64)
    return _out(squares.mean(axis=axes, keepdims=args["keep_dims"]), args, np.dtype(np.float32))


@cpu_kernel("reductions.rms")
def reduce_rms(inputs, args, ctx):
    data, axes = _data_axes(inputs, args)
    squares = np.square(data, dtype=np.float64)
    return _out(np.sqrt(squares.mean(axis=axes, keepdims=args["keep_dims"])), args, np.dtype(np.float32))


@cpu_kernel("reductions.min")
def reduce_min(inputs, args, ctx):
    data, axes = _data_axes(inputs, args)
    return np.asarray(data.min(axis=axes, keepdims=args["keep_dims"]))


@cpu_kernel("reductions.max")
def reduce_max(inputs, args, ctx):
    data, axes = _data_axes(inputs, args)
    return np.asarray(data.max(axis=axes, keepdims=args["keep_dims"]))


def _variance(inputs, args) -> np.ndarray:
    data, axes = _data_axes(inputs, args)
    kept = tuple(1 if a in axes else n for a, n in enumerate(data.shape))
    mean = np.asarray(inputs[1], dtype=np.float64)
    if mean.size != int(np.prod(kept)):
        raise ValueError(f"the mean has shape {mean.shape}; reducing shape {data.shape} over axes {axes} needs "
                         f"{int(np.prod(kept))} values")
    deviations = np.square(data.astype(np.float64) - mean.reshape(kept))
    count = int(np.prod([data.shape[a] for a in axes])) - args["ddof"]
    if count <= 0:
        raise ValueError(f"ddof={args['ddof']} leaves no degrees of freedom")
    return deviations.sum(axis=axes, keepdims=args["keep_dims"]) / count


@cpu_kernel("reductions.variance")
def reduce_variance(inputs, args, ctx):
    return _variance(inputs, args).astype(np.float32)


@cpu_kernel("reductions.std_dev")
def reduce_std_dev(inputs, args, ctx):
    return np.sqrt(_variance(inputs, args)).astype(np.float32)
