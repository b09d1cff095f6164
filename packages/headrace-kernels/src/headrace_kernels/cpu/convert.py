"""Element type conversion with DALI's rules: float to integer rounds half away from zero and saturates (NaN
gives 0), integer to integer saturates, to bool is `!= 0` (after rounding a float)."""

from __future__ import annotations

import numpy as np


def round_half_away(values: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (C's round), in float64."""
    v = np.asarray(values, dtype=np.float64)
    return np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5))


def saturate_cast(values: np.ndarray, dtype) -> np.ndarray:
    """`values` converted to `dtype` as DALI's ConvertSat does."""
    dtype, values = np.dtype(dtype), np.asarray(values)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # beyond float16's range is inf, as in C
            return values.astype(dtype)
    if dtype.kind == "b":
        return (round_half_away(values) if values.dtype.kind == "f" else values) != 0
    info = np.iinfo(dtype)
    if values.dtype.kind in "iub":
        if values.dtype.kind == "b":
            return values.astype(dtype)
        source = np.iinfo(values.dtype)
        return np.clip(values, max(info.min, source.min), min(info.max, source.max)).astype(dtype)
    rounded = np.nan_to_num(round_half_away(values), nan=0.0, posinf=np.inf, neginf=-np.inf)
    clipped = np.clip(rounded, float(info.min), float(info.max))
    too_big = clipped >= float(info.max)  # float(max) of 32/64-bit types rounds up past max
    out = np.where(too_big, 0.0, clipped).astype(dtype)
    out[too_big] = info.max
    return out
