"""`_conditional.merge` on GPU data (`if` on data): each sample from the branch it took, CPU values uploaded."""

from __future__ import annotations

from headrace_kernels.cpu.conditional_ops import as_predicate
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


@gpu_kernel("_conditional.merge")
def merge_kernel(batch):
    cp = cupy()
    if_true, if_false, condition = (batch.value(k) for k in range(3))
    picked = []
    for i in range(batch.size):
        value = (if_true if as_predicate(condition[i]) else if_false)[i]
        if value is None:
            raise ValueError(f"sample {i} has no value in the branch it took")
        picked.append(value if isinstance(value, cp.ndarray) else cp.asarray(value))
    if picked and all(p.shape == picked[0].shape and p.dtype == picked[0].dtype for p in picked):
        return cp.stack(picked), None
    return picked
