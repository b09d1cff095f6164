"""GPU decoders.inflate and experimental.inflate: a host round trip (the compressed bytes down, the CPU kernel's
zlib / lz4 inflate, the arrays up). DALI inflates LZ4 with nvCOMP on the GPU; headrace has no GPU decompressor yet."""

from __future__ import annotations

from headrace_kernels.cpu.inflate_ops import inflate_sample, sample_bytes
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _inflated(sample, args: dict):
    cp = cupy()
    return cp.asarray(inflate_sample(sample_bytes(cp.asnumpy(sample), "inflate"), args))


@gpu_kernel("decoders.inflate", "experimental.inflate")
def inflate_kernel(batch):
    """Each sample inflated on the host and uploaded."""
    return [per_sample(i, _inflated, s, a) for i, (s, a) in enumerate(zip(batch.samples(), batch.sample_args(),
                                                                          strict=True))]
