"""GPU random.choice and random.beta: each sample's draws are made on the host from its own stream by the CPU
kernels' draw functions, and the batch is uploaded in one copy, so CPU and GPU give the same numbers. Only the
candidates input is read back from the GPU; of a shape-like input only the shapes are read."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.random_draws_ops import DRAWS
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.gpu.staging import upload_arrays
from headrace_kernels.registry import GpuBatch, KernelSetup, gpu_kernel


def host_inputs(batch, k: int, values: bool) -> list[np.ndarray]:
    """Input k's samples on the host: their values (read back from the GPU if they live there) or, without
    `values`, zero-copy stand-ins of their shapes."""
    value = batch.value(k)
    samples = value if isinstance(value, list | tuple) else value.samples()
    if not values:
        return [np.broadcast_to(np.zeros((), np.uint8), tuple(np.shape(s))) for s in samples]
    return [s if isinstance(s, np.ndarray) else cupy().asnumpy(s) for s in samples]


@gpu_kernel("random.choice", "random.beta")
class HostDraws:
    """One node's draws: the CPU kernel's draw function per sample on its stream (batch.rng), then one upload."""

    def __init__(self, setup: KernelSetup):
        self.draw = DRAWS[setup.op]
        self.reads_values = setup.op == "random.choice"  # its first input holds the candidates

    def run(self, batch: GpuBatch) -> tuple:
        inputs = [host_inputs(batch, k, self.reads_values and k == 0) for k in range(batch.num_inputs())]
        host = [per_sample(i, self.draw, [samples[i] for samples in inputs], args, batch.rng(i))
                for i, args in enumerate(batch.sample_args())]
        return upload_arrays(host)
