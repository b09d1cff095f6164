"""GPU random.uniform, random.normal and random.coin_flip: each sample's draws are made on the host from its own
stream, by the CPU kernels' draw functions, and the batch is uploaded in one copy, so the GPU gives the CPU's numbers
bit for bit
(dither on GPU audio: `audio + fn.random.normal(audio) * 1e-5`). Only the shape-like input's shapes are read."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.random_ops import DRAWS, output_shape
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.staging import upload_arrays
from headrace_kernels.registry import gpu_kernel


def _like_shapes(batch) -> list[tuple[int, ...]] | None:
    """The shapes of the shape-like input's samples (none uploaded or copied), or None without an input."""
    if batch.num_inputs() == 0:
        return None
    value = batch.value(0)
    samples = value if isinstance(value, list | tuple) else value.samples()
    return [tuple(np.shape(s)) for s in samples]


@gpu_kernel("random.uniform", "random.normal", "random.coin_flip")
class HostDraws:
    """One node's draws: the CPU kernel's draw function per sample on its stream (batch.rng), then one upload."""

    def __init__(self, setup):
        self.draw = DRAWS[setup.op]

    def run(self, batch):
        like = _like_shapes(batch)
        host = []
        for i, args in enumerate(batch.sample_args()):
            shape = per_sample(i, output_shape, [like[i]] if like is not None else [], args)
            host.append(per_sample(i, self.draw, args, batch.rng(i), shape))
        return upload_arrays(host)
