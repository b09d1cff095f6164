"""GPU zeros, ones, full and their `_like` forms: CuPy fills, one (N, ...) array when the samples share a shape; the
CPU kernels' checks, and DALI's conversion (kernels/cast.cu) where full_like changes the fill's type."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.creation_ops import broadcast_fill, output_shape
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.gpu.math_ops import cast_array
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _filled(value: int, dtype: np.dtype, shapes: list[tuple[int, ...]]):
    """`value` in every sample's shape: (dense, None) when the shapes agree, else (None, list)."""
    cp = cupy()
    if shapes and len(set(shapes)) == 1:
        return cp.full((len(shapes), *shapes[0]), value, dtype=dtype), None
    return None, [cp.full(shape, value, dtype=dtype) for shape in shapes]


@gpu_kernel("zeros", "ones")
class ZerosOrOnes:
    """zeros / ones of each sample's `shape`."""

    def __init__(self, setup):
        self.value = 1 if setup.op == "ones" else 0

    def run(self, batch):
        shapes = [per_sample(i, output_shape, args) for i, args in enumerate(batch.sample_args())]
        return _filled(self.value, numpy_dtype(batch.args["dtype"]), shapes)


@gpu_kernel("zeros_like", "ones_like")
class ZerosOrOnesLike:
    """zeros / ones in the input's shapes, of `dtype` or the input's type."""

    def __init__(self, setup):
        self.value = 1 if setup.op == "ones_like" else 0

    def run(self, batch):
        data = batch.input(0)
        samples = data.samples()
        dtype = batch.args.get("dtype")
        dtype = numpy_dtype(dtype) if dtype is not None else (np.dtype(samples[0].dtype) if samples else None)
        if data.dense is not None:
            return cupy().full(data.dense.shape, self.value, dtype=dtype), None
        return _filled(self.value, dtype, [tuple(s.shape) for s in samples])


def _broadcast(fill, shape: tuple[int, ...]):
    broadcast_fill(tuple(fill.shape), shape)
    return cupy().broadcast_to(fill, shape).copy()  # not ascontiguousarray: it makes a scalar 1-D


@gpu_kernel("full")
def full_kernel(batch):
    """Each sample's fill value broadcast to its `shape`."""
    out = []
    for i, (fill, args) in enumerate(zip(batch.samples(0), batch.sample_args(), strict=True)):
        out.append(per_sample(i, lambda f, a: _broadcast(f, output_shape(a)), fill, args))
    return None, out


@gpu_kernel("full_like")
def full_like_kernel(batch):
    """Each sample's fill value converted to the data's type and broadcast to its shape."""
    out = []
    for i, (data, fill) in enumerate(zip(batch.samples(0), batch.samples(1), strict=True)):
        converted = fill if fill.dtype == data.dtype else cast_array(fill, np.dtype(data.dtype))
        out.append(per_sample(i, _broadcast, converted, tuple(data.shape)))
    return None, out
