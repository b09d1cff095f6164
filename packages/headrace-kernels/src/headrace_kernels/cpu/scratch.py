"""Per-thread scratch arrays for the temporaries of CPU kernels, reused from sample to sample.

Fresh large allocations are not free: glibc serves them from new pages (or returns freed ones to the system), and
every first touch of a page faults; the faults of the executor's threads also contend on the process's memory map.
A kernel that takes its temporaries from here allocates nothing in the steady state.
"""

from __future__ import annotations

import math
import threading

import numpy as np

_local = threading.local()
_LARGEST_KEPT = 64 << 20  # bytes; larger temporaries are allocated for the call and dropped


def scratch(name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A C-contiguous array of `shape` and `dtype`, with undefined contents, owned by the calling thread under
    `name`. It stays valid until this thread asks for `name` again, so it must never leave the kernel (as an output,
    say)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > _LARGEST_KEPT:
        return np.empty(shape, dtype)
    buffers = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = {}
    buffer = buffers.get(name)
    if buffer is None or buffer.nbytes < nbytes:
        buffer = buffers[name] = np.empty(max(nbytes + nbytes // 4, 4096), np.uint8)  # room to grow a little
    return buffer[:nbytes].view(dtype).reshape(shape)
