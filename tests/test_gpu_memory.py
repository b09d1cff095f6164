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
