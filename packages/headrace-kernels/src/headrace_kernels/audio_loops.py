"""The audio feature kernels' per-sample loops, compiled by numba: each sample's spectrogram, mel filter bank,
preemphasis and normalization is one call that releases the GIL once, instead of dozens of short numpy
calls that each hand the GIL to the other workers and wait to get it back. The FFT is pocketfft's (DUCC0) through
rocket-fft, which makes `np.fft` callable from numba; around it, float32 window products and a float64 FFT whose
power is rounded to float32 (the bits of the numpy formulation this replaced)."""

from __future__ import annotations

import numba
import numpy as np
import rocket_fft  # noqa: F401  (registers numpy.fft's overloads with numba)

FFT_ROWS = 32  # windows per FFT call: 32 x 512 float64 frames and their spectrum stay in L2


@numba.njit(nogil=True, cache=True, inline="always")
def _reflect_101(index: int, length: int) -> int:
    """`index` mirrored into [0, length) without repeating the edge sample, repeatedly (DALI's idx_reflect_101)."""
    if length == 1:
        return 0
    period = 2 * (length - 1)
    index %= period
    return period - index if index >= length else index


@numba.njit(nogil=True, cache=True)
def power_spectrogram(signal: np.ndarray, window: np.ndarray, nfft: int, step: int, count: int, offset: int,
                      reflect: bool, power: int, out: np.ndarray, ft: bool) -> None:
    """|rfft(window * frame, nfft)| ** power of `count` windows of the float32 `signal` into `out` ((bins, count)
    if `ft`, else (count, bins)), float32. Window w starts at w * step - offset; samples outside the signal are
    mirrored (reflect-101) with `reflect`, else zero. The windowed samples are rounded to float32 and transformed in
    float64."""
    length = window.shape[0]
    n = signal.shape[0]
    bins = nfft // 2 + 1
    buffer = np.zeros((min(FFT_ROWS, count), nfft))  # zero beyond window_length: the FFT's padding
    for start in range(0, count, FFT_ROWS):
        rows = min(FFT_ROWS, count - start)
        for r in range(rows):
            first = (start + r) * step - offset
            frame = buffer[r]
            if 0 <= first and first + length <= n:
                for j in range(length):
                    frame[j] = np.float32(signal[first + j] * window[j])
            else:
                for j in range(length):
                    i = first + j
                    if 0 <= i < n:
                        frame[j] = np.float32(signal[i] * window[j])
                    elif reflect:
                        frame[j] = np.float32(signal[_reflect_101(i, n)] * window[j])
                    else:
                        frame[j] = 0.0
        spectrum = np.fft.rfft(buffer[:rows], axis=-1)
        for r in range(rows):
            w = start + r
            for b in range(bins):
                value = spectrum[r, b]
                energy = value.real * value.real + value.imag * value.imag
                level = np.float32(energy if power == 2 else np.sqrt(energy))
                if ft:
                    out[b, w] = level
                else:
                    out[w, b] = level


@numba.njit(nogil=True, cache=True)
def banded_product(table: np.ndarray, bounds: np.ndarray, columns: np.ndarray, out: np.ndarray) -> None:
    """out[row] = table[row, lo:hi] @ columns[lo:hi] for every row of the float32 (rows, n) `table` and its nonzero
    band [lo, hi) in `bounds`, over the (n, m) float32 `columns`; summed in float32 in bin order (no BLAS: the same
    result on every machine and thread count)."""
    for row in range(table.shape[0]):
        target = out[row]
        target[:] = 0.0
        for k in range(bounds[row, 0], bounds[row, 1]):
            weight = table[row, k]
            source = columns[k]
            for t in range(target.shape[0]):
                target[t] += weight * source[t]


@numba.njit(nogil=True, cache=True)
def preemphasis(x: np.ndarray, coeff, first, out: np.ndarray) -> None:
    """out[0] = first, out[i] = x[i] - coeff * x[i - 1] (in x's type)."""
    out[0] = first
    for i in range(1, x.shape[0]):
        out[i] = x[i] - coeff * x[i - 1]


@numba.njit(nogil=True, cache=True, inline="always")
def _lane_sum(row: np.ndarray, mean: float) -> float:
    """The float64 sum of (row - mean) ** 2 if mean is not NaN, else of row, in 8 interleaved partial sums (which
    the compiler vectorizes; one running sum would not be)."""
    lanes = np.zeros(8, np.float64)
    n = row.shape[0]
    whole = n - n % 8
    center = mean == mean
    for k in range(0, whole, 8):
        for j in range(8):
            value = np.float64(row[k + j])
            if center:
                value = (value - mean) * (value - mean)
            lanes[j] += value
    total = 0.0
    for k in range(whole, n):
        value = np.float64(row[k])
        total += (value - mean) * (value - mean) if center else value
    return total + lanes.sum()


@numba.njit(nogil=True, cache=True)
def row_moments(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (outer, inner) position of an (outer, n, inner) float32 array: the float64 mean over n rounded to
    float32, and the float64 sum of squared deviations from that rounded mean."""
    outer, n, inner = data.shape
    means = np.zeros((outer, inner), np.float32)
    squares = np.zeros((outer, inner), np.float64)
    if inner == 1:
        for o in range(outer):
            row = data[o, :, 0]
            means[o, 0] = np.float32(_lane_sum(row, np.nan) / n) if n else np.float32(0.0)
            squares[o, 0] = _lane_sum(row, np.float64(means[o, 0]))
        return means, squares
    sums = np.zeros(inner, np.float64)
    for o in range(outer):
        sums[:] = 0.0
        for k in range(n):
            for i in range(inner):
                sums[i] += data[o, k, i]
        for i in range(inner):
            means[o, i] = np.float32(sums[i] / n) if n else np.float32(0.0)
        sums[:] = 0.0
        for k in range(n):
            for i in range(inner):
                deviation = np.float64(data[o, k, i]) - np.float64(means[o, i])
                sums[i] += deviation * deviation
        squares[o] = sums
    return means, squares


@numba.njit(nogil=True, cache=True)
def scale_rows(data: np.ndarray, means: np.ndarray, scales: np.ndarray, shift: np.float32, out: np.ndarray) -> None:
    """out[o, k, i] = (data[o, k, i] - means[o, i]) * scales[o, i] + shift in float32, over (outer, n, inner)."""
    outer, n, inner = data.shape
    if inner == 1:
        for o in range(outer):
            source, target = data[o, :, 0], out[o, :, 0]
            mean, scale = means[o, 0], scales[o, 0]
            for k in range(n):
                target[k] = (source[k] - mean) * scale + shift
        return
    for o in range(outer):
        for k in range(n):
            for i in range(inner):
                out[o, k, i] = (data[o, k, i] - means[o, i]) * scales[o, i] + shift
