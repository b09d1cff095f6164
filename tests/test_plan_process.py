"""The executor option plan_process: the fused resize + crop_mirror_normalize's host plan computed in a helper
process is the same records and tap tables as the one computed in the pipeline's process (SSD300's chain: flip,
resize, hsv, brightness_contrast, crop_mirror_normalize, every sample's own arguments); a batch the helper fails
on, or a helper that is gone, leaves the plan to the pipeline's process. No GPU is needed: the plan is host work
(tests/test_gpu_plan_process.py runs the pipeline on a GPU)."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from headrace_kernels.gpu.packing import sample_args
from headrace_kernels.gpu.plan_process import PlanProcess, adopt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "probes"))
from plan_process_probe import SSD_PARTS as PARTS
from plan_process_probe import SSD_SPEC as SPEC
from plan_process_probe import plan_at_home, ssd_run

N = 48


def _shapes(seed: int) -> np.ndarray:
    return ssd_run(N, seed)[0]


def _columns(seed: int) -> list[dict[str, list]]:
    return ssd_run(N, seed)[1]


def _assert_same_plan(got: tuple, want: tuple) -> None:
    assert got[1:] == want[1:]
    a, b = got[0], want[0]
    assert a.rec.dtype == b.rec.dtype and a.rec.tobytes() == b.rec.tobytes()
    assert (a.channels, a.in_dtype, a.dtype) == (b.channels, b.in_dtype, b.dtype)
    assert type(a.tables) is type(b.tables)
    for field in dataclasses.fields(b.tables):
        x, y = getattr(a.tables, field.name), getattr(b.tables, field.name)
        if dataclasses.is_dataclass(y):
            for inner in dataclasses.fields(y):
                np.testing.assert_array_equal(getattr(x, inner.name), getattr(y, inner.name))
        else:
            np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def helper():
    process = PlanProcess(SPEC)
    yield process
    process.close()


def test_the_helper_plans_the_same_records_and_tables(helper):
    addresses = np.arange(N, dtype=np.uint64) * np.uint64(1 << 20) + np.uint64(4096)
    for seed in (1, 2, 3):  # the same helper, batch after batch
        shapes, columns = _shapes(seed), _columns(seed)
        answer = helper.plan(shapes, columns, False)
        assert answer is not None
        _assert_same_plan(adopt([None] * N, addresses, answer), plan_at_home(shapes, columns, addresses))


def test_a_batch_the_helper_fails_on_is_left_to_the_pipeline(helper):
    shapes = _shapes(4)
    columns = _columns(4)
    columns[2]["hue"] = columns[2]["hue"][:-1]  # a column one value short: the helper's plan fails
    assert helper.plan(shapes, columns, False) is None
    assert helper.plan(_shapes(5), _columns(5), False) is not None  # and it goes on serving


def test_a_helper_that_is_gone_is_not_asked_again():
    process = PlanProcess(SPEC)
    pid = process.pid
    assert pid is not None and process.plan(_shapes(6), _columns(6), False) is not None
    process._process.kill()
    process._process.wait()
    with pytest.warns(RuntimeWarning, match=f"plan helper process \\(pid {pid}\\) is gone"):
        assert process.plan(_shapes(7), _columns(7), False) is None
    assert process.pid is None and process.plan(_shapes(7), _columns(7), False) is None
    process.close()


def test_sample_args_share_one_dict_without_argument_inputs():
    literal = PARTS[1]
    same = sample_args(literal, {}, 4)
    assert all(a is literal for a in same)
    before = dict(PARTS[0])
    own = sample_args(PARTS[0], {"horizontal": [0, 1]}, 2)
    assert [a["horizontal"] for a in own] == [0, 1] and own[0] is not own[1] and PARTS[0] == before


def test_a_helper_that_hangs_is_stopped_and_not_asked_again():
    process = PlanProcess(SPEC)
    assert process.plan(_shapes(8), _columns(8), False) is not None  # started, and its loops compiled
    process.answer_seconds = 0.5
    helper = process._process
    os.kill(helper.pid, signal.SIGSTOP)  # it takes the next request and never answers
    with pytest.warns(RuntimeWarning, match="did not answer within 0.5 s"):
        assert process.plan(_shapes(9), _columns(9), False) is None
    assert helper.wait(timeout=10) is not None and process.pid is None
    process.close()


def test_a_forked_copy_does_not_use_or_stop_its_parents_helper(helper):
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the copy: plans at home, and closing does not stop the parent's helper
        answer = helper.plan(_shapes(10), _columns(10), False)
        helper.close()
        os.write(write, b"1" if answer is None else b"0")
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    assert os.read(read, 1) == b"1"
    os.close(read)
    assert helper.pid is not None and helper.plan(_shapes(10), _columns(10), False) is not None


def test_no_interpreter_to_start_leaves_the_planning_at_home(monkeypatch):
    monkeypatch.setattr("sys.executable", "")
    with pytest.warns(RuntimeWarning, match="plan helper process could not start"):
        assert PlanProcess.start(SPEC) is None


class _DecodedRun:
    """What FusedResizeNormalize.plan reads of a batch fed by a decoder: the decoder's prepared records and each op's
    argument inputs (as GpuBatchView gives them)."""

    def __init__(self, shapes: np.ndarray, columns: list[dict[str, list]]):
        from types import SimpleNamespace

        self.columns, self.size, self.per_sample_args = columns, len(shapes), frozenset({"horizontal"})
        addresses = np.arange(self.size, dtype=np.uint64) * np.uint64(1 << 20)
        self._prepared = SimpleNamespace(images=[None] * self.size, addresses=addresses, shapes=shapes)

    def prepared(self, k: int = 0):
        return self._prepared

    def arg_columns(self, part: int = -1) -> dict[str, list]:
        return self.columns[part]

    def sample_args(self, part: int = -1) -> list[dict]:
        return sample_args(PARTS[part], self.columns[part], self.size)


def test_the_fused_kernel_plans_in_its_helper_once_started(monkeypatch):
    from headrace.engine.options import ExecutorOptions
    from headrace_kernels.gpu import fused_ops
    from headrace_kernels.registry import KernelSetup

    placed = []
    monkeypatch.setattr(fused_ops, "place", lambda *plan: placed.append(plan))  # placing needs the device
    setup = KernelSetup(op="crop_mirror_normalize", args=PARTS[-1], device="gpu", device_id=0, num_threads=1,
                        batch_size=N, seed=1, options=ExecutorOptions(), per_sample_args=frozenset({"horizontal"}),
                        parts=PARTS, chain=("flip", "resize", "hsv", "brightness_contrast", "crop_mirror_normalize"))
    at_home, helped = fused_ops.FusedResizeNormalize(setup), fused_ops.FusedResizeNormalize(setup)
    helped.start_plan_process()
    helped._plan = lambda *args: pytest.fail("planned in the pipeline's process, not in the helper")
    assert at_home.helper is None and helped.helper is not None and helped.helper.pid is not None
    try:
        for seed in (11, 12):
            run = _DecodedRun(*ssd_run(N, seed))
            _assert_same_plan(helped.plan(run), at_home.plan(run))
        assert len(placed) == 4
    finally:
        helped.close()
    assert helped.helper.pid is None


def test_answers_come_by_ticket_and_uncollected_ones_are_dropped(helper):
    addresses = np.arange(N, dtype=np.uint64) * np.uint64(4096)
    runs = [ssd_run(N, seed) for seed in (21, 22, 23, 24)]
    tickets = [helper.submit(shapes, columns, False) for shapes, columns in runs]  # all asked before any answer
    assert None not in tickets and tickets == sorted(tickets)
    for (shapes, columns), ticket in zip(runs[:2], tickets[:2], strict=True):
        _assert_same_plan(adopt([None] * N, addresses, helper.answer(ticket)), plan_at_home(shapes, columns, addresses))
    shapes, columns = runs[3]
    _assert_same_plan(adopt([None] * N, addresses, helper.answer(tickets[3])), plan_at_home(shapes, columns, addresses))
    assert helper.answer(tickets[2]) is None  # read past when the fourth was collected: planned at home
    assert helper.answer(None) is None


def test_a_deferred_plan_is_collected_and_placed_by_finish_plan(monkeypatch):
    from headrace.engine.options import ExecutorOptions
    from headrace_kernels.gpu import fused_ops
    from headrace_kernels.registry import KernelSetup

    placed = []
    monkeypatch.setattr(fused_ops, "place", lambda *plan: placed.append(plan))
    setup = KernelSetup(op="crop_mirror_normalize", args=PARTS[-1], device="gpu", device_id=0, num_threads=1,
                        batch_size=N, seed=1, options=ExecutorOptions(), per_sample_args=frozenset({"horizontal"}),
                        parts=PARTS, chain=("flip", "resize", "hsv", "brightness_contrast", "crop_mirror_normalize"))
    at_home, deferring = fused_ops.FusedResizeNormalize(setup), fused_ops.FusedResizeNormalize(setup)
    deferring.start_plan_process(defer=True)
    deferring._plan = lambda *args: pytest.fail("planned in the pipeline's process, not in the helper")
    try:
        assert deferring.defer
        runs = [_DecodedRun(*ssd_run(N, seed)) for seed in (31, 32)]
        pending = [deferring.plan(run) for run in runs]  # the look-ahead: asked, not waited for, not placed
        assert all(isinstance(p, fused_ops.PendingPlan) for p in pending) and not placed
        for run, planned in zip(runs, pending, strict=True):
            _assert_same_plan(deferring.finish_plan(planned), at_home.plan(run))
        assert len(placed) == 4
        assert deferring.finish_plan(None) is None
        os.kill(deferring.helper.pid, signal.SIGSTOP)  # asked, and gone before it answered: the step's run plans it
        late = deferring.plan(runs[0])
        deferring.helper._process.kill()
        with pytest.warns(RuntimeWarning, match="is gone"):
            assert deferring.finish_plan(late) is None
        assert len(placed) == 4
    finally:
        deferring.close()


def test_without_a_helper_nothing_is_deferred():
    from headrace.engine.options import ExecutorOptions
    from headrace_kernels.gpu import fused_ops
    from headrace_kernels.registry import KernelSetup

    uniform = KernelSetup(op="crop_mirror_normalize", args=PARTS[-1], device="gpu", device_id=0, num_threads=1,
                          batch_size=N, seed=1, options=ExecutorOptions(), parts=PARTS[1:],
                          chain=("resize", "hsv", "brightness_contrast", "crop_mirror_normalize"))
    kernel = fused_ops.FusedResizeNormalize(uniform)  # the same arguments for every sample: the plan cache plans
    kernel.start_plan_process(defer=True)
    assert kernel.helper is None and not kernel.defer


def test_closing_with_answers_nobody_collected_is_quick():
    import time

    process = PlanProcess(SPEC)
    for seed in (41, 42, 43):  # a run of 256 images answers more than a pipe holds: the helper waits to send it
        shapes, columns = ssd_run(256, seed)
        assert process.submit(shapes, columns, False) is not None
    time.sleep(1.0)
    helper = process._process
    start = time.perf_counter()
    process.close()
    assert time.perf_counter() - start < 2.0 and helper.poll() is not None
