"""GPU power_spectrum: cupy.fft.rfft (cuFFT) per sample in float32, with the CPU kernel's checks."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.fourier_ops import spectrum_setup
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _spectrum(sample, args: dict):
    cp = cupy()
    axis, nfft = spectrum_setup(tuple(sample.shape), np.dtype(sample.dtype), args)
    spectrum = cp.fft.rfft(sample, n=nfft, axis=axis)
    power = spectrum.real * spectrum.real + spectrum.imag * spectrum.imag
    return (power if args["power"] == 2 else cp.sqrt(power)).astype(cp.float32)


@gpu_kernel("power_spectrum")
def power_spectrum_kernel(batch):
    """One rfft per sample (samples may differ in shape and nfft)."""
    return [per_sample(i, _spectrum, s, a) for i, (s, a) in enumerate(zip(batch.samples(), batch.sample_args(),
                                                                          strict=True))]
