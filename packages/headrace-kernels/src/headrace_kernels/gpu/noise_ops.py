"""GPU noise ops. gaussian and salt_and_pepper draw each sample's noise on the host from its own stream (the CPU
kernels' functions), upload it and apply it with CuPy: the CPU's output bit for bit. shot's draws depend on the
data (Poisson of each element), so its samples round-trip through the host and the CPU kernel's function."""

from __future__ import annotations

from headrace_kernels.cpu.noise_ops import (
    gaussian_noise,
    numeric,
    salt_and_pepper_draws,
    salt_and_pepper_values,
    shot_noise,
)
from headrace_kernels.gpu.math_ops import cast_array
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import GpuBatch, KernelSetup, gpu_kernel


def _gaussian_sample(sample, args: dict, rng):
    cp = cupy()
    numeric(sample, "noise.gaussian")
    noise = cp.asarray(gaussian_noise(tuple(sample.shape), args, rng))
    return cast_array(sample.astype(cp.float64) + noise, sample.dtype)


def _salt_and_pepper_sample(sample, args: dict, rng):
    cp = cupy()
    numeric(sample, "noise.salt_and_pepper")
    salt, pepper = salt_and_pepper_values(sample.dtype, args)
    draws = cp.asarray(salt_and_pepper_draws(tuple(sample.shape), args, rng))
    kept = cp.where(draws < 0, cp.asarray(pepper), sample)
    return cp.where(draws > 0, cp.asarray(salt), kept).astype(sample.dtype)


def _shot_sample(sample, args: dict, rng):
    cp = cupy()
    host = numeric(cp.asnumpy(sample), "noise.shot")
    return cp.asarray(shot_noise(host, args, rng))


_SAMPLE = {"noise.gaussian": _gaussian_sample, "noise.salt_and_pepper": _salt_and_pepper_sample,
           "noise.shot": _shot_sample}


@gpu_kernel("noise.gaussian", "noise.salt_and_pepper", "noise.shot")
class Noise:
    """One node's noise: per sample, its draws from batch.rng(i) applied to it; returns the list of samples."""

    def __init__(self, setup: KernelSetup):
        self.apply = _SAMPLE[setup.op]

    def run(self, batch: GpuBatch) -> list:
        return [per_sample(i, self.apply, sample, args, batch.rng(i))
                for i, (sample, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True))]
