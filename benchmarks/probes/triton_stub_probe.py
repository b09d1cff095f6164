"""Why is a served batch of one slower inside Triton's Python-backend stub than offline? Times fixed units of work
(stub_probe_units.py: pure Python, small numpy calls, one GPU round trip, the served pipeline on one JPEG) inside a
stub at concurrency 1, and in this process back to back and with the stub's idle time between runs.

    python benchmarks/probes/triton_stub_probe.py [--kind KIND_GPU] [--requests 400] [--order gpu,pipeline]

--order: which units run, in which order (default all, python first): what runs first after the idle time pays
for waking up."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from stub_probe_units import UNITS, Units  # noqa: E402
from triton_helpers import jpegs, served_preprocess  # noqa: E402
from triton_preprocess import make_input  # noqa: E402

from headrace.serving import start_server  # noqa: E402
from headrace.serving.server import stub_paths  # noqa: E402

PROBE_CONFIG = '''name: "stub_probe"
backend: "python"
max_batch_size: 1
input [ {{ name: "images" data_type: TYPE_UINT8 dims: [ -1 ] }} ]
output [ {{ name: "seconds" data_type: TYPE_FP64 dims: [ {units} ] }} ]
instance_group [ {{ count: 1 kind: {kind} }} ]
parameters [
  {{ key: "sys_path" value: {{ string_value: "{sys_path}" }} }},
  {{ key: "pipeline_file" value: {{ string_value: "{pipeline_file}" }} }},
  {{ key: "order" value: {{ string_value: "{order}" }} }}
]
'''


def served(url: str, jpeg: np.ndarray, requests: int, warmup: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit seconds per request inside the stub (requests x units) and each request's round trip at the client."""
    import tritonclient.grpc as grpc

    client = grpc.InferenceServerClient(url)
    tensor = make_input([jpeg], 0, as_bytes=False)
    rows, trips = [], []
    for i in range(warmup + requests):
        start = time.perf_counter()
        row = client.infer("stub_probe", [tensor]).as_numpy("seconds")[0]
        if i >= warmup:
            trips.append(time.perf_counter() - start)
            rows.append(row)
    return np.array(rows), np.array(trips)


def offline(units: Units, jpeg: np.ndarray, requests: int, gap: float) -> np.ndarray:
    """Unit seconds per run in this process, sleeping `gap` seconds before each run."""
    for _ in range(10):
        units.run(jpeg)
    rows = []
    for _ in range(requests):
        if gap:
            time.sleep(gap)
        rows.append(units.run(jpeg))
    return np.array(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=("KIND_CPU", "KIND_GPU"), default="KIND_CPU")
    parser.add_argument("--requests", type=int, default=400, help="measured requests (and runs per offline mode)")
    parser.add_argument("--order", default=",".join(UNITS), help=f"units to run, in order (default {','.join(UNITS)})")
    args = parser.parse_args(argv)
    order = tuple(args.order.split(","))
    if any(unit not in UNITS for unit in order):
        parser.error(f"--order: a comma-separated list of {', '.join(UNITS)}")
    gpu = args.kind == "KIND_GPU"
    jpeg = jpegs(5, seed=0)[4]  # 427x640
    paths = os.pathsep.join([str(HERE), str(ROOT / "benchmarks"), *stub_paths()])
    with tempfile.TemporaryDirectory() as tmp:
        pipeline_file = Path(tmp) / "pipeline.json"
        served_preprocess(device="gpu" if gpu else "cpu").serialize(pipeline_file)
        model = Path(tmp) / "repo" / "stub_probe"
        (model / "1").mkdir(parents=True)
        (model / "1" / "model.py").write_text((HERE / "triton_stub_probe" / "model.py").read_text())
        (model / "config.pbtxt").write_text(PROBE_CONFIG.format(units=len(UNITS), kind=args.kind, sys_path=paths,
                                                                pipeline_file=pipeline_file, order=args.order))
        with start_server(model.parent, timeout=180) as server:
            stub, trips = served(server.grpc_url, jpeg, args.requests, warmup=20)
        units = Units(pipeline_file, 0 if gpu else None, order)
        try:
            # the stub idles for a client's round trip less its own work between two requests
            gap = max(float(np.median(trips) - np.median(np.nansum(stub, axis=1))), 0.0)
            back_to_back = offline(units, jpeg, args.requests, 0.0)
            with_gap = offline(units, jpeg, args.requests, gap)
        finally:
            units.close()
    print(f"{args.kind}, {args.requests} requests at concurrency 1, one 427x640 JPEG, units {args.order}; client "
          "round trip p50 "
          f"{np.median(trips) * 1e3:.2f} ms, so the stub idles {gap * 1e3:.2f} ms between requests")
    print(f"\n{'unit':<10}{'stub ms':>10}{'offline ms':>12}{'+ idle ms':>11}{'stub/offline':>14}{'stub/+idle':>12}")
    for unit in order:
        i = UNITS.index(unit)
        s, b, g = (float(np.nanmedian(rows[:, i])) * 1e3 if not np.isnan(rows[:, i]).all() else float("nan")
                   for rows in (stub, back_to_back, with_gap))
        print(f"{unit:<10}{s:>10.3f}{b:>12.3f}{g:>11.3f}{s / b:>14.2f}{s / g:>12.2f}")


if __name__ == "__main__":
    main()
