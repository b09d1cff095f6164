"""CPU kernels of decoders.audio and audio_resample: libsndfile (through `soundfile`) for WAV, FLAC and OGG, and
DALI's own resampler, a Hann-windowed sinc read from a lookup table, compiled by numba.

The resampler is DALI's, step by step and in float32 (the window's table, the block-wise input position, the
four-lane sums of mono signals, the rounding of the output), so audio_resample and the decoder's `sample_rate`
give DALI's CPU results bit for bit on x86-64 (tests/test_ops_audio_io.py checks it against DALI's CPU build).
Its weights repeat every few blocks of output for common rate pairs: a bounded table of them per (rates, quality)
makes most outputs a dot product in the same order, the same bits (the reference loop does the rest).
Like DALI's, it does not widen the filter when it downsamples: frequencies above the new Nyquist rate alias.
Plain PCM WAV is read with numpy, with libsndfile's conversions (the same samples).
soxr, whose band-limited filter gives other (better filtered) samples, is only the tests' second reference.
"""

from __future__ import annotations

import functools
import io
import math
import struct
import threading

import numba
import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.scratch import scratch
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

RESAMPLE_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float32")
"""Element types audio_resample reads and writes, as DALI's."""
DECODE_TYPES = ("int16", "int32", "float32")
"""Element types decoders.audio writes, as DALI's."""
MAX_OUTPUT_ELEMENTS = 1 << 31
"""The most elements one resampled sample may have (8 GiB of float32): a larger request is refused, not allocated."""
_BLOCK = 256  # DALI's CPU resampler restarts its float32 input position every 256 output samples


def lobes_for_quality(quality: float) -> int:
    """The sinc's lobes on each side for a `quality` in [0, 100]: 3 at 0, 16 at 50, 64 at 100 (DALI's formula)."""
    if not 0.0 <= quality <= 100.0:
        raise ValueError(f"quality must be in [0, 100], got {quality}")
    return int(math.floor(0.007 * quality * quality - 0.09 * quality + 3 + 0.5))


@numba.njit(nogil=True, cache=True)
def _fill_window(table: np.ndarray, lobes: int, coeffs: int, scale: np.float32, scale_envelope: np.float32,
                 center: int) -> None:
    """table[1 + i] = sinc(x_i) * hann(y_i), with float32 sin as DALI computes it (the C library's sinf)."""
    for i in range(coeffs):
        x = np.float32(i - center) * scale
        y = np.float32(i - center) * scale_envelope
        xp = np.float32(np.float64(x) * math.pi)
        if abs(xp) < np.float32(1e-5):
            s = np.float32(1.0) - xp * xp * np.float32(1.0 / 6)
        else:
            s = np.float32(math.sin(xp)) / xp
        hann = 0.5 * (1.0 + math.cos(np.float64(y) * math.pi))
        table[i + 1] = np.float32(np.float64(s) * hann)


@functools.lru_cache(maxsize=16)
def resampling_window(quality: float) -> tuple[np.ndarray, int, np.float32, np.float32]:
    """(lookup table, lobes, scale, center) of the window for `quality`: the weight of an input sample at distance x
    is table[i] + d * (table[i + 1] - table[i]) with x * scale + center = i + d (read-only, shared)."""
    lobes = lobes_for_quality(quality)
    coeffs = lobes * 64 + 1
    scale = np.float32(np.float32(2.0 * lobes) / np.float32(coeffs - 1))
    scale_envelope = np.float32(np.float32(2.0) / np.float32(coeffs))
    center = int(np.float32(coeffs - 1) * np.float32(0.5))
    table = np.zeros(coeffs + 5, np.float32)  # a leading zero, then zeros past the end for the interpolation
    _fill_window(table, lobes, coeffs, scale, scale_envelope, center)
    table.setflags(write=False)
    return table, lobes, np.float32(np.float32(1.0) / scale), np.float32(center + 1)


def resampled_length(in_length: int, in_rate: float, out_rate: float) -> int:
    """ceil(in_length * out_rate / in_rate), in float64 as DALI."""
    return int(math.ceil(in_length * float(out_rate) / float(in_rate)))


@numba.njit(nogil=True, cache=True, inline="always")
def _weight(table, wscale, wcenter, x):
    fi = x * wscale + wcenter
    i = np.int64(math.floor(fi))
    di = fi - np.float32(i)
    return table[i] + di * (table[i + 1] - table[i])


@numba.njit(nogil=True, cache=True, inline="always")
def _resample_block(source: np.ndarray, out: np.ndarray, out_block: int, block_end: int, base: int,
                    in_pos: np.float32, fscale: np.float32, table: np.ndarray, lobes: int, wscale: np.float32,
                    wcenter: np.float32, acc: np.ndarray) -> None:
    """out[out_block:block_end] of a block whose input position starts at base + in_pos, DALI's loop (the SSE path
    for one channel: four lanes, then single taps)."""
    n_in = source.shape[0]
    channels = out.shape[1]
    for out_pos in range(out_block, block_end):
        xc = np.int64(math.ceil(in_pos))
        i0 = max(xc - lobes, -base)
        i1 = min(xc + lobes, n_in - base)
        if channels == 1:
            f0 = np.float32(0.0)
            f1 = np.float32(0.0)
            f2 = np.float32(0.0)
            f3 = np.float32(0.0)
            i = i0
            x0 = np.float32(i) - in_pos
            x1 = np.float32(i + 1) - in_pos
            x2 = np.float32(i + 2) - in_pos
            x3 = np.float32(i + 3) - in_pos
            while i + 3 < i1:
                k = base + i
                f0 = f0 + source[k, 0] * _weight(table, wscale, wcenter, x0)
                f1 = f1 + source[k + 1, 0] * _weight(table, wscale, wcenter, x1)
                f2 = f2 + source[k + 2, 0] * _weight(table, wscale, wcenter, x2)
                f3 = f3 + source[k + 3, 0] * _weight(table, wscale, wcenter, x3)
                x0 = x0 + np.float32(4.0)
                x1 = x1 + np.float32(4.0)
                x2 = x2 + np.float32(4.0)
                x3 = x3 + np.float32(4.0)
                i += 4
            f = (f0 + f2) + (f1 + f3)
            x = np.float32(i) - in_pos
            while i < i1:
                f = f + source[base + i, 0] * _weight(table, wscale, wcenter, x)
                x = x + np.float32(1.0)
                i += 1
            out[out_pos, 0] = f
        else:
            for c in range(channels):
                acc[c] = np.float32(0.0)
            x = np.float32(i0) - in_pos
            for i in range(i0, i1):
                w = _weight(table, wscale, wcenter, x)
                for c in range(channels):
                    acc[c] = acc[c] + source[base + i, c] * w
                x = x + np.float32(1.0)
            for c in range(channels):
                out[out_pos, c] = acc[c]
        in_pos = in_pos + fscale


@numba.njit(nogil=True, cache=True)
def _resample(source: np.ndarray, out: np.ndarray, in_rate: float, out_rate: float, table: np.ndarray, lobes: int,
              wscale: np.float32, wcenter: np.float32) -> None:
    """out (n_out, C) from source (n_in, C), both float32, as DALI's CPU resampler (the reference loop)."""
    n_out, channels = out.shape
    scale = in_rate / out_rate
    fscale = np.float32(scale)
    acc = np.zeros(channels, np.float32)
    for out_block in range(0, n_out, _BLOCK):
        block_end = min(out_block + _BLOCK, n_out)
        in_block_f = out_block * scale
        base = np.int64(math.floor(in_block_f))
        in_pos = np.float32(in_block_f - base)
        _resample_block(source, out, out_block, block_end, base, in_pos, fscale, table, lobes, wscale, wcenter, acc)


# The fast path. DALI restarts the float32 input position at every block of _BLOCK outputs, so the weights of a
# block's outputs depend only on its float32 start (its "phase"), and those repeat: every 5 blocks for 44.1k or
# 22.05k -> 16k, every block for 48k -> 16k. A table of each phase's weights, computed by the reference loop's own
# arithmetic (the same x progression per lane), turns every output away from the signal's edges into a dot product
# in the reference's order: the same bits. Outputs whose taps reach past an edge, and blocks whose phase is not in
# the (bounded) table, take the reference loop.
MAX_PHASE_TABLE_BYTES = 1 << 20
"""The most bytes of weights cached per (rates, quality, layout); blocks of phases past it take the plain loop."""
_PHASE_TABLES_KEPT = 8  # rate pairs cached (least recently used dropped)


@numba.njit(nogil=True, cache=True)
def _block_starts(n_out: int, in_rate: float, out_rate: float) -> np.ndarray:
    """The float32 input position at the start of every block, as _resample computes it."""
    scale = in_rate / out_rate
    starts = np.empty((n_out + _BLOCK - 1) // _BLOCK, np.float32)
    for b in range(starts.shape[0]):
        in_block_f = (b * _BLOCK) * scale
        base = np.int64(math.floor(in_block_f))
        starts[b] = np.float32(in_block_f - base)
    return starts


@numba.njit(nogil=True, cache=True)
def _fill_phases(starts: np.ndarray, in_rate: float, out_rate: float, table: np.ndarray, lobes: int,
                 wscale: np.float32, wcenter: np.float32, lanes: bool, weights: np.ndarray, centers: np.ndarray,
                 positions: np.ndarray) -> None:
    """weights[p, j, t]: the weight of tap t (input xc - lobes + t) of output j of a block starting at starts[p],
    with _resample's x progression (four lanes stepping by 4 then single steps when `lanes`, one step else)."""
    fscale = np.float32(in_rate / out_rate)
    taps = 2 * lobes
    for p in range(starts.shape[0]):
        in_pos = starts[p]
        for j in range(_BLOCK):
            xc = np.int64(math.ceil(in_pos))
            centers[p, j] = xc
            positions[p, j] = in_pos
            i0 = xc - lobes
            w = weights[p, j]
            t = 0
            if lanes:
                x0 = np.float32(i0) - in_pos
                x1 = np.float32(i0 + 1) - in_pos
                x2 = np.float32(i0 + 2) - in_pos
                x3 = np.float32(i0 + 3) - in_pos
                while t + 3 < taps:
                    w[t] = _weight(table, wscale, wcenter, x0)
                    w[t + 1] = _weight(table, wscale, wcenter, x1)
                    w[t + 2] = _weight(table, wscale, wcenter, x2)
                    w[t + 3] = _weight(table, wscale, wcenter, x3)
                    x0 = x0 + np.float32(4.0)
                    x1 = x1 + np.float32(4.0)
                    x2 = x2 + np.float32(4.0)
                    x3 = x3 + np.float32(4.0)
                    t += 4
                x = np.float32(i0 + t) - in_pos
            else:
                x = np.float32(i0) - in_pos
            while t < taps:
                w[t] = _weight(table, wscale, wcenter, x)
                x = x + np.float32(1.0)
                t += 1
            in_pos = in_pos + fscale


@numba.njit(nogil=True, cache=True)
def _resample_tabled(source: np.ndarray, out: np.ndarray, in_rate: float, out_rate: float, table: np.ndarray,
                     lobes: int, wscale: np.float32, wcenter: np.float32, phase: np.ndarray, weights: np.ndarray,
                     centers: np.ndarray, positions: np.ndarray) -> None:
    """_resample with the weights of block b read from weights[phase[b]] (phase[b] < 0: computed as there)."""
    n_in = source.shape[0]
    n_out, channels = out.shape
    scale = in_rate / out_rate
    fscale = np.float32(scale)
    taps = 2 * lobes
    acc = np.zeros(channels, np.float32)
    for b in range(phase.shape[0]):
        out_block = b * _BLOCK
        block_end = min(out_block + _BLOCK, n_out)
        in_block_f = out_block * scale
        base = np.int64(math.floor(in_block_f))
        p = phase[b]
        if p < 0:
            in_pos = np.float32(in_block_f - base)
            _resample_block(source, out, out_block, block_end, base, in_pos, fscale, table, lobes, wscale, wcenter,
                            acc)
            continue
        for j in range(block_end - out_block):
            k = base + centers[p, j] - lobes
            if k < 0 or k + taps > n_in:
                _resample_block(source, out, out_block + j, out_block + j + 1, base, positions[p, j], fscale, table,
                                lobes, wscale, wcenter, acc)
                continue
            w = weights[p, j]
            if channels == 1:
                f0 = np.float32(0.0)
                f1 = np.float32(0.0)
                f2 = np.float32(0.0)
                f3 = np.float32(0.0)
                t = 0
                while t + 3 < taps:
                    f0 = f0 + source[k + t, 0] * w[t]
                    f1 = f1 + source[k + t + 1, 0] * w[t + 1]
                    f2 = f2 + source[k + t + 2, 0] * w[t + 2]
                    f3 = f3 + source[k + t + 3, 0] * w[t + 3]
                    t += 4
                f = (f0 + f2) + (f1 + f3)
                while t < taps:
                    f = f + source[k + t, 0] * w[t]
                    t += 1
                out[out_block + j, 0] = f
            else:
                for c in range(channels):
                    acc[c] = np.float32(0.0)
                for t in range(taps):
                    for c in range(channels):
                        acc[c] = acc[c] + source[k + t, c] * w[t]
                for c in range(channels):
                    out[out_block + j, c] = acc[c]


class _PhaseTable:
    """The weights of the block phases seen so far for one (rates, quality, layout), sorted by the phases' bits;
    grown under a lock by copy, so a kernel running on a former version keeps consistent arrays."""

    def __init__(self, taps: int):
        self.taps = taps
        self.limit = max(1, MAX_PHASE_TABLE_BYTES // (_BLOCK * taps * 4))
        self.keys = np.empty(0, np.uint32)
        self.weights = np.empty((0, _BLOCK, taps), np.float32)
        self.centers = np.empty((0, _BLOCK), np.int64)
        self.positions = np.empty((0, _BLOCK), np.float32)


_phase_tables: dict[tuple, _PhaseTable] = {}
_phase_lock = threading.Lock()


@numba.njit(nogil=True, cache=True)
def _lookup_phases(starts: np.ndarray, known: np.ndarray) -> np.ndarray:
    """The index in `known` (sorted phase bits) of each block start's phase, -1 where it is not there."""
    keys = starts.view(np.uint32)
    found = np.empty(keys.shape[0], np.int64)
    for b in range(keys.shape[0]):
        i = np.searchsorted(known, keys[b])
        found[b] = i if i < known.shape[0] and known[i] == keys[b] else -1
    return found


def _phase_table(in_rate: float, out_rate: float, quality: float, lanes: bool, n_out: int):
    """(phase of each block (-1: none), weights, centers, positions) for one call of _resample_tabled."""
    starts = _block_starts(n_out, in_rate, out_rate)
    key = (in_rate / out_rate, quality, lanes)  # the weights depend on the ratio alone
    with _phase_lock:
        entry = _phase_tables.pop(key, None)
        if entry is None:
            while len(_phase_tables) >= _PHASE_TABLES_KEPT:
                _phase_tables.pop(next(iter(_phase_tables)))
            entry = _PhaseTable(2 * lobes_for_quality(quality))
        _phase_tables[key] = entry  # most recently used last
        state = (entry.keys, entry.weights, entry.centers, entry.positions)
    phase = _lookup_phases(starts, state[0])
    if phase.min(initial=0) >= 0 or state[0].shape[0] >= entry.limit:
        return (phase, *state[1:])
    missing = starts[phase < 0]
    _, first = np.unique(missing.view(np.uint32), return_index=True)
    new = missing[np.sort(first)]  # in order of first use: the early blocks, which every signal has, first
    with _phase_lock:
        known = np.isin(new.view(np.uint32), entry.keys)
        new = new[~known][:max(0, entry.limit - entry.keys.shape[0])]
        if new.size:
            table, lobes, wscale, wcenter = resampling_window(quality)
            weights = np.empty((new.size, _BLOCK, entry.taps), np.float32)
            centers = np.empty((new.size, _BLOCK), np.int64)
            positions = np.empty((new.size, _BLOCK), np.float32)
            _fill_phases(new, in_rate, out_rate, table, lobes, wscale, wcenter, lanes, weights, centers, positions)
            keys = np.concatenate([entry.keys, new.view(np.uint32)])
            order = np.argsort(keys, kind="stable")
            entry.keys = keys[order]
            entry.weights = np.concatenate([entry.weights, weights])[order]
            entry.centers = np.concatenate([entry.centers, centers])[order]
            entry.positions = np.concatenate([entry.positions, positions])[order]
        state = (entry.keys, entry.weights, entry.centers, entry.positions)
    return (_lookup_phases(starts, state[0]), *state[1:])


def resample_float(signal: np.ndarray, in_rate: float, out_rate: float, quality: float,
                   out_length: int | None = None, fast: bool = True) -> np.ndarray:
    """A float32 (N,) or (N, C) signal resampled from `in_rate` to `out_rate` (units cancel), float32, with
    ceil(N * out_rate / in_rate) samples unless `out_length` is given. `fast=False` runs the reference loop alone
    (the fast path's weights table gives the same bits)."""
    if not in_rate > 0:
        raise ValueError(f"the input sampling rate must be positive, got {in_rate}")
    if not out_rate >= 0:
        raise ValueError(f"the output sampling rate must not be negative, got {out_rate}")
    source = np.ascontiguousarray(signal, dtype=np.float32)
    frames = source.reshape(source.shape[0], -1)
    n_out = resampled_length(source.shape[0], in_rate, out_rate) if out_length is None else int(out_length)
    if n_out * max(frames.shape[1], 1) > MAX_OUTPUT_ELEMENTS:
        raise ValueError(f"resampling {source.shape[0]} samples from {in_rate:g} to {out_rate:g} would make {n_out} "
                         f"samples, more than the limit of {MAX_OUTPUT_ELEMENTS}")
    out = np.zeros((n_out, frames.shape[1]), np.float32)
    if n_out and frames.shape[1]:
        table, lobes, wscale, wcenter = resampling_window(float(quality))
        if fast and frames.shape[0] >= 2 * lobes:
            phase, weights, centers, positions = _phase_table(float(in_rate), float(out_rate), float(quality),
                                                              frames.shape[1] == 1, n_out)
            _resample_tabled(frames, out, float(in_rate), float(out_rate), table, lobes, wscale, wcenter, phase,
                             weights, centers, positions)
        else:
            _resample(frames, out, float(in_rate), float(out_rate), table, lobes, wscale, wcenter)
    return out.reshape((n_out, *source.shape[1:]))


def to_unit_float(values: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """Samples as float32 in DALI's normalized range before resampling into `out_dtype`: integers divided by their
    type's maximum; mapped to 0..1 when a signed input goes to an unsigned output, to -1..1 the other way round."""
    values = np.asarray(values)
    out_dtype = np.dtype(out_dtype)
    if values.dtype.kind == "f":
        unit = values.astype(np.float32, copy=False)
        signed_source = True
    else:
        unit = values.astype(np.float32) * (np.float32(1.0) / np.float32(np.iinfo(values.dtype).max))
        signed_source = values.dtype.kind == "i"
    if out_dtype.kind == "u" and signed_source:
        return (unit + np.float32(1.0)) * np.float32(0.5)
    if out_dtype.kind != "u" and not signed_source:
        return unit * np.float32(2.0) - np.float32(1.0)
    return unit


def from_unit_float(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 samples in DALI's normalized range as `dtype`: integers scaled by the type's maximum (in float32),
    rounded half away from zero and saturated (DALI's ConvertSatNorm)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype, copy=False)
    return saturate_cast(values.astype(np.float32, copy=False) * np.float32(np.iinfo(dtype).max), dtype)


def downmix(frames: np.ndarray) -> np.ndarray:
    """(N, C) float32 frames to mono: each channel weighted by float32(1 / C), summed channel by channel (DALI)."""
    weight = np.float32(1.0 / frames.shape[1])
    total = frames[:, 0] * weight
    for c in range(1, frames.shape[1]):
        total = total + frames[:, c] * weight
    return total


# WAV data-chunk sizes that mean "unknown, read to the end" (streaming writers): not a lie
_STREAMING_SIZES = (0xFFFFFFFF, 0x7FFFFFFF)


def check_wav_header(data: bytes) -> None:
    """Refuse a RIFF/WAVE file whose `data` chunk declares more bytes than the file holds (truncated, or a lying
    header), or 0 bytes with audio after it: libsndfile (and so DALI) would quietly decode what is there."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return
    offset = 12
    while offset + 8 <= len(data):
        chunk, size = data[offset:offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        body = offset + 8
        if chunk == b"data":
            available = len(data) - body
            if size > available and size not in _STREAMING_SIZES:
                raise ValueError(f"the WAV header declares {size} bytes of audio but the file holds {available} "
                                 "(truncated, or a lying header)")
            if size == 0 and available > 0:
                raise ValueError(f"the WAV header declares 0 bytes of audio but {available} bytes follow it "
                                 "(a lying header)")
            return
        offset = body + size + (size & 1)  # chunks are padded to an even size


def _soundfile():
    import soundfile

    return soundfile


@numba.njit(nogil=True, cache=True)
def _scaled_float32(raw: np.ndarray, scale: np.float32, out: np.ndarray) -> None:
    """out = float32(raw) * scale over flat arrays (numpy's astype then multiply, in one pass without the GIL)."""
    for i in range(raw.shape[0]):
        out[i] = np.float32(raw[i]) * scale


class _PcmWav:
    """A plain PCM WAV (format 1 with 16, 24 or 32-bit integers, or format 3 with float32) read with numpy, with
    libsndfile's own conversions: integers to float as x / 2^(bits - 1) (exact in float32 but for 32-bit, where the
    one rounding of int to float is libsndfile's too), to int32 shifted to the top bits. It reads the subset of
    soundfile.SoundFile that decode_audio uses."""

    def __init__(self, data: bytes, rate: int, channels: int, tag: int, bits: int, offset: int, size: int):
        self.samplerate, self.channels, self.tag, self.bits = rate, channels, tag, bits
        self.width = bits // 8
        self.data, self.offset = data, offset
        self.frames = size // (channels * self.width)
        self.position = 0

    def reads(self, dtype: str) -> bool:
        """Whether libsndfile's conversion to `dtype` is one this class knows (else soundfile reads the file)."""
        if dtype == "float32":
            return True
        if self.tag == 3:
            return False
        return dtype == "int32" or (dtype == "int16" and self.bits == 16)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def seek(self, frame: int) -> None:
        self.position = frame

    def read(self, out: np.ndarray) -> np.ndarray:
        count = min(out.shape[0], self.frames - self.position)
        values = count * self.channels
        start = self.offset + self.position * self.channels * self.width
        if self.bits == 24:
            raw = np.frombuffer(self.data, np.uint8, values * 3, start).reshape(values, 3)
            wide = np.zeros((values, 4), np.uint8)
            wide[:, 1:] = raw  # the 24 bits at the top of an int32, as libsndfile
            raw = wide.view("<i4").reshape(count, self.channels)
        else:
            kind = "<f4" if self.tag == 3 else f"<i{self.width}"
            raw = np.frombuffer(self.data, kind, values, start).reshape(count, self.channels)
        target = out[:count]
        if not target.flags.c_contiguous:
            raise ValueError("_PcmWav.read writes a C-contiguous array")
        if out.dtype == np.float32:
            if self.tag == 3:
                target[...] = raw
            else:
                _scaled_float32(raw.reshape(-1), np.float32(2.0 ** (1 - (32 if self.bits == 24 else self.bits))),
                                target.reshape(-1))
        elif out.dtype == np.int32:
            target[...] = raw.astype(np.int32) << (32 - (32 if self.bits == 24 else self.bits))
        else:
            target[...] = raw
        self.position += count
        return target


_PCM_BITS = {1: (16, 24, 32), 3: (32,)}


def parse_pcm_wav(data: bytes) -> _PcmWav | None:
    """The plain PCM WAV in `data` (after check_wav_header), or None for anything else (other formats, encodings
    or layouts, a header this parser does not fully trust): soundfile reads those."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    offset, fmt = 12, None
    while offset + 8 <= len(data):
        chunk, size = data[offset:offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        body = offset + 8
        if chunk == b"fmt ":
            if fmt is not None or size < 16 or body + size > len(data):
                return None
            fmt = struct.unpack_from("<HHIIHH", data, body)
        elif chunk == b"data":
            riff_end = struct.unpack_from("<I", data, 4)[0] + 8
            if fmt is None or size in _STREAMING_SIZES or body + size > min(len(data), riff_end):
                return None
            tag, channels, rate, byte_rate, align, bits = fmt
            if bits not in _PCM_BITS.get(tag, ()) or not 0 < channels <= 1024 or rate <= 0:
                return None
            if align != channels * bits // 8 or byte_rate != rate * align or size % align:
                return None
            return _PcmWav(data, rate, channels, tag, bits, body, size)
        offset = body + size + (size & 1)
    return None


def decode_audio(data: np.ndarray | bytes, dtype: np.dtype = np.float32, downmix_channels: bool = False,
                 sample_rate: float = 0.0, quality: float = 50.0, offset_seconds: float = 0.0,
                 duration_seconds: float = -1.0, fast_wav: bool = True) -> tuple[np.ndarray, int]:
    """(audio, the file's sampling rate) of one encoded WAV / FLAC / OGG file, as DALI decodes it: (N, C)
    interleaved frames, or (N,) when downmixed; resampled when `sample_rate` > 0 differs from the file's rate; a
    window of `duration_seconds` from `offset_seconds` (NeMo manifests; -1: to the end). ValueError says why a file
    cannot be decoded. Plain PCM WAV is read with numpy (the same samples as libsndfile's) unless `fast_wav` is
    false; everything else with soundfile."""
    # the file's bytes as they are (no copy): the WAV parser and numpy read a memoryview; soundfile gets bytes
    buffer = memoryview(np.ascontiguousarray(data, np.uint8)).cast("B") if isinstance(data, np.ndarray) else \
        memoryview(data).cast("B")
    sample_rate = float(np.float32(sample_rate))  # a float32 in DALI
    if not buffer:
        raise ValueError("the encoded audio is empty (0 bytes)")
    check_wav_header(buffer)
    dtype = np.dtype(dtype)
    if dtype.name not in DECODE_TYPES:
        raise ValueError(f"decoders.audio writes {', '.join(DECODE_TYPES)}, not {dtype}")
    wav = parse_pcm_wav(buffer) if fast_wav else None
    if wav is not None:
        converts = sample_rate > 0 and sample_rate != float(wav.samplerate) or downmix_channels and wav.channels > 1
        if not wav.reads("float32" if converts else dtype.name):
            wav = None
    sf = _soundfile()
    try:
        with wav if wav is not None else sf.SoundFile(io.BytesIO(bytes(buffer))) as audio:
            rate, channels, length = audio.samplerate, audio.channels, audio.frames
            if rate <= 0:
                raise ValueError(f"invalid sampling rate {rate}")
            start = int(offset_seconds * rate) if offset_seconds >= 0 else 0
            count = int(duration_seconds * rate) if duration_seconds >= 0 else length
            count = min(count, length - start)
            if start > 0 and count > 0:
                audio.seek(start)
            resample = sample_rate > 0 and float(sample_rate) != float(rate)
            mix = downmix_channels and channels > 1
            read_as = "float32" if resample or mix else dtype.name
            shape = (max(count, 0), channels)
            # frames that only feed the downmix or the resampler go to this thread's scratch buffer: a fresh block
            # of this size per sample is mapped, faulted in and unmapped by the kernel each time
            frames = scratch("audio.frames", shape, np.float32) if resample or mix else np.empty(shape, read_as)
            got = audio.read(out=frames).shape[0] if count > 0 else 0
    except sf.LibsndfileError as exc:
        raise ValueError(f"libsndfile: {exc.error_string}") from None
    except (RuntimeError, sf.SoundFileError) as exc:
        raise ValueError(f"libsndfile: {exc}") from None
    if count < 0:
        raise ValueError(f"the offset {offset_seconds:g} s is past the end of the audio ({length} samples at "
                         f"{rate} Hz)")
    if got != count:
        raise ValueError(f"decoded {got} of the {count} audio frames the header declares (a truncated file?)")
    if mix:
        frames = downmix(frames)
    elif downmix_channels:
        frames = frames[:, 0]
    if resample:
        frames = resample_float(frames, rate, sample_rate, quality)
    if resample or mix:
        return from_unit_float(frames, dtype), rate
    return frames, rate


@cpu_kernel("decoders.audio")
def decode_audio_kernel(inputs, args, ctx):
    encoded = np.asarray(inputs[0])
    if encoded.dtype != np.uint8 or encoded.ndim != 1:
        raise ValueError(f"expected encoded audio bytes (1-D uint8), got {encoded.dtype} with shape {encoded.shape}")
    target = float(np.float32(args["sample_rate"] or 0.0))
    audio, rate = decode_audio(encoded, numpy_dtype(args["dtype"]), bool(args["downmix"]), target,
                               float(args["quality"]))
    return audio, np.array(target if target > 0 else rate, np.float32)  # the rate of the audio returned


def _float32(value) -> float:
    """A rate argument as DALI holds it: a float32."""
    return float(np.float32(value))


def resampling_rates(args: dict, in_length: int) -> tuple[float, float, int | None]:
    """(in_rate, out_rate, out_length or None) of one sample from audio_resample's arguments (one way of giving
    the ratio: in_rate with out_rate, scale, or out_length)."""
    if args.get("in_rate") is not None or args.get("out_rate") is not None:
        if args.get("in_rate") is None or args.get("out_rate") is None:
            raise ValueError("in_rate and out_rate must be given together")
        in_rate, out_rate = _float32(args["in_rate"]), _float32(args["out_rate"])
        if not in_rate > 0:
            raise ValueError(f"input sampling rates must be positive, got in_rate={in_rate}")
        if not out_rate >= 0:
            raise ValueError(f"output sampling rates must not be negative, got out_rate={out_rate}")
        return in_rate, out_rate, None
    if args.get("scale") is not None:
        scale = _float32(args["scale"])
        if not scale >= 0:
            raise ValueError(f"the scaling factor must not be negative, got scale={scale}")
        return 1.0, scale, None
    if args.get("out_length") is not None:
        out_length = int(args["out_length"])
        if out_length < 0:
            raise ValueError(f"out_length must not be negative, got {out_length}")
        if in_length == 0 and out_length != 0:
            raise ValueError("cannot produce a non-empty signal from an empty input")
        return float(in_length or 1), float(out_length or 1), out_length
    raise ValueError("give in_rate and out_rate, scale, or out_length")


def resample_output_type(input_dtype: np.dtype, dtype_arg) -> np.dtype:
    """audio_resample's output type: `dtype`, else the input's; both must be one of RESAMPLE_TYPES."""
    source = np.dtype(input_dtype)
    if source.name not in RESAMPLE_TYPES:
        raise ValueError(f"audio_resample reads {', '.join(RESAMPLE_TYPES)}, not {source}")
    out = source if dtype_arg is None else numpy_dtype(dtype_arg)
    if out.name not in RESAMPLE_TYPES:
        raise ValueError(f"audio_resample writes {', '.join(RESAMPLE_TYPES)}, not {out}")
    return out


def check_signal_shape(shape: tuple[int, ...]) -> None:
    if len(shape) not in (1, 2):
        raise ValueError(f"audio_resample takes (samples,) or (samples, channels) signals, got shape {shape}")


@cpu_kernel("audio_resample")
def audio_resample(inputs, args, ctx):
    signal = np.asarray(inputs[0])
    check_signal_shape(signal.shape)
    out_dtype = resample_output_type(signal.dtype, args.get("dtype"))
    in_rate, out_rate, out_length = resampling_rates(args, signal.shape[0])
    resampled = resample_float(to_unit_float(signal, out_dtype), in_rate, out_rate, float(args["quality"]),
                               out_length)
    return from_unit_float(resampled, out_dtype)
