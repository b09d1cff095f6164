"""CPU kernels of zeros, ones, full and their `_like` forms: a sample of the asked shape, filled (a fill value
broadcast NumPy-style, converted with DALI's rounding and saturation where the type changes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


def output_shape(args: dict[str, Any]) -> tuple[int, ...]:
    """The `shape` argument checked (no negative extent) and the `layout` against it; a scalar when not given."""
    shape = tuple(int(n) for n in (args.get("shape") or ()))
    if any(n < 0 for n in shape):
        raise ValueError(f"argument 'shape' {list(shape)} has a negative extent")
    layout = args.get("layout")
    if layout and len(layout) != len(shape):
        raise ValueError(f"argument 'layout' {layout!r} has {len(layout)} dimensions, but 'shape' {list(shape)} "
                         f"has {len(shape)}")
    return shape


def broadcast_fill(fill_shape: Sequence[int], shape: Sequence[int]) -> None:
    """Check that a fill of `fill_shape` broadcasts to `shape` (NumPy's rule); ValueError naming both if not."""
    if len(fill_shape) > len(shape) or any(f not in (1, n) for f, n in zip(fill_shape[::-1], shape[::-1],
                                                                          strict=False)):
        raise ValueError(f"the fill value of shape {tuple(fill_shape)} does not broadcast to the output shape "
                         f"{tuple(shape)}")


def constant_like(data: np.ndarray, value: int, args: dict[str, Any]) -> np.ndarray:
    """`value` in the shape of `data`, of `dtype` (default data's type)."""
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else data.dtype
    return np.full(data.shape, value, dtype=dtype)


def full_sample(fill: np.ndarray, args: dict[str, Any]) -> np.ndarray:
    """`fill` broadcast to the `shape` argument, of its own type."""
    shape = output_shape(args)
    broadcast_fill(fill.shape, shape)
    return np.broadcast_to(fill, shape).copy()  # not ascontiguousarray: it makes a scalar 1-D


def full_like_sample(data: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """`fill` broadcast to data's shape, converted to data's type."""
    broadcast_fill(fill.shape, data.shape)
    return np.broadcast_to(saturate_cast(fill, data.dtype), data.shape).copy()


@cpu_kernel("zeros")
def zeros(inputs, args, ctx):
    return np.zeros(output_shape(args), dtype=numpy_dtype(args["dtype"]))


@cpu_kernel("ones")
def ones(inputs, args, ctx):
    return np.ones(output_shape(args), dtype=numpy_dtype(args["dtype"]))


@cpu_kernel("zeros_like")
def zeros_like(inputs, args, ctx):
    return constant_like(np.asarray(inputs[0]), 0, args)


@cpu_kernel("ones_like")
def ones_like(inputs, args, ctx):
    return constant_like(np.asarray(inputs[0]), 1, args)


@cpu_kernel("full")
def full(inputs, args, ctx):
    return full_sample(np.asarray(inputs[0]), args)


@cpu_kernel("full_like")
def full_like(inputs, args, ctx):
    return full_like_sample(np.asarray(inputs[0]), np.asarray(inputs[1]))
