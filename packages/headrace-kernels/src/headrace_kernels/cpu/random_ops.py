"""CPU kernels of the random generators; each draw comes from the sample's own keyed stream. uniform's and normal's
draw functions (args, rng, shape) are shared with their GPU kernels, which make the same draws on the host."""

from __future__ import annotations

import numpy as np

from headrace_kernels.columns import Column
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_batch_draw_kernel, cpu_kernel
from headrace_kernels.rng import sample_rng


def _shape(args) -> tuple[int, ...]:
    shape = tuple(int(d) for d in (args.get("shape") or ()))
    if any(d < 0 for d in shape):
        raise ValueError(f"argument 'shape': {list(shape)} has a negative extent")
    return shape


def _scalar(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def output_shape(like_shapes: list[tuple[int, ...]], args) -> tuple[int, ...]:
    """The shape of a sample's draws: its shape-like input's (DALI's `shape_like`) when there is one, else `shape`;
    both at once is refused, as DALI refuses it."""
    if not like_shapes:
        return _shape(args)
    if args.get("shape") is not None:
        raise ValueError('argument "shape" cannot be given with a shape-like input (the output takes the input\'s '
                         "shape)")
    return tuple(int(d) for d in like_shapes[0])


def draw_uniform(args, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    values = args.get("values")
    if values:
        picked = np.asarray(values, dtype=np.float64)[rng.integers(0, len(values), shape)]
        return saturate_cast(np.asarray(picked), numpy_dtype(args["dtype"]))
    low, high = np.asarray(args["range"], dtype=np.float64).ravel()[:2]
    return _uniform_values(np.asarray(rng.uniform(low, high, shape)), low, high, args)


def _uniform_values(draws: np.ndarray, low: float, high: float, args) -> np.ndarray:
    """Float64 draws in [low, high) in the output type."""
    dtype = numpy_dtype(args["dtype"])
    if dtype.kind == "f" and high > low:  # [low, high), as DALI's: a draw that rounds to `high` is the value below it
        top = np.nextafter(dtype.type(high), dtype.type(low))
        draws = np.minimum(draws.astype(dtype), top)
    return saturate_cast(draws, dtype)


def draw_normal(args, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    draws = rng.normal(_scalar(args["mean"]), _scalar(args["stddev"]), shape)
    return saturate_cast(np.asarray(draws), numpy_dtype(args["dtype"]))


def draw_coin_flip(args, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    draws = rng.random(shape) < _scalar(args["probability"])
    return np.asarray(draws).astype(numpy_dtype(args["dtype"]))


DRAWS = {"random.uniform": draw_uniform, "random.normal": draw_normal, "random.coin_flip": draw_coin_flip}
"""Op name -> its draw function (args, rng, shape) -> sample."""


@cpu_kernel("random.coin_flip")
def coin_flip(inputs, args, ctx):
    return draw_coin_flip(args, ctx.rng, output_shape([np.shape(i) for i in inputs], args))


@cpu_batch_draw_kernel("random.coin_flip")
def coin_flip_batch(args, seed: int, first_sample: int, size: int) -> list[np.ndarray]:
    """coin_flip for samples first_sample..first_sample+size-1 in one numba call (no Python per sample)."""
    from headrace_kernels.philox import batch_doubles

    shape = _shape(args)
    draws = batch_doubles(seed, first_sample, size, int(np.prod(shape, dtype=np.int64)))
    flips = (draws < _scalar(args["probability"])).astype(numpy_dtype(args["dtype"])).reshape((size, *shape))
    return Column.of_dense(flips)


@cpu_batch_draw_kernel("random.uniform")
def uniform_batch(args, seed: int, first_sample: int, size: int) -> list[np.ndarray]:
    """uniform for samples first_sample..first_sample+size-1: numpy's draws (low + (high - low) * random()) made in
    one numba call; a discrete `values` set draws sample by sample."""
    from headrace_kernels.philox import batch_doubles

    shape = _shape(args)
    if args.get("values"):
        return [draw_uniform(args, sample_rng(seed, first_sample + i), shape) for i in range(size)]
    low, high = np.asarray(args["range"], dtype=np.float64).ravel()[:2]
    doubles = batch_doubles(seed, first_sample, size, int(np.prod(shape, dtype=np.int64)))
    draws = _uniform_values(low + (high - low) * doubles, low, high, args).reshape((size, *shape))
    return Column.of_dense(draws)


@cpu_kernel("random.uniform")
def uniform(inputs, args, ctx):
    return draw_uniform(args, ctx.rng, output_shape([np.shape(i) for i in inputs], args))


@cpu_kernel("random.normal")
def normal(inputs, args, ctx):
    return draw_normal(args, ctx.rng, output_shape([np.shape(i) for i in inputs], args))
