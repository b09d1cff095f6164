"""CPU kernels of random.choice and random.beta. Their draw functions (inputs, args, rng) -> sample are shared with
the GPU kernels, which make the same draws on the host from the same per-sample streams."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.random_ops import output_shape
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import SampleContext, cpu_kernel

P_SUM_TOLERANCE = 1e-4
"""How far the probabilities `p` may sum from 1 (float32 arguments: [1/3] * 3 sums to 1 + 3e-8)."""


def candidates(value: np.ndarray) -> np.ndarray:
    """What random.choice picks from: 0..n-1 for a scalar integer n, else the rows of the tensor."""
    value = np.asarray(value)
    if value.ndim == 0:
        if value.dtype.kind not in "iu":
            raise ValueError(f"a scalar input gives the number of candidates and must be an integer, got "
                             f"{value.dtype} {value.item()!r}")
        if int(value) <= 0:
            raise ValueError(f"the number of candidates must be positive, got {int(value)}")
        return np.arange(int(value), dtype=value.dtype)
    if value.shape[0] == 0:
        raise ValueError(f"the candidates input is empty (shape {value.shape})")
    return value


def choice_probabilities(p, count: int) -> np.ndarray | None:
    """The probabilities `p` as float64, checked against `count` candidates (None: uniform)."""
    if p is None:
        return None
    probs = np.asarray(p, dtype=np.float64).ravel()
    if probs.size != count:
        raise ValueError(f"argument 'p' gives {probs.size} probabilities for {count} candidates")
    if np.any(probs < 0):
        raise ValueError(f"argument 'p' has a negative probability: {probs.tolist()}")
    if abs(probs.sum() - 1.0) > P_SUM_TOLERANCE:
        raise ValueError(f"argument 'p' must sum to 1, got {probs.sum():.6g}")
    return probs / probs.sum()


def draw_choice(inputs: list, args: dict, rng: np.random.Generator) -> np.ndarray:
    """random.choice of one sample: `shape` (or the shape-like input's) picks from the first input."""
    pool = candidates(inputs[0])
    shape = output_shape([np.shape(i) for i in inputs[1:]], args)
    probs = choice_probabilities(args.get("p"), pool.shape[0])
    index = rng.choice(pool.shape[0], size=shape, p=probs)
    return np.array(pool[index], dtype=pool.dtype)


def draw_beta(inputs: list, args: dict, rng: np.random.Generator) -> np.ndarray:
    """random.beta of one sample, shaped as its shape-like input or `shape`."""
    alpha, beta = float(args["alpha"]), float(args["beta"])
    for name, value in (("alpha", alpha), ("beta", beta)):
        if not value > 0:
            raise ValueError(f"argument '{name}' must be positive, got {value}")
    shape = output_shape([np.shape(i) for i in inputs], args)
    return np.asarray(rng.beta(alpha, beta, shape)).astype(numpy_dtype(args["dtype"]))


DRAWS = {"random.choice": draw_choice, "random.beta": draw_beta}
"""Op name -> its draw function (inputs, args, rng) -> sample."""


@cpu_kernel("random.choice")
def choice(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    return draw_choice(inputs, args, ctx.rng)


@cpu_kernel("random.beta")
def beta(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    return draw_beta(inputs, args, ctx.rng)
