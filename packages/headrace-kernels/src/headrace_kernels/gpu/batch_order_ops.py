"""GPU permute_batch (one gather when the batch is dense) and batch_permutation (the CPU kernel's draw from the same
random stream, uploaded), so GPU and CPU pipelines reorder a batch alike."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.batch_order_ops import draw_permutation, sample_indices
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import SampleFailureError, gpu_kernel


@gpu_kernel("permute_batch")
def permute_batch_kernel(batch):
    """Each output sample a copy of the input sample its index names."""
    try:
        order = sample_indices(batch.sample_args())
    except ValueError as exc:
        raise SampleFailureError(0, str(exc)) from None
    first = batch.input(0)
    if first.dense is not None:
        return first.dense[cupy().asarray(np.array(order, np.int64))], None
    samples = first.samples()
    return None, [samples[index].copy() for index in order]


@gpu_kernel("batch_permutation")
def batch_permutation_kernel(batch):
    """The CPU kernel's indices (drawn from sample 0's stream), as a dense batch of int32 scalars."""
    args = batch.args
    order = draw_permutation(batch.size, args["allow_repetitions"], args["no_fixed_points"], batch.rng(0)) \
        if batch.size else []
    return cupy().asarray(np.array(order, np.int32)), None
