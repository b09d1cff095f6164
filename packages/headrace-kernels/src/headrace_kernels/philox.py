"""The per-sample random streams of a whole batch at once, compiled by numba (GIL released): numpy's
`Generator(Philox(key=[seed, index]))` draw for draw (Philox4x64-10, its 4-word output buffer and 32-bit half
buffer, `random`, `uniform` and Lemire's bounded `integers`), so a batched op draws exactly what the per-sample
kernels draw from `headrace_kernels.rng.sample_rng`. The GPU stage's host half uses it to draw a batch's crop
windows and coin flips without a Python call per sample."""

from __future__ import annotations

import math

import numba
import numpy as np

_M0 = np.uint64(0xD2E7470EE14C6C93)
_M1 = np.uint64(0xCA5A826395121157)
_W0 = np.uint64(0x9E3779B97F4A7C15)
_W1 = np.uint64(0xBB67AE8584CAA73B)
_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_S11 = np.uint64(11)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_DOUBLE_UNIT = 1.0 / 9007199254740992.0
# a stream's state: key0, key1, counter, output buffer (4 words), buffer position, has a 32-bit half, that half
_KEY0, _KEY1, _CTR, _BUF, _POS, _HAS32, _HALF = 0, 1, 2, 3, 7, 8, 9
_STATE = 10
STATE_WORDS = _STATE
"""The length of a stream's state array (uint64): `seed_stream` keys one, `next_word32` draws from it."""


@numba.njit(inline="always")
def _mulhilo(a, b):
    lo = a * b
    a_lo, a_hi, b_lo, b_hi = a & _LOW32, a >> _S32, b & _LOW32, b >> _S32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> _S32) + (p1 & _LOW32) + (p2 & _LOW32)
    return p3 + (p1 >> _S32) + (p2 >> _S32) + (mid >> _S32), lo


@numba.njit(nogil=True)
def _refill(state):
    """The next Philox4x64-10 block into the buffer: counter + 1 (numpy increments before it encrypts)."""
    state[_CTR] += _ONE
    c0, c1, c2, c3 = state[_CTR], _ZERO, _ZERO, _ZERO
    k0, k1 = state[_KEY0], state[_KEY1]
    for _ in range(10):
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 += _W0
        k1 += _W1
    state[_BUF], state[_BUF + 1], state[_BUF + 2], state[_BUF + 3] = c0, c1, c2, c3
    state[_POS] = _ZERO


@numba.njit(nogil=True)
def seed_stream(state, seed, index):
    """Key the stream `state` (uint64 [STATE_WORDS]) as `sample_rng(seed, index)`, before its first draw."""
    state[_KEY0], state[_KEY1], state[_CTR] = seed, index, _ZERO
    state[_POS], state[_HAS32], state[_HALF] = np.uint64(4), _ZERO, _ZERO


@numba.njit(nogil=True)
def _next64(state):
    if state[_POS] >= np.uint64(4):
        _refill(state)
    value = state[_BUF + int(state[_POS])]
    state[_POS] += _ONE
    return value


@numba.njit(nogil=True)
def next_word32(state):
    """The stream's next 32-bit word (numpy's next_uint32, its half-word buffer included), as uint64."""
    if state[_HAS32]:
        state[_HAS32] = _ZERO
        return state[_HALF]
    value = _next64(state)
    state[_HAS32], state[_HALF] = _ONE, value >> _S32
    return value & _LOW32


@numba.njit(nogil=True)
def _double(state):
    return float(_next64(state) >> _S11) * _DOUBLE_UNIT


@numba.njit(nogil=True)
def _below(state, high):
    """Generator.integers(0, high) for 0 < high <= 2**32 (int64 draws: Lemire's method on 32-bit halves)."""
    rng = np.uint64(high - 1)
    if rng == _ZERO:
        return 0
    if rng == _LOW32:
        return int(next_word32(state))
    excl = rng + _ONE
    m = next_word32(state) * excl
    leftover = m & _LOW32
    if leftover < excl:
        threshold = (_LOW32 - rng) % excl
        while leftover < threshold:
            m = next_word32(state) * excl
            leftover = m & _LOW32
    return int(m >> _S32)


@numba.njit(nogil=True, cache=True)
def _doubles(seed, first, count, per_sample, out):
    state = np.zeros(_STATE, np.uint64)
    for i in range(count):
        seed_stream(state, np.uint64(seed), np.uint64(first + i))
        for j in range(per_sample):
            out[i, j] = _double(state)


def batch_doubles(seed: int, first: int, count: int, per_sample: int) -> np.ndarray:
    """(count, per_sample) float64: the first `per_sample` `rng.random()` draws of samples first..first+count-1."""
    out = np.empty((count, per_sample), np.float64)
    _doubles(seed, first, count, per_sample, out)
    return out


@numba.njit(nogil=True, cache=True)
def _windows(heights, widths, seed, first, area_lo, area_hi, log_lo, log_hi, aspect_lo, aspect_hi, attempts, out):
    state = np.zeros(_STATE, np.uint64)
    area_range, log_range = area_hi - area_lo, log_hi - log_lo
    for i in range(heights.shape[0]):
        seed_stream(state, np.uint64(seed), np.uint64(first + i))
        height, width = heights[i], widths[i]
        total = float(height * width)
        found = False
        for _ in range(attempts):
            target = total * (area_lo + area_range * _double(state))
            ratio = math.exp(log_lo + log_range * _double(state))
            w = int(math.floor(math.sqrt(target * ratio) + 0.5))
            h = int(math.floor(math.sqrt(target / ratio) + 0.5))
            if 0 < w <= width and 0 < h <= height:
                out[i, 0] = _below(state, height - h + 1)
                out[i, 1] = _below(state, width - w + 1)
                out[i, 2], out[i, 3] = h, w
                found = True
                break
        if found:
            continue
        ratio = width / height
        if ratio < aspect_lo:
            w, h = width, min(height, max(1, int(math.floor(width / aspect_lo + 0.5))))
        elif ratio > aspect_hi:
            h, w = height, min(width, max(1, int(math.floor(height * aspect_hi + 0.5))))
        else:
            h, w = height, width
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = (height - h) // 2, (width - w) // 2, h, w


def batch_crop_windows(heights, widths, area: list[float], aspect: list[float], attempts: int, seed: int,
                       first: int) -> np.ndarray:
    """(n, 4) int64 windows (y, x, h, w): `windows.random_crop_window` of sample first + i, drawn from
    `sample_rng(seed, first + i)`, for every sample of a batch in one call."""
    heights = np.ascontiguousarray(heights, np.int64)
    widths = np.ascontiguousarray(widths, np.int64)
    if np.any(heights <= 0) or np.any(widths <= 0) or np.any(heights * widths >= 2**53) or \
            np.any(np.maximum(heights, widths) > 2**32):
        raise ValueError("image sizes must be positive and below 2**32 per side for batched crop windows")
    out = np.empty((len(heights), 4), np.int64)
    _windows(heights, widths, seed, first, float(area[0]), float(area[-1]), math.log(aspect[0]),
             math.log(aspect[-1]), float(aspect[0]), float(aspect[-1]), max(int(attempts), 0), out)
    return out
