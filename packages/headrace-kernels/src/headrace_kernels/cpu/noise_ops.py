"""CPU kernels of noise.gaussian, noise.salt_and_pepper and noise.shot. The noise of a sample is drawn from its own
stream by functions shared with the GPU kernels (which draw on the host), so both give the same output."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.registry import SampleContext, cpu_kernel


def numeric(sample, op: str):
    """The sample (a numpy or CuPy array; anything else becomes a numpy array) if it holds numbers, else a
    ValueError naming the op."""
    array = sample if hasattr(sample, "dtype") and hasattr(sample, "shape") else np.asarray(sample)
    if np.dtype(array.dtype).kind not in "iuf":
        raise ValueError(f"{op} expects numeric samples, got {array.dtype}")
    return array


def gaussian_noise(shape: tuple[int, ...], args: dict, rng: np.random.Generator) -> np.ndarray:
    """The additive noise of one sample (float64)."""
    stddev = float(args["stddev"])
    if stddev < 0:
        raise ValueError(f"argument 'stddev' must not be negative, got {stddev}")
    return rng.normal(float(args["mean"]), stddev, shape)


def pepper_shape(shape: tuple[int, ...], per_channel: bool) -> tuple[int, ...]:
    """The shape of the salt-and-pepper draws: one per element with `per_channel`, else one per position of the
    last axis' (the channels') vectors, as DALI draws for channel-last data."""
    if not per_channel and len(shape) >= 1:
        return (*shape[:-1], 1)
    return tuple(shape)


def salt_and_pepper_values(dtype: np.dtype, args: dict) -> tuple[np.ndarray, np.ndarray]:
    """(salt, pepper) in the sample's element type: the arguments, else DALI's defaults (+-1 for floats, the
    type's range for integers)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        low, high = -1.0, 1.0
    else:
        low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    salt = high if args.get("salt_val") is None else float(args["salt_val"])
    pepper = low if args.get("pepper_val") is None else float(args["pepper_val"])
    return saturate_cast(np.asarray(salt), dtype), saturate_cast(np.asarray(pepper), dtype)


def salt_and_pepper_draws(shape: tuple[int, ...], args: dict, rng: np.random.Generator) -> np.ndarray:
    """Per draw: 1 for salt, -1 for pepper, 0 to keep the element (int8, in `pepper_shape`)."""
    prob, split = float(args["prob"]), float(args["salt_vs_pepper"])
    for name, value in (("prob", prob), ("salt_vs_pepper", split)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"argument '{name}' must be in [0, 1], got {value}")
    draws = rng.random(pepper_shape(shape, bool(args["per_channel"])))
    return np.where(draws < prob, np.where(draws < prob * split, 1, -1), 0).astype(np.int8)


def shot_noise(sample: np.ndarray, args: dict, rng: np.random.Generator) -> np.ndarray:
    """Poisson(x / factor) * factor of every element, in the sample's element type; factor 0 copies."""
    factor = float(args["factor"])
    if factor < 0:
        raise ValueError(f"argument 'factor' must not be negative, got {factor}")
    if factor == 0:
        return sample.copy()
    rate = sample.astype(np.float64) / factor
    if not np.all(np.isfinite(rate)):
        raise ValueError("noise.shot needs finite values")
    rate = np.maximum(rate, 0.0)
    if rate.size and rate.max() > 1e15:
        raise ValueError(f"noise.shot: x / factor = {rate.max():.3g} is too large for a Poisson draw")
    return saturate_cast(rng.poisson(rate) * factor, sample.dtype)


@cpu_kernel("noise.gaussian")
def gaussian(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    sample = numeric(inputs[0], "noise.gaussian")
    return saturate_cast(sample.astype(np.float64) + gaussian_noise(sample.shape, args, ctx.rng), sample.dtype)


@cpu_kernel("noise.salt_and_pepper")
def salt_and_pepper(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    sample = numeric(inputs[0], "noise.salt_and_pepper")
    salt, pepper = salt_and_pepper_values(sample.dtype, args)
    draws = salt_and_pepper_draws(sample.shape, args, ctx.rng)
    return np.where(draws > 0, salt, np.where(draws < 0, pepper, sample)).astype(sample.dtype)


@cpu_kernel("noise.shot")
def shot(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    return shot_noise(numeric(inputs[0], "noise.shot"), args, ctx.rng)
