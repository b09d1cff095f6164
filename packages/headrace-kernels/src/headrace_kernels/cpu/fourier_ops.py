"""CPU kernel of power_spectrum (numpy's FFT in float64, rounded to float32), with DALI's checks."""

from __future__ import annotations

import numpy as np

from headrace_kernels.registry import cpu_kernel


def spectrum_setup(shape: tuple[int, ...], dtype: np.dtype, args: dict) -> tuple[int, int]:
    """(axis, nfft) of one sample of `shape`, checked as DALI checks them (float32 data, an axis in range, a
    non-empty transform)."""
    if np.dtype(dtype) != np.float32:
        raise ValueError(f"power_spectrum needs float32 data, got {np.dtype(dtype)}")
    ndim, axis = len(shape), int(args["axis"])
    if not -ndim <= axis < ndim:
        raise ValueError(f"argument 'axis' ({axis}) is out of range for {ndim}-dimensional data {shape}")
    axis %= ndim
    nfft = int(args["nfft"]) if args.get("nfft") is not None else shape[axis]
    if nfft <= 0:
        raise ValueError(f"argument 'nfft' must be positive; the data has {shape[axis]} values along axis {axis} "
                         "(an empty axis cannot be transformed)")
    if args["power"] not in (1, 2):
        raise ValueError(f"argument 'power' must be 1 or 2, got {args['power']}")
    return axis, nfft


@cpu_kernel("power_spectrum")
def power_spectrum(inputs, args, ctx):
    data = np.asarray(inputs[0])
    axis, nfft = spectrum_setup(data.shape, data.dtype, args)
    spectrum = np.fft.rfft(data.astype(np.float64), n=nfft, axis=axis)
    power = spectrum.real * spectrum.real + spectrum.imag * spectrum.imag
    return (power if args["power"] == 2 else np.sqrt(power)).astype(np.float32)
