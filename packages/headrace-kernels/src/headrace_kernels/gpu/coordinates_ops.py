"""GPU coord_transform: the CPU kernel's matrix resolution per sample, then float32 M @ x + T with CuPy, rounded
half away from zero and clamped for integer outputs, as the CPU kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace_kernels.cpu.coordinates_ops import affine_parts, check_points, output_dtype
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def saturate_cast_gpu(values: Any, dtype: np.dtype) -> Any:
    """A float CuPy array converted to `dtype` as DALI's ConvertSat (cpu/convert.saturate_cast): round half away
    from zero, clamp, NaN to 0."""
    cp = cupy()
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype)
    values = values.astype(cp.float64)
    rounded = cp.where(values >= 0, cp.floor(values + 0.5), cp.ceil(values - 0.5))
    rounded = cp.nan_to_num(rounded, nan=0.0)
    info = np.iinfo(dtype)
    return cp.clip(rounded, float(info.min), float(info.max)).astype(dtype)


@gpu_kernel("coord_transform")
def coord_transform(batch):
    cp = cupy()
    out = []
    for i, (points, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True)):
        per_sample(i, check_points, points.shape, points.dtype)
        dtype = per_sample(i, output_dtype, args, np.dtype(points.dtype))
        matrix, shift = per_sample(i, affine_parts, args, points.shape[-1])
        flat = points.reshape(-1, points.shape[-1]).astype(cp.float32)
        result = flat @ cp.asarray(matrix.T, dtype=cp.float32) + cp.asarray(shift, dtype=cp.float32)
        out.append(saturate_cast_gpu(result.reshape((*points.shape[:-1], matrix.shape[0])), dtype))
    return None, out
