"""Where a served request's time goes, from Triton's own request traces (`--trace-config level=TIMESTAMPS`): the
server options that trace every request into files, and the median time of each stage (queue, input, infer, output,
gRPC send, and the whole from gRPC read to sent) per model and load level, so that what one model adds over another
can be placed in one stage of the server."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

# a served request's stages: name -> (first timestamp, last timestamp). The Python backend sends a response while
# its output stage is still running, so "to send" and "send" overlap "output".
STAGES = {"queue": ("QUEUE_START", "COMPUTE_START"), "input": ("COMPUTE_START", "COMPUTE_INPUT_END"),
          "infer": ("COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"), "output": ("COMPUTE_OUTPUT_START", "COMPUTE_END"),
          "to send": ("COMPUTE_OUTPUT_START", "GRPC_SEND_START"), "send": ("GRPC_SEND_START", "GRPC_SEND_END"),
          "in server": ("GRPC_WAITREAD_END", "GRPC_SEND_END")}


def trace_options(folder: Path, every: int = 1) -> tuple[str, ...]:
    """tritonserver options that trace every `every`-th request with timestamps into `folder`/trace.json.K (K
    counts files of 200 traces; the rest is written when the server stops). Tracing every request at high rates
    can crash tritonserver before 2.57 (triton-inference-server/server#7795, fixed by #8144): sample there."""
    return ("--trace-config", f"triton,file={folder / 'trace.json'}", "--trace-config", "triton,log-frequency=200",
            "--trace-config", f"rate={every}", "--trace-config", "level=TIMESTAMPS")


def read_traces(folder: Path) -> list[tuple[str, dict[str, int]]]:
    """Every trace in `folder`'s trace files: (model name, timestamp name -> steady-clock ns)."""
    models: dict[int, str] = {}
    stamps: dict[int, dict[str, int]] = defaultdict(dict)
    for path in sorted(folder.glob("trace.json*")):
        for entry in json.loads(path.read_text() or "[]"):
            if "model_name" in entry:
                models[entry["id"]] = entry["model_name"]
            for stamp in entry.get("timestamps", ()):
                stamps[entry["id"]].setdefault(stamp["name"], int(stamp["ns"]))
    return [(models.get(i, "?"), s) for i, s in stamps.items()]


def stage_medians(traces: list[tuple[str, dict[str, int]]], model: str, windows: list[tuple[int, int]]) -> dict:
    """Median ms of each stage over `model`'s traces that started inside one of `windows`, [start, end) in ns of
    the steady clock (Python's time.monotonic_ns), and their number; {} when there are none."""
    stages: dict[str, list[float]] = defaultdict(list)
    for name, stamps in traces:
        started = stamps.get("REQUEST_START", -1)
        if name != model or not any(start <= started < end for start, end in windows):
            continue
        for stage, (first, last) in STAGES.items():
            if first in stamps and last in stamps:
                stages[stage].append((stamps[last] - stamps[first]) / 1e6)
    medians = {stage: float(np.median(times)) for stage, times in stages.items()}
    return medians | {"traces": max(map(len, stages.values()))} if stages else {}
