"""GPU resize_crop_mirror: the CPU kernel on host copies of the samples, the batch uploaded in one copy. Correct by
construction (the CPU's numbers bit for bit) but bound by the copies: a device resampler of a source region, as the
fused crop_mirror_normalize has, is the faster path still to come."""

from __future__ import annotations

from headrace_kernels.cpu.resize_crop_mirror_ops import resize_crop_mirror
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.gpu.staging import upload_arrays
from headrace_kernels.registry import gpu_kernel


@gpu_kernel("resize_crop_mirror", "fast_resize_crop_mirror")
def resize_crop_mirror_kernel(batch):
    cp = cupy()
    images = batch.samples()
    return upload_arrays([per_sample(i, resize_crop_mirror, [cp.asnumpy(images[i])], args, None)
                           for i, args in enumerate(batch.sample_args())])
