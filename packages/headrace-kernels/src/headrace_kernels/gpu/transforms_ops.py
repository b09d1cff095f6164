"""GPU transforms.*: the matrices are a few floats per sample, so they are built on the host by the CPU kernels'
builders (input matrices copied down) and the batch is uploaded in one copy; the GPU gives the CPU's values."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.transforms_ops import BUILDERS, chained, combined
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.gpu.staging import upload_arrays
from headrace_kernels.registry import GpuBatch, KernelSetup, gpu_kernel


def host_inputs(batch: GpuBatch) -> list[list[np.ndarray]]:
    """Each sample's input matrices on the host (one list per sample; empty lists without inputs)."""
    cp = cupy()
    columns = [[cp.asnumpy(s) if not isinstance(s, np.ndarray) else s for s in batch.samples(k)]
               for k in range(batch.num_inputs())]
    return [[column[i] for column in columns] for i in range(batch.size)]


@gpu_kernel(*BUILDERS)
class Generator:
    """One node of a transforms.* generator: the CPU builder per sample, then one upload."""

    def __init__(self, setup: KernelSetup) -> None:
        self.op = setup.op

    def run(self, batch: GpuBatch) -> tuple:
        inputs = host_inputs(batch)
        return upload_arrays([per_sample(i, chained, self.op, inputs[i], args)
                               for i, args in enumerate(batch.sample_args())])


@gpu_kernel("transforms.combine")
def combine(batch):
    inputs = host_inputs(batch)
    return upload_arrays([per_sample(i, combined, inputs[i], args) for i, args in enumerate(batch.sample_args())])
