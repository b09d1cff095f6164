"""Memory stays bounded when good and bad requests share batches (issue 26: a failed run's frames, held by cycles
through its exceptions, kept its pooled buffers and Triton's requests alive until a full garbage collection).
In process with BatchRunner (the cyclic collector off: only what reference counting frees counts), and on a real
tritonserver (RSS and shared memory between rounds of mixed traffic)."""

from __future__ import annotations

import gc
import importlib.util
import shutil
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from triton_helpers import MODEL_REPOSITORY, NO_SERVER, PREPROCESS_FILE, have_server, jpegs, respond_in_background

from headrace.pipeline import Pipeline
from headrace.serving.batching import BatchRunner, InputSpec, RequestError

ROOT = Path(__file__).resolve().parent.parent
CORRUPT = np.frombuffer(b"\xff\xd8\xff\xe0 not a JPEG at all " * 8, np.uint8)
MIB = 1 << 20


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _ours(obj) -> bool:
    """A frame, traceback or exception of headrace's code (background threads of other tests' objects, alive in
    this process, may leave their own cycles meanwhile: not this test's concern)."""
    frame = obj if type(obj).__name__ == "frame" else getattr(obj, "tb_frame", None)
    if isinstance(obj, BaseException):
        tb = obj.__traceback__
        frame = tb.tb_frame if tb is not None else None
        if frame is None:
            return "headrace" in type(obj).__module__ or type(obj).__name__ in ("SampleError", "RequestError")
    return frame is not None and "headrace" in frame.f_code.co_filename


def _described(obj) -> str:
    """A leftover object for the failure message: its type, and where a frame or traceback points."""
    frame = obj if type(obj).__name__ == "frame" else getattr(obj, "tb_frame", None)
    if frame is None and isinstance(obj, BaseException) and obj.__traceback__ is not None:
        frame = obj.__traceback__.tb_frame
    where = f" {frame.f_code.co_filename.rsplit('/src/', 1)[-1]}:{frame.f_lineno}" if frame is not None else ""
    return type(obj).__name__ + where


def test_failed_batches_free_their_buffers():
    """40 rounds of batches of 8 one-image requests with 1 or 2 corrupt images each (the second in another
    worker's share), the cyclic garbage collector off: good outputs keep coming from the pool's 3 buffers, traced
    memory after 40 rounds is that after 4, and no frame or exception of a failed run is left for the collector."""
    images = jpegs()
    pipe = Pipeline.load(PREPROCESS_FILE, batch_size=8, num_threads=2, prefetch_queue_depth=1)  # as served
    runner = BatchRunner(pipe, [InputSpec("images", np.dtype(np.uint8), (-1,))], ["normalized"])
    want = [runner.run([{"images": image[None]}])[0][0][0].copy() for image in images]
    rng = np.random.default_rng(1)
    roots, traced = set(), []
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for round_ in range(40):
            plan = [int(i) for i in rng.integers(0, len(images), 8)]
            bad = {int(b) for b in rng.choice(8, size=1 + round_ % 2, replace=False)}
            results = runner.run([{"images": (CORRUPT if i in bad else images[p])[None]}
                                  for i, p in enumerate(plan)])
            for i, (p, result) in enumerate(zip(plan, results, strict=True)):
                if i in bad:
                    assert isinstance(result, RequestError) and "sample 0 of this request" in str(result)
                    assert result.__traceback__ is None
                else:
                    assert not isinstance(result, RequestError), result
                    np.testing.assert_array_equal(result[0][0], want[p])
                    roots.add(id(_root(result[0])))
            del results, result
            traced.append(tracemalloc.get_traced_memory()[0])
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [_described(o) for o in gc.garbage if _ours(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        tracemalloc.stop()
        gc.enable()
        pipe.close()
    assert not left, f"a failed run left cycles: {sorted(set(left))}"
    assert len(roots) <= 3, f"good outputs came from {len(roots)} buffers: failed batches kept theirs"
    one_buffer = 8 * 3 * 224 * 224 * 4
    assert traced[-1] - traced[3] < one_buffer, [t // MIB for t in traced]


def _bound(base: int) -> float:
    """The growth allowed between two rounds: 30 MiB or 5%, whichever is larger."""
    return max(30 * MIB, 0.05 * base)


def _soak():
    """scripts/serving_soak.py as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location("serving_soak", ROOT / "scripts" / "serving_soak.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.triton
@pytest.mark.skipif(not have_server(), reason=NO_SERVER)
@pytest.mark.parametrize("background", [False, True], ids=["in-execute", "in-background"])
def test_mixed_traffic_memory_is_flat(tmp_path: Path, background: bool):
    """3 rounds of 600 one-image requests at concurrency 16, 10% corrupt: every answer right, and the peak RSS of
    tritonserver and of the model's stub, and the server's shared memory, grow by at most max(30 MiB, 5%) from
    round 2 to round 3, and so do both RSS together (before the fix: 40-310 MiB; after: under 7). The same where
    the model answers from a worker thread (`respond_in_background`)."""
    pytest.importorskip("tritonclient.grpc")
    from headrace.serving import start_server
    from headrace.serving.server import child_pids

    soak = _soak()
    shutil.copytree(MODEL_REPOSITORY / "preprocess", tmp_path / "repo" / "preprocess")
    if background:
        respond_in_background(tmp_path / "repo" / "preprocess")
    good = jpegs()
    bad = list(soak.bad_inputs().values())
    want = soak.references(PREPROCESS_FILE, good, {}, on_gpu=False)
    peaks = []
    with start_server(tmp_path / "repo", timeout=120) as server:
        stubs = child_pids(server.pid)
        assert len(stubs) == 1
        for round_ in range(3):
            tally = soak.Tally(100, lambda: soak.memory_sample(server.pid, stubs, gpu=False))
            soak.run_load(server.grpc_url, good, want, bad, 0.1, 16, tally, requests=600, seed=round_)
            assert tally.done == 600 and tally.bad > 20
            assert not tally.good_errors and not tally.mismatches and not tally.bad_answered, (
                tally.good_errors[:3], tally.mismatches, tally.bad_answered)
            peaks.append({key: max(s[key] for s in tally.samples) for key in ("server_rss", "stub_rss", "dev_shm")})
    figures = {key: [round(p[key] / MIB, 1) for p in peaks] for key in peaks[0]}
    for key in peaks[0]:
        assert peaks[2][key] - peaks[1][key] <= _bound(peaks[1][key]), (key, figures)
    # a full garbage collection in the stub may hide most of one round's growth of one process, not of both
    total = [p["server_rss"] + p["stub_rss"] for p in peaks]
    assert total[2] - total[1] <= _bound(total[1]), figures
