"""CPU kernels of spectrogram, mel_filter_bank, to_decibels and mfcc, with DALI's semantics; the per-sample loops
of the common cases are compiled (`audio_loops`), one GIL-free call per sample.

The tables (windows, mel filter banks, DCT bases, lifters) are built here once per set of arguments and shared by
the GPU kernels, so both devices apply the same float32 coefficients. The FFT runs in float64 (pocketfft is faster
in float64 than in float32 on power-of-two sizes, and more accurate); its result is rounded to float32."""

from __future__ import annotations

import functools
import math

import numpy as np

from headrace_kernels.registry import cpu_kernel

# ---------------------------------------------------------------------------------------------------- spectrogram


@functools.lru_cache(maxsize=64)
def hann_window(length: int) -> np.ndarray:
    """DALI's Hann window: 0.5 * (1 - cos(2 * pi * (t + 0.5) / length)), float32 (read-only)."""
    t = np.arange(length, dtype=np.float64)
    window = (0.5 * (1.0 - np.cos((2.0 * np.pi / length) * (t + 0.5)))).astype(np.float32)
    window.flags.writeable = False
    return window


def spectrogram_setup(args: dict) -> tuple[int, int, int, np.ndarray]:
    """(nfft, window_length, window_step, window) of the arguments, checked as DALI checks them."""
    length, step = int(args["window_length"]), int(args["window_step"])
    if length <= 0:
        raise ValueError(f"window_length must be positive, got {length}")
    if step <= 0:
        raise ValueError(f"window_step must be positive, got {step}")
    nfft = int(args["nfft"]) if args.get("nfft") is not None else length
    if nfft < length:
        raise ValueError(f"window_length ({length}) can't be bigger than nfft ({nfft})")
    if args["power"] not in (1, 2):
        raise ValueError(f"power must be 1 (amplitude) or 2 (power), got {args['power']}")
    if args["layout"] not in ("ft", "tf"):
        raise ValueError(f"layout must be 'ft' or 'tf', got {args['layout']!r}")
    window_fn = args.get("window_fn")
    if window_fn:
        if len(window_fn) != length:
            raise ValueError(f"window_fn has {len(window_fn)} values; it must have window_length ({length})")
        window = np.asarray(window_fn, dtype=np.float32)
    else:
        window = hann_window(length)
    return nfft, length, step, window


def signal_1d(signal, op: str = "spectrogram") -> np.ndarray:
    """The signal as a 1D float32 array: DALI takes (n,), or any shape whose extents are all 1 but one."""
    data = np.asarray(signal)
    if data.dtype.kind != "f":
        raise ValueError(f"{op} needs float32 signals, got {data.dtype}")
    if data.ndim > 1 and sum(extent != 1 for extent in data.shape) > 1:
        raise ValueError(f"{op} needs a 1D signal (or all extents but one equal to 1), got shape {data.shape}")
    return data.reshape(-1).astype(np.float32, copy=False)


def window_count(length: int, window_length: int, step: int, centered: bool) -> int:
    """DALI's number of windows: length // step + 1 centered, else (length - window_length) / step + 1 with C's
    division (rounded towards zero, so a signal up to step - 1 samples shorter than the window still has one)."""
    if centered:
        return length // step + 1
    return int((length - window_length) / step) + 1


def checked_window_count(length: int, window_length: int, step: int, centered: bool) -> int:
    """window_count, or a ValueError for an empty signal or one too short for a single window."""
    if length == 0:
        raise ValueError("spectrogram does not take empty signals (0 samples)")
    count = window_count(length, window_length, step, centered)
    if count <= 0:
        raise ValueError(f"the signal is too short ({length} samples) for one window of window_length "
                         f"{window_length} without center_windows")
    return count


@cpu_kernel("spectrogram")
def spectrogram(inputs, args, ctx):
    nfft, length, step, window = spectrogram_setup(args)
    signal = np.ascontiguousarray(signal_1d(inputs[0]))
    centered = bool(args["center_windows"])
    count = checked_window_count(len(signal), length, step, centered)
    bins, ft = nfft // 2 + 1, args["layout"] == "ft"
    out = np.empty((bins, count) if ft else (count, bins), np.float32)
    from headrace_kernels import audio_loops  # rocket_fft: imported when first needed

    audio_loops.power_spectrogram(signal, window, nfft, step, count, length // 2 if centered else 0,
                                  centered and bool(args["reflect_padding"]), int(args["power"]), out, ft)
    return out


# ------------------------------------------------------------------------------------------------ mel filter bank


def hz_to_mel(hz: np.ndarray, formula: str) -> np.ndarray:
    """Hz to mel: HTK's 2595 * log10(1 + f / 700), or Slaney's (linear below 1 kHz, logarithmic above)."""
    hz = np.asarray(hz, dtype=np.float64)
    if formula == "htk":
        return 1127.0 * np.log1p(hz / 700.0)
    linear = hz / (200.0 / 3.0)
    with np.errstate(divide="ignore"):
        logarithmic = 15.0 + np.log(np.maximum(hz, 1e-300) / 1000.0) / (math.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, logarithmic, linear)


def mel_to_hz(mel: np.ndarray, formula: str) -> np.ndarray:
    """The inverse of hz_to_mel."""
    mel = np.asarray(mel, dtype=np.float64)
    if formula == "htk":
        return 700.0 * np.expm1(mel / 1127.0)
    return np.where(mel >= 15.0, 1000.0 * np.exp((math.log(6.4) / 27.0) * (mel - 15.0)), mel * (200.0 / 3.0))


def mel_params(args: dict) -> tuple[int, float, float, float, bool, str]:
    """(nfilter, sample_rate, freq_low, freq_high, normalize, formula), checked as DALI checks them."""
    nfilter, rate = int(args["nfilter"]), float(args["sample_rate"])
    low, high = float(args["freq_low"]), float(args["freq_high"])
    if nfilter <= 0:
        raise ValueError(f"nfilter must be positive, got {nfilter}")
    if rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {rate}")
    if low < 0:
        raise ValueError(f"freq_low must not be negative, got {low}")
    if high <= 0:
        high = 0.5 * rate
    if not low < high <= rate:
        raise ValueError(f"freq_high ({high}) must be above freq_low ({low}) and at most sample_rate ({rate})")
    if args["mel_formula"] not in ("slaney", "htk"):
        raise ValueError(f"mel_formula must be 'slaney' or 'htk', got {args['mel_formula']!r}")
    return nfilter, rate, low, high, bool(args["normalize"]), args["mel_formula"]


@functools.lru_cache(maxsize=64)
def mel_filters(bins: int, nfilter: int, rate: float, low: float, high: float, normalize: bool,
                formula: str) -> tuple[np.ndarray, np.ndarray]:
    """The (nfilter, bins) float32 triangular filter bank for a spectrogram of `bins` bins (nfft = 2 * (bins - 1))
    and its row_bounds: filter m rises from mel point m to m + 1 and falls to m + 2 (mel points evenly spaced from
    freq_low to freq_high), at bin frequencies k * rate / nfft; bins outside [freq_low, freq_high) get no weight,
    as in DALI."""
    nfft = 2 * (bins - 1)
    weights = np.zeros((nfilter, bins), np.float64)
    if nfft > 0:
        mel_low, mel_high = hz_to_mel(low, formula), hz_to_mel(high, formula)
        points = mel_to_hz(mel_low + (mel_high - mel_low) / (nfilter + 1) * np.arange(nfilter + 2), formula)
        points[-1] = high
        freqs = np.arange(bins) * (rate / nfft)
        left, center, right = points[:-2, None], points[1:-1, None], points[2:, None]
        rising = (freqs - left) / (center - left)
        falling = (right - freqs) / (right - center)
        weights = np.maximum(0.0, np.minimum(rising, falling))
        inside = (freqs >= low) & (freqs < high)
        weights *= inside
        if normalize:
            weights *= (2.0 / (right - left))
    return read_only(weights.astype(np.float32))


def row_bounds(table: np.ndarray) -> np.ndarray:
    """Each row's nonzero columns [lo, hi) as (rows, 2) int32 ([0, 0) for a row of zeros)."""
    if not table.shape[1]:
        return np.zeros((table.shape[0], 2), np.int32)
    nonzero = table != 0
    found = nonzero.any(axis=1)
    lo = np.where(found, nonzero.argmax(axis=1), 0)
    hi = np.where(found, table.shape[1] - nonzero[:, ::-1].argmax(axis=1), 0)
    return np.stack([lo, hi], axis=1).astype(np.int32)


def read_only(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(table, row_bounds), both read-only: cached and shared by threads and devices."""
    bounds = row_bounds(table)
    table.flags.writeable = bounds.flags.writeable = False
    return table, bounds


def frequency_axis(args: dict, ndim: int) -> int:
    """The axis mel_filter_bank works on: `axes` (the layout's 'f'), else the second last axis (or the only one)."""
    axes = args.get("axes")
    if axes:
        axis = int(axes[0])
        if not -ndim <= axis < ndim:
            raise ValueError(f"axes: frequency axis {axis} is out of range for {ndim}-dimensional data")
        return axis % ndim
    names = args.get("axis_names")
    if names not in (None, "f"):
        raise ValueError(f"axis_names {names!r}: the data has no layout to find it in; give axes instead")
    if ndim == 0:
        raise ValueError("mel_filter_bank needs a spectrogram, got a scalar")
    return max(ndim - 2, 0)


def float32_input(data, op: str) -> np.ndarray:
    """The sample as float32 (DALI's ops take float32; other float types are converted)."""
    array = np.asarray(data)
    if array.dtype.kind != "f":
        raise ValueError(f"{op} needs float32 data, got {array.dtype}")
    return array.astype(np.float32, copy=False)


def apply_along(table: np.ndarray, bounds: np.ndarray, data: np.ndarray, axis: int) -> np.ndarray:
    """table (rows, n) applied to `data` along `axis` (extent n), each row over its nonzero band only (a mel
    filter covers a few bins); the result has `rows` there. float32."""
    shape = data.shape
    outer, n, inner = int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1:]))
    out_shape = (*shape[:axis], table.shape[0], *shape[axis + 1:])
    if outer > 1 and inner > 1:
        return np.ascontiguousarray(np.matmul(table, data.reshape(outer, n, inner))).reshape(out_shape)
    columns = data.reshape(n, inner) if outer == 1 else data.reshape(outer, n).T  # (n, columns)
    out = np.empty((table.shape[0], columns.shape[1]), np.float32)
    from headrace_kernels import audio_loops  # rocket_fft: imported when first needed

    audio_loops.banded_product(table, bounds, np.ascontiguousarray(columns), out)
    return (out if outer == 1 else np.ascontiguousarray(out.T)).reshape(out_shape)


@cpu_kernel("mel_filter_bank")
def mel_filter_bank(inputs, args, ctx):
    data = float32_input(inputs[0], "mel_filter_bank")
    axis = frequency_axis(args, data.ndim)
    return apply_along(*mel_filters(data.shape[axis], *mel_params(args)), data, axis)


# ------------------------------------------------------------------------------------------------- to_decibels


def decibel_params(args: dict) -> tuple[np.float32, np.float32, float | None]:
    """(multiplier / log2(10), min_ratio, reference or None for each sample's maximum), as DALI computes them in
    float32; min_ratio = 10 ** (cutoff_db / multiplier), the smallest positive float where that rounds to 0."""
    multiplier, cutoff = np.float32(args["multiplier"]), np.float32(args["cutoff_db"])
    reference = args.get("reference")
    if reference is not None and reference == 0:
        raise ValueError("reference must not be 0")
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        min_ratio = np.float32(10.0) ** (cutoff / multiplier)
    if min_ratio == 0:
        min_ratio = np.nextafter(np.float32(0), np.float32(1))
    return np.float32(float(multiplier) / math.log2(10.0)), np.float32(min_ratio), reference


def inverse_reference(reference: float) -> np.float32:
    """1 / reference as DALI rounds it (exactly 1 for 1; infinity for 0)."""
    with np.errstate(divide="ignore"):
        return np.float32(1.0) if reference == 1.0 else np.float32(np.float64(1.0) / np.float64(reference))


def sample_reference(data: np.ndarray) -> float:
    """DALI's reference of a sample: its largest element, at least 0, NaNs skipped."""
    return float(np.fmax.reduce(data.reshape(-1), initial=np.float32(0.0)))


@cpu_kernel("to_decibels")
def to_decibels(inputs, args, ctx):
    data = float32_input(inputs[0], "to_decibels")
    scale, min_ratio, reference = decibel_params(args)
    inverse = inverse_reference(sample_reference(data) if reference is None else reference)
    out = np.empty(data.shape, np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # in place: four numpy calls, no temporaries
        np.multiply(data, inverse, out=out)  # a 0 reference gives inf: 0 * inf is NaN, which fmax makes min_ratio
        np.fmax(min_ratio, out, out=out)
        np.log2(out, out=out)
        np.multiply(scale, out, out=out)
    return out


# -------------------------------------------------------------------------------------------------------- mfcc


def mfcc_params(args: dict) -> tuple[int, int, bool, int, float]:
    """(axis, dct_type, normalize, n_mfcc, lifter), checked as DALI checks them."""
    axis, dct_type, n_mfcc = int(args["axis"]), int(args["dct_type"]), int(args["n_mfcc"])
    if axis < 0:
        raise ValueError(f"axis must not be negative, got {axis}")
    if dct_type not in (1, 2, 3, 4):
        raise ValueError(f"dct_type must be 1, 2, 3 or 4, got {dct_type}")
    if n_mfcc <= 0:
        raise ValueError(f"n_mfcc must be positive, got {n_mfcc}")
    if args["normalize"] and dct_type == 1:
        raise ValueError("normalize is not supported with dct_type 1")
    return axis, dct_type, bool(args["normalize"]), n_mfcc, float(args["lifter"])


@functools.lru_cache(maxsize=64)
def dct_table(n: int, count: int, dct_type: int, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """The first `count` rows of the (unscaled or orthonormal) DCT basis of length n, float32 as DALI's tables,
    and their row_bounds."""
    k = np.arange(count, dtype=np.float64)[:, None]
    t = np.arange(n, dtype=np.float64)[None, :]
    if count == 0:  # an empty axis: no coefficients
        return read_only(np.zeros((0, n), np.float32))
    if dct_type == 1:
        table = np.cos(np.pi / (n - 1) * k * t)
        table[:, 0] = 0.5
        table[:, -1] = np.where(np.arange(count) % 2 == 0, 0.5, -0.5)
    elif dct_type == 2:
        table = np.cos(np.pi / n * (t + 0.5) * k)
        if normalize:
            table *= np.where(k == 0, 1.0 / math.sqrt(n), math.sqrt(2.0 / n))
    elif dct_type == 3:
        table = np.cos(np.pi / n * t * (k + 0.5))
        table[:, 0] = 1.0 / math.sqrt(n) if normalize else 0.5
        if normalize:
            table[:, 1:] *= math.sqrt(2.0 / n)
    else:
        table = np.cos(np.pi / n * (t + 0.5) * (k + 0.5)) * (math.sqrt(2.0 / n) if normalize else 1.0)
    return read_only(table.astype(np.float32))


@functools.lru_cache(maxsize=64)
def lifter_coefficients(count: int, lifter: float) -> np.ndarray:
    """1 + (lifter / 2) * sin(pi * (i + 1) / lifter) for i < count, float32."""
    i = np.arange(1, count + 1, dtype=np.float64)
    out = (1.0 + (lifter / 2.0) * np.sin(np.pi / lifter * i)).astype(np.float32)
    out.flags.writeable = False
    return out


def mfcc_tables(shape: tuple[int, ...], args: dict) -> tuple[int, tuple, np.ndarray | None]:
    """(axis, (DCT table (coefficients, extent), its row_bounds), lifter coefficients or None) of one sample."""
    axis, dct_type, normalize, n_mfcc, lifter = mfcc_params(args)
    if axis >= len(shape):
        raise ValueError(f"axis {axis} is out of range for {len(shape)}-dimensional data")
    n = shape[axis]
    if dct_type == 1 and n < 2:
        raise ValueError(f"dct_type 1 needs at least 2 values along axis {axis}, got {n}")
    count = min(n_mfcc, n)
    return axis, dct_table(n, count, dct_type, normalize), (lifter_coefficients(count, lifter) if lifter else None)


@cpu_kernel("mfcc")
def mfcc(inputs, args, ctx):
    data = float32_input(inputs[0], "mfcc")
    axis, (table, bounds), lifter = mfcc_tables(data.shape, args)
    out = apply_along(table, bounds, data, axis)
    if lifter is not None:
        out *= lifter.reshape((-1,) + (1,) * (data.ndim - axis - 1))
    return out
