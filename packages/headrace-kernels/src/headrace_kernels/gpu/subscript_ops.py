"""GPU `_tensor_subscript` (DataNode indexing): the CPU kernel's index (checks and messages included) applied to each
device array (a view where contiguous, else one copy)."""

from __future__ import annotations

from headrace_kernels.cpu.subscript_ops import subscript_index
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _indexed(sample, args: dict):
    out = cupy().asarray(sample[subscript_index(tuple(sample.shape), args)])
    return out if out.flags.c_contiguous else out.copy()  # a C-ordered copy; a 0-d result stays 0-d


@gpu_kernel("_tensor_subscript")
def tensor_subscript_kernel(batch):
    """Each sample indexed on the device; per-sample indices come from sample_args()."""
    samples, args_list = batch.samples(), batch.sample_args()
    return [per_sample(i, _indexed, s, a) for i, (s, a) in enumerate(zip(samples, args_list, strict=True))]
