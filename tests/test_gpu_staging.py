"""Uploads of host batches through pinned staging memory (headrace_kernels.gpu.staging, engine.gpu_batch.upload):
the samples arrive bit for bit, dense or ragged, and an upload queued behind GPU work does not wait for it."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(12)


def _cupy():
    from headrace_kernels.gpu.runtime import gpu_unavailable_reason

    reason = gpu_unavailable_reason(0)
    if reason is not None:
        pytest.skip(reason)
    import cupy

    return cupy


@pytest.mark.parametrize("ragged", [False, True])
def test_upload_is_bit_exact(ragged):
    cp = _cupy()
    from headrace.engine.gpu_batch import upload

    if ragged:  # odd sizes, mixed element types, a strided view: every sample lands at its own aligned offset
        batch = [RNG.standard_normal((3, 5)).astype(np.float32), RNG.integers(0, 9, (7,), dtype=np.int64),
                 np.zeros((0, 4), np.float32), RNG.integers(0, 255, (2, 3, 3), dtype=np.uint8), np.float64(2.5),
                 RNG.standard_normal((6, 8)).astype(np.float32)[::2, 1::3]]
    else:
        batch = [RNG.integers(0, 255, (4, 6, 3), dtype=np.uint8) for _ in range(5)]
    with cp.cuda.Stream(non_blocking=True) as stream:
        uploaded = upload(batch)
        stream.synchronize()
    assert (uploaded.dense is None) == ragged
    for got, want in zip(uploaded.samples(), batch, strict=True):
        host = cp.asnumpy(got)
        assert host.dtype == np.asarray(want).dtype and host.shape == np.shape(want)
        np.testing.assert_array_equal(host, want)


def test_upload_does_not_wait_for_the_stream():
    """An upload queued behind a long kernel returns while the kernel still runs (a pageable copy would wait)."""
    cp = _cupy()
    from headrace.engine.gpu_batch import upload

    spin = cp.RawKernel(r'''extern "C" __global__ void spin(long long cycles) {
        long long start = clock64(); while (clock64() - start < cycles) {} }''', "spin")
    batch = [RNG.standard_normal((n, 4)).astype(np.float32) for n in (1, 3, 2)]
    with cp.cuda.Stream(non_blocking=True) as stream:
        spin((1,), (1,), (np.int64(2_000_000_000),))  # about a second
        uploaded = upload(batch)
        still_running = not stream.done
        stream.synchronize()
    assert still_running
    for got, want in zip(uploaded.samples(), batch, strict=True):
        np.testing.assert_array_equal(cp.asnumpy(got), want)


@pytest.mark.parametrize("sizes", [(1, 3, 0, 2), (300, 1, 700)])  # small (back to back) and large (aligned) samples
def test_a_ragged_upload_of_one_type_is_one_buffer(sizes):
    cp = _cupy()
    from headrace.engine.gpu_batch import upload
    from headrace_kernels.gpu import ragged

    batch = [RNG.standard_normal((n, 4)).astype(np.float32) for n in sizes]
    with cp.cuda.Stream(non_blocking=True) as stream:
        uploaded = upload(batch)
        packed = uploaded.packed
        assert packed is not None and packed.shapes == [b.shape for b in batch]
        assert packed.back_to_back() == all(b.nbytes <= 4096 for b in batch)
        addresses = packed.addresses()
        for i, sample in enumerate(uploaded.samples()):
            assert sample.data.ptr == int(addresses[i]) or sample.size == 0
        rows = ragged.pack(cp, packed, 4)  # back to back: a view of the upload; else one copy
        host = uploaded.as_cpu()  # one copy of the buffer
        stream.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(rows), np.concatenate(batch))
    for got, want in zip(host, batch, strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_objects_are_refused():
    _cupy()
    from headrace.engine.gpu_batch import upload

    with pytest.raises(TypeError, match="Python objects"):
        upload([np.array(["a", None], dtype=object)])
