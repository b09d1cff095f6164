"""external_source(parallel=True): the source callable runs in worker processes (py_num_workers, py_start_method)
and its results come back through shared memory; outputs must equal the serial source's exactly (and DALI's CPU
build's where installed, marker dali), for per-sample and per-batch callables, several outputs and epochs."""

from __future__ import annotations

import os

import numpy as np
import pytest
from ops_support import HAS_DALI

from headrace import fn, pipeline_def
from headrace.errors import InputDataError, SchemaError
from headrace_kernels.worker_pool import WorkerPool


def per_sample(info):
    """A sample that says where it was asked for, and by which process; 12 samples an epoch."""
    if info.idx_in_epoch >= 12:
        raise StopIteration
    return (np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx], np.int32),
            np.full((info.idx_in_batch + 1, 2), os.getpid(), np.int64))


def per_batch(info):
    return [np.full((3,), info.iteration * 10 + i, np.float32) for i in range(4)]


def epochs(parallel: bool, workers: int = 2, method: str = "fork", count: int = 2, api=None):
    import headrace

    api = api or headrace

    @api.pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=workers, py_start_method=method)
    def pipe():
        info, pids = api.fn.external_source(per_sample, batch=False, num_outputs=2, parallel=parallel,
                                            prefetch_queue_depth=2)
        return info, pids

    p = pipe()
    p.build()
    infos, pids = [], set()
    for _ in range(count):
        try:
            while True:
                a, b = p.run()
                infos.append(np.stack([np.array(a.at(i)) for i in range(len(a))]))
                pids |= {int(np.array(b.at(i)).flat[0]) for i in range(len(b))}
        except StopIteration:
            p.reset()
    if hasattr(p, "close"):
        p.close()
    return infos, pids


def test_parallel_per_sample_source_equals_serial_and_runs_in_workers():
    serial, serial_pids = epochs(parallel=False)
    parallel, parallel_pids = epochs(parallel=True)
    assert len(serial) == len(parallel) == 6  # 3 batches an epoch, 2 epochs
    for x, y in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(x, y)
    assert serial_pids == {os.getpid()}
    assert os.getpid() not in parallel_pids and len(parallel_pids) == 2


@pytest.mark.dali
@pytest.mark.skipif(not HAS_DALI, reason="DALI is not installed")
def test_parallel_source_sees_what_dali_gives():
    from nvidia import dali

    ours, _ = epochs(parallel=True)
    theirs, _ = epochs(parallel=True, api=dali)
    assert len(ours) == len(theirs)
    for x, y in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(x, y)


def test_parallel_batch_source_with_batch_info():
    @pipeline_def(batch_size=4, num_threads=1, device_id=None, py_num_workers=2)
    def pipe(parallel):
        return fn.external_source(per_batch, batch=True, batch_info=True, parallel=parallel, prefetch_queue_depth=3)

    got = {}
    for parallel in (False, True):
        p = pipe(parallel)
        got[parallel] = [p.run()[0].as_array() for _ in range(5)]
        p.close()
    for x, y in zip(got[False], got[True], strict=True):
        np.testing.assert_array_equal(x, y)
    assert got[True][4][0, 0] == 40


def test_spawned_workers_take_a_picklable_source():
    serial, _ = epochs(parallel=False, count=1)
    spawned, pids = epochs(parallel=True, workers=1, method="spawn", count=1)
    for x, y in zip(serial, spawned, strict=True):
        np.testing.assert_array_equal(x, y)
    assert len(pids) == 1 and os.getpid() not in pids


def failing(info):
    raise ValueError(f"bad sample {info.idx_in_batch}")


def test_an_error_in_a_worker_names_the_source_and_carries_the_traceback():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, py_num_workers=1)
    def pipe():
        return fn.external_source(failing, batch=False, parallel=True)

    p = pipe()
    with pytest.raises(InputDataError, match="external_source .*ValueError: bad sample 0") as info:
        p.run()
    assert "Traceback" in str(info.value)
    p.close()


def test_parallel_refuses_an_iterable():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source([[np.zeros(1)] * 2], parallel=True)

    with pytest.raises(SchemaError, match="parallel=True takes a callable"):
        pipe().build()


def shared_blocks() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith("psm_")} if os.path.isdir("/dev/shm") else set()


def test_worker_pool_frees_every_block():
    before = shared_blocks()
    pool = WorkerPool([lambda n: np.arange(n), lambda n: (np.zeros(n), np.ones((n, 2), np.uint8))], 2)
    try:
        first = pool.submit(0, 0, [(3,), (0,)])
        second = pool.submit(1, 1, [(2,)])
        unread = pool.submit(0, 0, [(5,)])
        a, b = pool.result(first)
        np.testing.assert_array_equal(a, np.arange(3))
        assert b.shape == (0,)
        (pair,) = pool.result(second)
        assert pair[1].shape == (2, 2) and pair[1].dtype == np.uint8
    finally:
        pool.close()  # the unread task's block is freed here
    assert unread == 2
    assert not shared_blocks() - before
