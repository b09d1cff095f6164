"""Online preprocessing in Triton: headrace's preprocess model (the committed model_repository/preprocess) against
the usual PIL Python-backend model (benchmarks/triton_baseline), both on a real tritonserver on this machine, one
after the other, plus the same pipeline run offline. A bounded tritonclient gRPC load loop: C client threads,
each sending one image per request, for a fixed time per concurrency level; throughput and p50/p99 latency.

    python benchmarks/triton_preprocess.py [--images a.jpg b.jpg] [--seconds 8] [--baseline-python PY]

--baseline-python: the interpreter of an environment with numpy<2 and Pillow, to run the baseline exactly as it is
usually written (BYTES input, pb_utils.Tensor outputs); without it the baseline runs in this environment with
UINT8 input and DLPack outputs (numpy 2 leaves no other way). Client and server share this machine's cores."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from tritonclient.utils import InferenceServerException

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from triton_helpers import MODEL_REPOSITORY, PREPROCESS_FILE, jpegs  # noqa: E402

from headrace.pipeline import Pipeline  # noqa: E402
from headrace.serving import start_server, triton_config  # noqa: E402

BASELINE_CONFIG = '''name: "pil_preprocess"
backend: "python"
max_batch_size: 32
input [ {{ name: "images" data_type: {dtype} dims: [ {dims} ] {ragged} }} ]
output [ {{ name: "normalized" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: 500 }}
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
'''


def numpy_major(python: str) -> int:
    import subprocess

    out = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split(".")[0])


def offline(images: list[np.ndarray], seconds: float) -> dict:
    """The pipeline file run in this process: batches of 32 (throughput) and of 1 (latency); returns raw timings."""
    pipe = Pipeline.load(PREPROCESS_FILE)
    batch = [images[i % len(images)] for i in range(pipe.batch_size)]
    pipe.run(images=batch)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        pipe.run(images=batch)
        done += len(batch)
    elapsed = time.perf_counter() - start
    latencies = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds / 2:
        t = time.perf_counter()
        pipe.run(images=[images[len(latencies) % len(images)]])
        latencies.append(time.perf_counter() - t)
    pipe.close()
    return {"done": done, "elapsed": elapsed, "latencies": latencies}


def load(url: str, model: str, make_input, concurrency: int, seconds: float) -> dict:
    """`concurrency` threads sending one-image requests back to back for `seconds` (after a warm-up)."""
    import tritonclient.grpc as grpc

    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    go, stop = threading.Event(), threading.Event()

    def worker(slot: int) -> None:
        client = grpc.InferenceServerClient(url)
        i = slot
        while not stop.is_set():
            tensor = make_input(i)
            i += 1
            t = time.perf_counter()
            try:
                client.infer(model, [tensor])
            except InferenceServerException as exc:
                errors.append(str(exc))
                continue
            if go.is_set():
                latencies[slot].append(time.perf_counter() - t)

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in range(concurrency)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # warm-up
    go.set()
    start = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - start
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    return {"latencies": [t for slot in latencies for t in slot], "elapsed": elapsed, "errors": errors}


def summary(runs: list[dict]) -> dict:
    """Pooled over rounds: images per second, p50/p99 latency in ms, errors."""
    latencies = np.asarray([t for run in runs for t in run["latencies"]] or [np.nan])
    return {"rate": sum(len(r["latencies"]) for r in runs) / sum(r["elapsed"] for r in runs),
            "p50": np.percentile(latencies, 50) * 1e3, "p99": np.percentile(latencies, 99) * 1e3,
            "errors": sum(len(r["errors"]) for r in runs), "first_error": [e for r in runs for e in r["errors"]][:1]}


def check_output(url: str, model: str, tensor, want: np.ndarray, exact: bool) -> float:
    """The model's answer for one image against the offline pipeline: max abs difference (0 for headrace)."""
    import tritonclient.grpc as grpc

    got = grpc.InferenceServerClient(url).infer(model, [tensor]).as_numpy("normalized")[0]
    diff = float(np.abs(got.astype(np.float64) - want).max())
    if exact and diff != 0:
        raise SystemExit(f"{model}: served output differs from the offline pipeline (max diff {diff})")
    return diff


def main(argv: list[str] | None = None) -> None:
    import tritonclient.grpc as grpc

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", nargs="*", type=Path, help="JPEG files (default: two synthetic 427x640)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per level and round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each runs every level of both models, "
                        "alternating, so that load from elsewhere on the machine hits both alike")
    parser.add_argument("--concurrency", nargs="*", type=int, default=[1, 8, 32])
    parser.add_argument("--baseline-python", default=sys.executable)
    parser.add_argument("--instances", type=int, help="headrace instances (default: the committed config's)")
    parser.add_argument("--threads", type=int, help="threads per headrace instance (default: the pipeline's)")
    args = parser.parse_args(argv)
    if args.images:
        images = [np.fromfile(p, np.uint8) for p in args.images]
    else:
        images = [jpegs(5, seed=0)[4], jpegs(5, seed=1)[4]]  # two different 427x640 images
    setup = f"{args.instances or 1} instance(s), {args.threads or 'pipeline default'} thread(s)"
    print(f"headrace preprocess: {setup}; PIL baseline: 2 instances")
    print(f"images: {len(images)} ({', '.join(f'{len(j)} B' for j in images)}); {args.seconds:.0f} s per level, "
          f"{args.rounds} rounds")

    pipe = Pipeline.load(PREPROCESS_FILE)
    want = pipe.run(images=images[:1])[0].as_array()[0].astype(np.float64)
    pipe.close()

    def uint8_input(i: int):
        image = images[i % len(images)]
        tensor = grpc.InferInput("images", [1, len(image)], "UINT8")
        tensor.set_data_from_numpy(image[None])
        return tensor

    def bytes_input(i: int):
        tensor = grpc.InferInput("images", [1, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[images[i % len(images)].tobytes()]], dtype=object))
        return tensor

    runs: dict[str, dict[int, list]] = {"headrace": {}, "PIL baseline": {}}
    offline_runs = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "headrace"
        shutil.copytree(MODEL_REPOSITORY / "preprocess", repo / "preprocess")
        if args.instances or args.threads:
            (repo / "preprocess" / "config.pbtxt").write_text(triton_config(
                PREPROCESS_FILE, "preprocess", instance_count=args.instances or 1, num_threads=args.threads))
        bytes_ok = numpy_major(args.baseline_python) < 2
        base = Path(tmp) / "baseline" / "pil_preprocess"
        (base / "1").mkdir(parents=True)
        shutil.copyfile(ROOT / "benchmarks" / "triton_baseline" / "model.py", base / "1" / "model.py")
        (base / "config.pbtxt").write_text(BASELINE_CONFIG.format(
            dtype="TYPE_STRING" if bytes_ok else "TYPE_UINT8", dims="1" if bytes_ok else "-1",
            ragged="" if bytes_ok else "allow_ragged_batch: true"))
        make = bytes_input if bytes_ok else uint8_input
        # both servers up at once (an idle one costs no CPU), measured in alternation
        with start_server(repo, timeout=120) as ours, \
                start_server(base.parent, timeout=120, python=args.baseline_python) as theirs:
            check_output(ours.grpc_url, "preprocess", uint8_input(0), want, exact=True)
            diff = check_output(theirs.grpc_url, "pil_preprocess", make(0), want, exact=False)
            contenders = [("headrace", ours.grpc_url, "preprocess", uint8_input),
                          ("PIL baseline", theirs.grpc_url, "pil_preprocess", make)]
            for round_ in range(args.rounds):
                offline_runs.append(offline(images, args.seconds))
                for c in args.concurrency:
                    for name, url, model, maker in contenders[::1 if round_ % 2 == 0 else -1]:
                        runs[name].setdefault(c, []).append(load(url, model, maker, c, args.seconds))
    results = {name: {c: summary(r) for c, r in levels.items()} for name, levels in runs.items()}
    offline_latencies = [t for run in offline_runs for t in run["latencies"]]
    ref = {"rate": sum(r["done"] for r in offline_runs) / sum(r["elapsed"] for r in offline_runs),
           "p50": np.percentile(offline_latencies, 50) * 1e3, "p99": np.percentile(offline_latencies, 99) * 1e3}

    print(f"\noffline pipeline (in process): {ref['rate']:.0f} img/s at batch 32; batch 1 p50 {ref['p50']:.2f} ms, "
          f"p99 {ref['p99']:.2f} ms")
    same = "the same values" if diff == 0 else f"values within {diff:.2e}"
    print(f"baseline input: {'BYTES, numpy<2' if bytes_ok else 'UINT8 (numpy 2)'}; it returns {same} as headrace")
    print(f"\n{'model':<14}{'conc':>5}{'img/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for name, levels in results.items():
        for c, r in levels.items():
            print(f"{name:<14}{c:>5}{r['rate']:>9.1f}{r['p50']:>9.2f}{r['p99']:>9.2f}{r['errors']:>8}")
    print("\nheadrace / PIL baseline:")
    for c in args.concurrency:
        h, b = results["headrace"][c], results["PIL baseline"][c]
        print(f"  concurrency {c:>2}: throughput x{h['rate'] / b['rate']:.2f}, p50 latency x{h['p50'] / b['p50']:.2f}"
              f", p99 latency x{h['p99'] / b['p99']:.2f}")
    top = max(args.concurrency)
    print(f"headrace served at concurrency {top}: {results['headrace'][top]['rate'] / ref['rate']:.0%} of the offline "
          "rate")
    for name, levels in results.items():
        for c, r in levels.items():
            if r["errors"]:
                print(f"! {name} concurrency {c}: {r['errors']} errors, e.g. {r['first_error']}")


if __name__ == "__main__":
    main()
