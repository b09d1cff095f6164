"""`copy` in the GPU stage: `.gpu()` uploads, `.cpu()` downloads (after the stream has computed the data), and GPU
to GPU copies."""

from __future__ import annotations

import numpy as np

from headrace_kernels.registry import gpu_kernel


@gpu_kernel("copy")
class CopyKernel:
    """A copy to the node's device: host arrays for device 'cpu', device arrays otherwise."""

    transfer = True
    """It moves data between devices: the GPU stage runs it for a node on the CPU too (a `.cpu()`)."""

    def __init__(self, setup):
        self.to_host = setup.device == "cpu"

    def plan(self, batch):
        """The upload of a host batch, made ahead in the look-ahead (with the next batch's CPU stage), so that the
        GPU stage's thread only hands it on; None for anything else."""
        if self.to_host or not batch.has_value(0) or hasattr(batch.value(0), "as_cpu"):
            return None
        return batch.input(0)

    def run(self, batch):
        value = batch.value(0)
        on_gpu = hasattr(value, "as_cpu")
        if self.to_host:
            return list(value.as_cpu()) if on_gpu else [np.asarray(v) for v in value]
        if on_gpu:
            return (value.dense.copy(), None) if value.dense is not None else [s.copy() for s in value.samples()]
        uploaded = batch.planned if batch.planned is not None else batch.input(0)  # fresh: nothing to copy again
        if uploaded.dense is not None:
            return uploaded.dense, None
        return None, uploaded.packed if uploaded.packed is not None else uploaded.samples(raw=True)
