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

    def run(self, batch):
        value = batch.value(0)
        on_gpu = hasattr(value, "as_cpu")
        if self.to_host:
            return list(value.as_cpu()) if on_gpu else [np.asarray(v) for v in value]
        if on_gpu:
            return (value.dense.copy(), None) if value.dense is not None else [s.copy() for s in value.samples()]
        uploaded = batch.input(0)  # a fresh upload: nothing to copy again
        if uploaded.dense is not None:
            return uploaded.dense, None
        return None, uploaded.packed if uploaded.packed is not None else uploaded.samples(raw=True)
