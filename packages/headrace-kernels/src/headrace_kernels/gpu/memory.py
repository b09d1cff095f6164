"""A pipeline's GPU memory: three CuPy pools with one kind of block each, so that what one batch frees the next one
reuses whole, and the pool stops growing after the first epochs.

A single CuPy pool serves a request from the smallest free block that fits and splits it. With small tables, fixed
outputs and one decoder allocation per batch whose size changes with the random crops, small requests split the
large free blocks and the next batch's allocation no longer fits: the pool grew by 60% over 40 epochs. Here:
- small requests (< 1 MiB: records, tap tables, labels) have their own pool, as in PyTorch's caching allocator,
  so they never split a large block;
- large requests are rounded up to one of 8 sizes per power of two (at most 12.5% more), so a freed block fits
  the next request of about its size;
- each batch's decoder outputs come from a third pool in one size, the largest batch so far in 8 MiB steps:
  every freed batch block fits the next batch, and when a larger batch raises the size the smaller free blocks are
  returned to the device."""

from __future__ import annotations

import threading

from headrace_kernels.gpu.runtime import cupy

SMALL_BYTES = 1 << 20
BATCH_STEP = 8 << 20
_local = threading.local()


def large_size(size: int) -> int:
    """`size` rounded up to one of 8 steps of its power of two: at most 12.5% more, few distinct sizes."""
    if size <= SMALL_BYTES:
        return size
    step = 1 << max(size.bit_length() - 4, 0)
    return -(-size // step) * step


def batch_size_class(size: int) -> int:
    """A batch allocation's size rounded up to the next 8 MiB."""
    return max(-(-size // BATCH_STEP), 1) * BATCH_STEP


class PipelineMemory:
    """The CuPy allocator of one pipeline (`malloc`), and `batch_allocation` for the decoder's per-batch outputs.
    `limit_bytes` (0: none) bounds what the three pools hold together."""

    def __init__(self, limit_bytes: int = 0):
        cp = cupy()
        self.small, self.large, self.batches = cp.cuda.MemoryPool(), cp.cuda.MemoryPool(), cp.cuda.MemoryPool()
        self.limit = limit_bytes
        self.batch_bytes = 0
        self._lock = threading.Lock()

    @property
    def pools(self) -> tuple:
        return self.small, self.large, self.batches

    def held_bytes(self) -> int:
        return sum(pool.total_bytes() for pool in self.pools)

    def used_bytes(self) -> int:
        return sum(pool.used_bytes() for pool in self.pools)

    def free_all_blocks(self) -> None:
        for pool in self.pools:
            pool.free_all_blocks()

    def malloc(self, size: int):
        """CuPy's allocator hook: small and large requests from their own pools."""
        if size < SMALL_BYTES:
            return self._bounded(self.small, size)
        return self._bounded(self.large, large_size(size))

    def batch_allocation(self, size: int):
        """One batch's decoder outputs: a block of the largest batch size so far (8 MiB steps)."""
        with self._lock:
            wanted = batch_size_class(size)
            if wanted > self.batch_bytes:
                self.batch_bytes = wanted
                self.batches.free_all_blocks()  # smaller free blocks would never fit again
            size = self.batch_bytes
        return self._bounded(self.batches, size)

    def _bounded(self, pool, size: int):
        if not self.limit:
            return pool.malloc(size)
        if self.held_bytes() + size > self.limit:
            self.free_all_blocks()  # cached free blocks go back first
        memory = pool.malloc(size)
        held = self.held_bytes()
        if held > self.limit:
            del memory
            pool.free_all_blocks()
            raise cupy().cuda.memory.OutOfMemoryError(size, held - size, self.limit)
        return memory


def active_memory() -> PipelineMemory | None:
    """The memory of the pipeline context active in this thread (GpuContext.active), if any."""
    return getattr(_local, "memory", None)


def batch_allocation(size: int):
    """A batch's output allocation from the active pipeline's batch pool, else from CuPy's current allocator."""
    memory = active_memory()
    return memory.batch_allocation(size) if memory is not None else cupy().cuda.alloc(size)
