"""CPU kernels of the random generators; each draw comes from the sample's own keyed stream."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_batch_draw_kernel, cpu_kernel


def _shape(args) -> tuple[int, ...]:
    return tuple(args.get("shape") or ())


def _scalar(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


@cpu_kernel("random.coin_flip")
def coin_flip(inputs, args, ctx):
    draws = ctx.rng.random(_shape(args)) < _scalar(args["probability"])
    return np.asarray(draws).astype(numpy_dtype(args["dtype"]))


@cpu_batch_draw_kernel("random.coin_flip")
def coin_flip_batch(args, seed: int, first_sample: int, size: int) -> list[np.ndarray]:
    """coin_flip for samples first_sample..first_sample+size-1 in one numba call (no Python per sample)."""
    from headrace_kernels.philox import batch_doubles

    shape = _shape(args)
    draws = batch_doubles(seed, first_sample, size, int(np.prod(shape, dtype=np.int64)))
    flips = (draws < _scalar(args["probability"])).astype(numpy_dtype(args["dtype"])).reshape((size, *shape))
    return [flips[i, ...] for i in range(size)]


@cpu_kernel("random.uniform")
def uniform(inputs, args, ctx):
    values = args.get("values")
    if values:
        picked = np.asarray(values, dtype=np.float64)[ctx.rng.integers(0, len(values), _shape(args))]
        return saturate_cast(np.asarray(picked), numpy_dtype(args["dtype"]))
    low, high = np.asarray(args["range"], dtype=np.float64).ravel()[:2]
    return saturate_cast(np.asarray(ctx.rng.uniform(low, high, _shape(args))), numpy_dtype(args["dtype"]))


@cpu_kernel("random.normal")
def normal(inputs, args, ctx):
    draws = ctx.rng.normal(_scalar(args["mean"]), _scalar(args["stddev"]), _shape(args))
    return saturate_cast(np.asarray(draws), numpy_dtype(args["dtype"]))
