"""The pipeline's GPU memory (headrace_kernels/gpu/memory.py): its size classes (CPU) and its three pools, their
reuse across variable batches and their bound (GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from headrace_kernels.gpu.memory import BATCH_STEP, SMALL_BYTES, batch_size_class, large_size


def test_large_sizes_round_up_by_at_most_an_eighth_to_few_classes():
    sizes = np.unique(np.random.default_rng(0).integers(SMALL_BYTES + 1, 1 << 30, 5000))
    rounded = np.array([large_size(int(s)) for s in sizes])
    assert (rounded >= sizes).all() and (rounded <= sizes * 1.125).all()
    for low in (1 << 21, 1 << 25):  # each power of two holds 8 classes
        inside = rounded[(rounded > low) & (rounded <= 2 * low)]
        assert set(inside.tolist()) <= {low + k * low // 8 for k in range(1, 9)}
    assert large_size(1000) == 1000 and large_size(SMALL_BYTES) == SMALL_BYTES


def test_batch_sizes_are_8_mib_steps():
    assert batch_size_class(1) == BATCH_STEP == 8 << 20
    assert batch_size_class(BATCH_STEP) == BATCH_STEP and batch_size_class(BATCH_STEP + 1) == 2 * BATCH_STEP


@pytest.mark.gpu
def test_small_and_large_requests_use_their_own_pools():
    import cupy as cp

    from headrace_kernels.gpu.runtime import GpuContext

    ctx = GpuContext(0)
    with ctx.active():
        small = cp.zeros(1000, np.uint8)
        large = cp.zeros(3 << 20, np.uint8)
        odd = cp.zeros((3 << 20) + 1, np.uint8)
    memory = ctx.memory
    assert memory.small.used_bytes() == 1024  # CuPy's 512-byte rounding
    assert memory.large.used_bytes() == (3 << 20) + large_size((3 << 20) + 1)
    assert not memory.per_batch and ctx.used_bytes == memory.small.used_bytes() + memory.large.used_bytes()
    del small, large, odd
    ctx.release()
    assert ctx.held_bytes == 0


@pytest.mark.gpu
def test_batch_allocations_of_varying_size_reuse_their_blocks():
    import cupy as cp

    from headrace_kernels.gpu.memory import batch_allocation
    from headrace_kernels.gpu.runtime import GpuContext

    ctx = GpuContext(0)
    sizes = np.random.default_rng(1).integers(20 << 20, 30 << 20, 200).tolist()
    held = []
    with ctx.active():
        in_flight = []
        for size in sizes:
            in_flight.append((batch_allocation(size, "decoded"), batch_allocation(size * 2, "rows")))
            tables = cp.zeros(int(size) % 5000 + 100, np.uint8)  # small, varying requests between the batches
            if len(in_flight) > 3:  # three batches in flight, as with the look-ahead
                in_flight.pop(0)
            held.append(ctx.held_bytes)
            del tables
    decoded, rows = ctx.memory.per_batch["decoded"], ctx.memory.per_batch["rows"]
    assert decoded.block_bytes == batch_size_class(max(sizes))  # one block size: the largest batch so far
    assert rows.block_bytes == batch_size_class(2 * max(sizes))
    for entry in (decoded, rows):  # the blocks in flight, in the last size; smaller ones went back to the device
        assert not entry.retired and entry.pool.total_bytes() <= 4 * entry.block_bytes
    assert held[-1] == held[len(held) // 2]  # flat once the size has settled
    in_flight.clear()
    ctx.release()
    assert ctx.held_bytes == 0


@pytest.mark.gpu
def test_stream_scratch_is_one_block_per_purpose_that_grows_and_is_released():
    from headrace_kernels.gpu.memory import stream_scratch
    from headrace_kernels.gpu.runtime import GpuContext

    ctx = GpuContext(0)
    with ctx.active():
        first = stream_scratch(20 << 20, "rows")
        assert stream_scratch(10 << 20, "rows").ptr == first.ptr  # every batch shares it
        assert stream_scratch(5 << 20, "other").ptr != first.ptr
        grown = stream_scratch(30 << 20, "rows")
        assert grown.mem.size == batch_size_class(30 << 20) and stream_scratch(1, "rows").ptr == grown.ptr
        held = ctx.held_bytes
        del first
        stream_scratch(1, "rows")  # the next request drains what came back
        assert ctx.held_bytes == held - batch_size_class(20 << 20)  # the outgrown block went back to the device
    del grown
    ctx.release()
    assert ctx.held_bytes == 0


@pytest.mark.gpu
def test_a_resize_pipeline_keeps_one_rows_block_over_batches():
    from headrace import fn, pipeline_def, types

    images = [np.random.default_rng(i).integers(0, 255, (300 + 7 * i, 400 - 5 * i, 3), np.uint8) for i in range(8)]

    @pipeline_def(batch_size=8, num_threads=2, device_id=0, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, dtype=types.UINT8, layout="HWC")
        return fn.resize(data.gpu(), resize_x=123, resize_y=97)

    p = pipe()
    p.build()
    for _ in range(6):
        (out,) = p.run()
        assert out.as_cpu().as_array().shape == (8, 97, 123, 3)
    memory = p._executor.gpu.ctx.memory
    assert list(memory.scratch) == ["resize rows"]
    assert memory.per_batch["resize rows"].pool.total_bytes() == memory.scratch["resize rows"].mem.size
    p.close()


@pytest.mark.gpu
def test_closing_a_pipeline_gives_its_memory_back_to_the_device():
    import cupy as cp

    from headrace import fn, pipeline_def, types

    images = [np.full((480, 640, 3), i, np.uint8) for i in range(16)]

    @pipeline_def(batch_size=16, num_threads=2, device_id=0, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, dtype=types.UINT8, layout="HWC")
        return fn.resize(data.gpu(), resize_x=300, resize_y=200)

    def run_and_close() -> None:
        p = pipe()
        p.build()
        for _ in range(4):
            p.run()
        p.close()

    run_and_close()  # the kernels' modules load once per process
    free_before = cp.cuda.runtime.memGetInfo()[0]
    run_and_close()
    assert cp.cuda.runtime.memGetInfo()[0] >= free_before - (2 << 20)


@pytest.mark.gpu
def test_the_limit_bounds_all_pools_together():
    import cupy as cp

    from headrace_kernels.gpu.memory import batch_allocation
    from headrace_kernels.gpu.runtime import GpuContext

    ctx = GpuContext(0, limit_bytes=64 << 20)
    with ctx.active():
        kept = batch_allocation(40 << 20, "decoded")  # a 40 MiB batch block
        with pytest.raises(cp.cuda.memory.OutOfMemoryError):
            cp.zeros(30 << 20, np.uint8)
        assert ctx.held_bytes <= 64 << 20
        fits = cp.zeros(20 << 20, np.uint8)  # what remains can still be used
        del kept
        more = cp.zeros(40 << 20, np.uint8)  # the free batch block is returned to make room
    assert ctx.held_bytes <= 64 << 20
    del fits, more


@pytest.mark.gpu
def test_a_context_entered_inside_its_own_block_keeps_it_and_the_outer_one_comes_back():
    import cupy as cp

    from headrace_kernels.gpu.runtime import GpuContext

    first, second = GpuContext(0), GpuContext(0)
    outside = cp.cuda.get_current_stream().ptr
    with first.active():
        assert cp.cuda.get_current_stream().ptr == first.stream.ptr
        with first.active():
            assert cp.cuda.get_current_stream().ptr == first.stream.ptr
            small = cp.zeros(10, np.uint8)
        with second.active():
            assert cp.cuda.get_current_stream().ptr == second.stream.ptr
            with first.active():
                assert cp.cuda.get_current_stream().ptr == first.stream.ptr
            assert cp.cuda.get_current_stream().ptr == second.stream.ptr
        assert cp.cuda.get_current_stream().ptr == first.stream.ptr
    assert cp.cuda.get_current_stream().ptr == outside
    assert first.memory.small.used_bytes() == 512  # the nested block allocated from the context's pool
    del small


@pytest.mark.gpu
def test_kernel_functions_are_looked_up_once_per_device():
    from headrace_kernels.gpu import image_ops

    name = "image_store<unsigned char, float>"
    assert image_ops._kernel(name) is image_ops._kernel(name)


@pytest.mark.gpu
def test_a_batch_block_comes_back_with_the_event_of_its_last_readers_only():
    """A decode lane writes a reused block on its own stream: it must wait for the readers queued on the pipeline's
    stream before the block's last view went, and for nothing queued after (the next batch's steps)."""
    import cupy as cp

    from headrace_kernels.gpu.memory import batch_block
    from headrace_kernels.gpu.runtime import GpuContext

    spin = cp.RawKernel(r'''extern "C" __global__ void spin(long long cycles) {
        long long start = clock64(); while (clock64() - start < cycles) {} }''', "spin")
    cycles = 1_000_000_000  # about 0.5 s at 2 GHz
    ctx = GpuContext(0)
    lane = cp.cuda.Stream(non_blocking=True)
    warm = cp.zeros(8, cp.uint8)  # the kernels below compiled first: a compile would outlast the spin
    warm.fill(1)
    spin((1,), (1,), (np.int64(1),))
    int(warm.copy().sum())
    with ctx.active():
        first = batch_block(8 << 20, "decoded")
        pixels = cp.ndarray((8 << 20,), cp.uint8, first.memory)
        pixels.fill(7)
        spin((1,), (1,), (np.int64(cycles),))  # a slow reader of the block on the pipeline's stream ...
        copy = pixels.copy()  # ... that ends with a copy of it
        address = first.memory.ptr
        del pixels, first  # the last view goes while both are still queued
        spin((1,), (1,), (np.int64(4 * cycles),))  # the next batch's steps, queued after
        second = batch_block(8 << 20, "decoded")
        assert second.memory.ptr == address  # the same block again ...
        assert not second.ready.done  # ... ready once the reader has run ...
        with lane:
            lane.wait_event(second.ready)
            cp.ndarray((8 << 20,), cp.uint8, second.memory).fill(9)  # a lane's decode writing it
        second.ready.synchronize()
        assert not ctx.stream.done  # ... which is before the later work has
        assert int(copy.sum()) == 7 * (8 << 20)  # the reader saw the old values, not the lane's
        lane.synchronize()
    ctx.stream.synchronize()
    del second, copy
    ctx.release()
    assert ctx.held_bytes == 0


@pytest.mark.gpu
def test_a_batch_block_collected_in_one_cycle_with_its_pipeline_memory_goes_quietly():
    import gc

    from headrace_kernels.gpu.memory import batch_block
    from headrace_kernels.gpu.runtime import GpuContext

    for order in range(4):  # the collector finalizes a cycle's objects in any order
        ctx = GpuContext(0)
        with ctx.active():
            block = batch_block(8 << 20, "decoded")
        cycle: list = [block, ctx] if order % 2 else [ctx, block]
        cycle.append(cycle)
        del ctx, block, cycle
        assert gc.collect() > 0  # no event recorded on a destroyed stream (a crash, not an exception)


@pytest.mark.gpu
def test_a_block_of_a_smaller_size_is_never_handed_out_after_the_size_rose():
    import cupy as cp

    from headrace_kernels.gpu.memory import batch_block
    from headrace_kernels.gpu.runtime import GpuContext

    ctx = GpuContext(0)
    with ctx.active():
        small = batch_block(8 << 20, "decoded")
        entry = ctx.memory.per_batch["decoded"]
        old_pool = entry.pool
        big = batch_block(16 << 20, "decoded")  # the size rises while the small block is held
        del small  # its pool is retired: it does not come back to the free list
        # a small block freed by another thread between the rise's clearing and its new pool
        stale = old_pool.malloc(8 << 20)
        entry.free.append((stale, cp.cuda.get_current_stream().record(), old_pool))
        stale_address = stale.ptr
        del stale
        again = batch_block(9 << 20, "decoded")
        assert again.memory.ptr not in (stale_address, big.memory.ptr) and not entry.free
    del big, again
    ctx.release()
    assert ctx.held_bytes == 0
