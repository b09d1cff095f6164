"""benchmarks/triton_trace.py on a real tritonserver: every request is traced, and each trace counts in the load
window it started in, with stages that add up to what the server spent."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from triton_helpers import NO_SERVER, have_server, jpegs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from triton_preprocess import make_input, write_null_model  # noqa: E402
from triton_trace import STAGES, read_traces, stage_medians, trace_options  # noqa: E402

from headrace.serving import start_server  # noqa: E402

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not have_server(), reason=NO_SERVER)]


def test_traces_fall_in_their_windows(tmp_path: Path) -> None:
    import tritonclient.grpc as grpc

    write_null_model(tmp_path / "repo" / "null_preprocess", "KIND_CPU")
    folder = tmp_path / "traces"
    folder.mkdir()
    image = jpegs(1)[0]
    windows = []
    with start_server(tmp_path / "repo", extra_args=trace_options(folder)) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        for count in (3, 2):
            start = time.monotonic_ns()
            for _ in range(count):
                answer = client.infer("null_preprocess", [make_input([image], 0, as_bytes=False)])
                assert answer.as_numpy("normalized").shape == (1, 3, 224, 224)
            windows.append((start, time.monotonic_ns()))
    traces = read_traces(folder)  # the last ones are written as the server stops
    assert sorted(name for name, _ in traces) == ["null_preprocess"] * 5
    first, second = (stage_medians(traces, "null_preprocess", [w]) for w in windows)
    assert first["traces"] == 3 and second["traces"] == 2
    assert stage_medians(traces, "null_preprocess", [(0, windows[0][0])]) == {}
    both = stage_medians(traces, "null_preprocess", windows)
    assert both["traces"] == 5 and set(both) == {*STAGES, "traces"}
    assert all(both[stage] >= 0 for stage in STAGES)
    # one request at a time: its queue, input and infer stages lie inside its time in the server, and its answer
    # is sent once its output stage has begun
    for _, stamps in traces:
        parts = sum(stamps[last] - stamps[first] for first, last in (STAGES[s] for s in ("queue", "input", "infer")))
        assert 0 < parts < stamps["GRPC_SEND_END"] - stamps["GRPC_WAITREAD_END"]
        assert stamps["GRPC_SEND_START"] >= stamps["COMPUTE_OUTPUT_START"]
    assert np.isclose(both["in server"], np.median([(s["GRPC_SEND_END"] - s["GRPC_WAITREAD_END"]) / 1e6
                                                     for _, s in traces]))
