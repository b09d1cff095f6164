"""GPU tensor_resize and experimental.tensor_resize: the CPU kernel's plan and filter taps per sample (host), the
same float32 sums of one separable pass per resized axis in CuPy, and cast.cu's saturating conversion."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.tensor_resize_ops import resample_axis, sample_taps, with_axes
from headrace_kernels.gpu.math_ops import cast_array
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _resized(sample, args: dict, layout: str):
    cp = cupy()
    dtype, passes = sample_taps(tuple(int(d) for d in sample.shape), np.dtype(sample.dtype), with_axes(args, layout))
    out = sample.astype(cp.float32)
    for axis, taps in passes:
        out = resample_axis(out, axis, taps, cp)
    return out if dtype == np.float32 else cast_array(out, dtype)


@gpu_kernel("tensor_resize", "experimental.tensor_resize")
def tensor_resize_kernel(batch):
    """Each sample resized on its own (samples differ in shape and plan)."""
    layout = batch.input_layouts[0] if batch.input_layouts else ""
    return [per_sample(i, _resized, s, a, layout) for i, (s, a) in enumerate(zip(batch.samples(),
                                                                                 batch.sample_args(), strict=True))]
