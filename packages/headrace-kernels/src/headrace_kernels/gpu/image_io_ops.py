"""GPU kernel of dump_image: the batch copied to the host and written as the CPU kernel writes it (same names, same
bytes); the output is the input itself."""

from __future__ import annotations

from headrace_kernels.cpu.image_io_ops import dump_images
from headrace_kernels.registry import gpu_kernel


@gpu_kernel("dump_image")
def dump_image_kernel(batch):
    """Copy every image to the host (on the pipeline's stream, waited for), write the files, pass the batch on."""
    first = batch.input(0)
    samples = first.samples()
    dump_images([s.get() for s in samples], batch.args["suffix"])
    if first.dense is not None:
        return first.dense, None
    return None, samples
