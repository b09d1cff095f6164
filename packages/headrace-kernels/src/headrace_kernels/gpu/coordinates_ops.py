"""GPU coord_transform over the whole batch at once: the CPU kernel's matrix resolution per sample (host), every
sample's vectors packed into one float32 [R, n] device array (gpu/ragged.py), float32 M @ x + T as one matrix product
(one matrix for the batch, or each row's own sample's, gathered from one uploaded table), rounded half away from zero
and clamped for integer outputs as the CPU kernel, and per-sample views of one output buffer. No per-sample launches
and no host synchronisation; a batch whose samples differ in vector length, output length or element type (rare)
runs sample by sample."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from headrace_kernels.cpu.coordinates_ops import affine_parts, check_points, output_dtype
from headrace_kernels.gpu import ragged
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


def _blocks(plans: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Each sample's float32 [n + 1, m] block: M transposed (as the CPU's matrix.T.astype(float32)), then T."""
    return np.stack([np.concatenate([matrix.T.astype(np.float32), shift.astype(np.float32)[None, :]])
                     for matrix, shift in plans])


def _device(host: np.ndarray) -> Any:
    """A host array on the current device and stream (CuPy 13 and later: through pinned memory, asynchronously)."""
    cp = cupy()
    host = np.ascontiguousarray(host)
    return cp.zeros(host.shape, dtype=host.dtype) if host.size == 0 else cp.asarray(host)


def _sample_by_sample(samples: list, plans: list, dtypes: list) -> tuple[None, list]:
    """The batch one sample at a time (samples of different vector lengths or element types)."""
    cp = cupy()
    out = []
    for points, (matrix, shift), dtype in zip(samples, plans, dtypes, strict=True):
        flat = points.reshape(-1, points.shape[-1]).astype(cp.float32)
        block = _device(_blocks([(matrix, shift)])[0])
        result = flat @ block[:-1] + block[-1]
        out.append(saturate_cast_gpu(result.reshape((*points.shape[:-1], matrix.shape[0])), dtype))
    return None, out


@gpu_kernel("coord_transform")
def coord_transform(batch):
    """out = M @ x + T over the innermost axis of every sample of the batch, in one matrix product."""
    cp = cupy()
    value = batch.value(0)
    dense = getattr(value, "dense", None)
    samples = None if dense is not None else batch.samples()
    if dense is not None:
        shapes, types = [tuple(dense.shape[1:])] * int(dense.shape[0]), [np.dtype(dense.dtype)] * int(dense.shape[0])
    else:
        shapes, types = [tuple(s.shape) for s in samples], [np.dtype(s.dtype) for s in samples]
    plans, dtypes = [], []
    for i, (shape, kind, args) in enumerate(zip(shapes, types, batch.sample_args(), strict=True)):
        per_sample(i, check_points, shape, kind)
        dtypes.append(per_sample(i, output_dtype, args, kind))
        plans.append(per_sample(i, affine_parts, args, shape[-1]))
    if not shapes:
        return None, []
    widths = {s[-1] for s in shapes}
    if len(widths) > 1 or len({p[0].shape[0] for p in plans}) > 1 or len(set(types)) > 1 or len(set(dtypes)) > 1:
        if samples is None:
            samples = list(dense)
        return _sample_by_sample(samples, plans, dtypes)
    n, m = widths.pop(), plans[0][0].shape[0]
    counts = [math.prod(s[:-1]) for s in shapes]
    rows = ragged.pack(cp, samples, n, dense=dense, dtype=np.float32)  # [R, n]
    blocks = _blocks(plans)  # [N, n + 1, m]
    if rows.shape[0] == 0:
        result = cp.zeros((0, m), dtype=cp.float32)
    elif all(np.array_equal(blocks[0], b, equal_nan=True) for b in blocks[1:]):  # one matrix for the batch
        block = _device(blocks[0])
        result = rows @ block[:n] + block[n]
    else:  # each row its sample's matrix
        per_row = _device(blocks)[_device(ragged.row_samples(counts))]  # [R, n + 1, m]
        result = cp.matmul(rows[:, None, :], per_row[:, :n, :])[:, 0, :] + per_row[:, n, :]
    out = saturate_cast_gpu(result, dtypes[0])
    return ragged.split(out, [(*s[:-1], m) for s in shapes])
