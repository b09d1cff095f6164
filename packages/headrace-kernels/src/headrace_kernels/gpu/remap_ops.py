"""GPU experimental.remap: the CPU kernel's sampling (remap_image) run on CuPy arrays, per sample (and frame)."""

from __future__ import annotations

from headrace_kernels.cpu.remap_ops import remap_sample
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


@gpu_kernel("experimental.remap")
def remap_kernel(batch):
    cp = cupy()
    images, mapx, mapy = batch.samples(0), batch.samples(1), batch.samples(2)
    args = batch.sample_args()
    layouts = tuple(batch.input_layouts or ())
    return None, [per_sample(i, remap_sample, cp, [images[i], mapx[i], mapy[i]], args[i], layouts)
                  for i in range(batch.size)]
