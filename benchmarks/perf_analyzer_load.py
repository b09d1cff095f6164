"""Load from NVIDIA's perf_analyzer (C++ client, scripts/get_perf_analyzer.sh) for benchmarks/triton_preprocess.py:
the same one-image requests at a fixed concurrency as the Python load loop, without Python on the client side, so
the client's own cost no longer caps what a model appears to serve."""

from __future__ import annotations

import base64
import csv
import json
import os
import subprocess
from pathlib import Path

import numpy as np


def write_input_data(path: Path, images: list[np.ndarray]) -> Path:
    """perf_analyzer's --input-data file: one entry per JPEG (raw UINT8 bytes, base64, its own shape); the client
    cycles through them request by request."""
    entries = [{"images": {"b64": base64.b64encode(image.tobytes()).decode(), "shape": [len(image)]}}
               for image in images]
    path.write_text(json.dumps({"data": entries}))
    return path


def executable(location: Path) -> tuple[Path, dict]:
    """perf_analyzer in `location` (the folder made by get_perf_analyzer.sh, or the binary itself) and the
    environment that finds its libraries."""
    binary = location / "perf_analyzer" if location.is_dir() else location
    lib = binary.parent / "lib"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{lib}:{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else str(lib)
    return binary, env


def perf_analyzer_level(location: Path, grpc_url: str, model: str, input_data: Path, concurrency: int,
                        seconds: float, shared_memory: str, output_bytes: int, work: Path,
                        extra: tuple[str, ...] = ()) -> dict:
    """One concurrency level: three windows of `seconds` / 3, pooled (no stability criterion, like the Python loop:
    perf_analyzer's default one gives up on a machine shared with the server); its answer in the shape of the
    Python client's summary (rate img/s, p50 / p99 ms, errors)."""
    binary, env = executable(location)
    report = work / f"{model}_c{concurrency}.csv"
    command = [str(binary), "-m", model, "-u", grpc_url, "-i", "grpc", "-b", "1",
               "--concurrency-range", f"{concurrency}:{concurrency}", "--input-data", str(input_data),
               "--measurement-mode", "time_windows", "-p", str(max(int(seconds * 1000 / 3), 500)),
               "--max-trials", "3", "--stability-percentage", "1000", "-f", str(report)]
    command += list(extra)
    if shared_memory != "none":  # "system" or "cuda": outputs and, unlike the Python loop, inputs through regions
        command += ["--shared-memory", shared_memory, "--output-shared-memory-size", str(output_bytes)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds * 4 + 120)
        failure = None if done.returncode == 0 and report.exists() else \
            " / ".join((done.stdout + done.stderr).strip().splitlines()[-5:])
    except subprocess.TimeoutExpired:
        failure = f"perf_analyzer did not finish in {seconds * 4 + 120:.0f} s"
    if failure is not None:  # an error row for this level; the other levels and rounds go on
        return {"rate": float("nan"), "p50": float("nan"), "p99": float("nan"), "errors": 1, "first_error": [failure]}
    with report.open() as f:
        row = next(csv.DictReader(f))
    return {"rate": float(row["Inferences/Second"]), "p50": float(row["p50 latency"]) / 1e3,
            "p99": float(row["p99 latency"]) / 1e3, "errors": 0, "first_error": []}
