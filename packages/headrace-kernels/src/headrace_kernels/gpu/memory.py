"""A pipeline's GPU memory: CuPy pools that each hold one kind of block, so that what one batch frees the next one
reuses whole, and the pool stops growing after the first epochs.

A single CuPy pool serves a request from the smallest free block that fits and splits it. With small tables, fixed
outputs and one decoder allocation per batch whose size changes with the random crops, small requests split the
large free blocks and the next batch's allocation no longer fits, so the pool keeps growing. Here:
- small requests (< 1 MiB: records, small tables, labels) have their own pool, as in PyTorch's caching allocator,
  so they never split a large block;
- large requests are rounded up to one of 8 sizes per power of two (at most 12.5% more), so a freed block fits
  the next request of about its size;
- what is made once per batch in a size that follows the random crops (the decoder's outputs, the resize's
  intermediate rows) comes from a pool per purpose in one size, the largest so far in 8 MiB steps: every freed
  block fits the next batch, and when a larger batch raises the size the smaller blocks are returned to the
  device as they come back;
- scratch that only the pipeline's own kernels touch, between two launches of one step (the resize's vertical pass
  writes rows that its store pass reads), is one block per purpose shared by every batch (`stream_scratch`): all
  launches go to the pipeline's one stream, so batch i+1's passes start after batch i's have finished with it;
  it has a pool of its own, as the per-batch blocks, so an outgrown block goes back to the device.
(benchmarks/HISTORY.md has what a single pool and these pools held over 100 epochs.)"""

from __future__ import annotations

import contextlib
import threading

from headrace_kernels.gpu.cupy_module import cupy

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


class _PerBatch:
    """A pool whose blocks all have one size: the largest request of its purpose so far. When the size rises, the
    pool is retired and a new one started; a retired pool returns each block to the device as it comes back."""

    def __init__(self):
        self.pool = cupy().cuda.MemoryPool()
        self.block_bytes = 0
        self.retired: list = []

    def pools(self) -> list:
        return [self.pool, *self.retired]

    def raise_to(self, size: int) -> None:
        self.block_bytes = size
        self.pool.free_all_blocks()
        if self.pool.used_bytes():
            self.retired.append(self.pool)
        self.pool = cupy().cuda.MemoryPool()

    def drain(self) -> None:
        """Free what has come back to the retired pools; drop those that hold nothing any more."""
        for pool in self.retired:
            pool.free_all_blocks()
        self.retired = [pool for pool in self.retired if pool.total_bytes()]


class PipelineMemory:
    """The CuPy allocator of one pipeline (`malloc`), and `batch_allocation` for what each batch makes once in a
    size that varies (decoder outputs, resize intermediates). `limit_bytes` (0: none) bounds what all its pools
    hold together."""

    def __init__(self, limit_bytes: int = 0):
        cp = cupy()
        self.small, self.large = cp.cuda.MemoryPool(), cp.cuda.MemoryPool()
        self.per_batch: dict[str, _PerBatch] = {}
        self.scratch: dict[str, object] = {}
        self.limit = limit_bytes
        self._lock = threading.Lock()

    @property
    def pools(self) -> tuple:
        return (self.small, self.large, *(pool for entry in list(self.per_batch.values()) for pool in entry.pools()))

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

    def batch_allocation(self, size: int, purpose: str):
        """A block for this batch's `purpose`, in the size of the largest so far (8 MiB steps)."""
        with self._lock:
            entry = self.per_batch.get(purpose)
            if entry is None:
                entry = self.per_batch[purpose] = _PerBatch()
            if entry.retired:
                entry.drain()
            wanted = batch_size_class(size)
            if wanted > entry.block_bytes:
                entry.raise_to(wanted)  # smaller blocks would never fit again
            size, pool = entry.block_bytes, entry.pool
        return self._bounded(pool, size)

    def stream_scratch(self, size: int, purpose: str):
        """The one scratch block of `purpose`, at least `size` bytes, shared by every batch. Only for memory that
        kernels on the pipeline's stream write and read, never the host or another stream: stream order keeps one
        batch's use after the last one's. A larger request replaces the block (the old one goes back to the device
        once the batches holding it are done)."""
        with self._lock:
            entry = self.per_batch.get(purpose)
            if entry is None:
                entry = self.per_batch[purpose] = _PerBatch()
            if entry.retired:  # an outgrown block that the batches have finished with
                entry.drain()
            block = self.scratch.get(purpose)
            if block is not None and block.mem.size >= size:
                return block
            del block
            self.scratch.pop(purpose, None)
            entry.raise_to(batch_size_class(size))  # the outgrown block goes back to the device once unused
            block = self.scratch[purpose] = self._bounded(entry.pool, entry.block_bytes)
            return block

    def release_scratch(self) -> None:
        """Drop the scratch blocks (they go back to the device with free_all_blocks once no batch holds them)."""
        with self._lock:
            self.scratch.clear()
            for entry in self.per_batch.values():
                entry.drain()

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


@contextlib.contextmanager
def using(memory: PipelineMemory):
    """Make `memory` the one `batch_allocation` takes from in this thread (GpuContext.active)."""
    previous = getattr(_local, "memory", None)
    _local.memory = memory
    try:
        yield memory
    finally:
        _local.memory = previous


def active_memory() -> PipelineMemory | None:
    """The memory of the pipeline context active in this thread (GpuContext.active), if any."""
    return getattr(_local, "memory", None)


def stream_scratch(size: int, purpose: str):
    """The active pipeline's shared scratch block of `purpose` (PipelineMemory.stream_scratch), else a fresh one."""
    memory = active_memory()
    return memory.stream_scratch(size, purpose) if memory is not None else cupy().cuda.alloc(size)


def batch_allocation(size: int, purpose: str):
    """A per-batch block for `purpose` from the active pipeline's memory, else from CuPy's current allocator."""
    memory = active_memory()
    return memory.batch_allocation(size, purpose) if memory is not None else cupy().cuda.alloc(size)
