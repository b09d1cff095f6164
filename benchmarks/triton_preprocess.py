"""Online preprocessing in Triton: what headrace's preprocess model adds over Triton's own overhead, and how it
compares with the usual PIL Python-backend model. On a real tritonserver on this machine, in alternation: headrace's
model (model_repository/preprocess, or its KIND_GPU form), a null model with the same inputs and outputs that does no
work (triton_null/), the PIL baseline (triton_baseline/), with --dali the same pipeline written with NVIDIA DALI in
the same backend (triton_dali/, the peer), and the same pipeline file offline. The load: tritonclient
gRPC threads over client processes (or NVIDIA's perf_analyzer, --perf-analyzer DIR), one image per request (or N),
a fixed time per concurrency level; images/s and p50/p99 latency per request.

    python benchmarks/triton_preprocess.py [--kind KIND_GPU] [--images a.jpg b.jpg] [--seconds 8]
                                           [--baseline-python PY] [--no-pil] [--dali] [--perf-analyzer DIR]

--baseline-python: the interpreter of an environment with numpy<2 and Pillow, to run the baseline as it is usually
written (BYTES input, pb_utils.Tensor outputs); without it the baseline runs here with UINT8 input and DLPack
outputs (numpy 2 leaves no other way). Client and server share this machine's cores."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tritonclient.utils import InferenceServerException

if TYPE_CHECKING:
    from tritonclient.grpc import InferenceServerClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from cpu_use import PARTS, cores_busy, cpu_snapshot  # noqa: E402
from offline_timing import time_pipeline  # noqa: E402
from perf_analyzer_load import perf_analyzer_level, write_input_data  # noqa: E402
from triton_helpers import distinct_jpegs, jpegs, served_preprocess  # noqa: E402
from triton_trace import STAGES, read_traces, stage_medians, trace_options  # noqa: E402

from headrace import types  # noqa: E402
from headrace.pipeline import Pipeline  # noqa: E402
from headrace.serving import start_server, triton_config  # noqa: E402
from headrace.serving.config import MEASURED_INSTANCE_COUNTS, triton_type  # noqa: E402
from headrace.serving.server import MEMORY_POOL_ARGS, stub_paths, with_import_paths  # noqa: E402

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


def offline(pipeline_file: Path, images: list[np.ndarray], seconds: float, device_id: int | None) -> dict:
    """The pipeline file run in this process on the model's device (offline_timing.time_pipeline)."""
    pipe = Pipeline.load(pipeline_file, device_id=device_id)
    try:
        return time_pipeline(pipe, images, seconds)
    finally:
        pipe.close()


def make_input(images: list[np.ndarray], i: int, as_bytes: bool, count: int = 1):
    """Request i's input: `count` copies of one image (a request's rows share one length), as UINT8 rows or (numpy<2
    baseline) BYTES elements."""
    import tritonclient.grpc as grpc

    image = images[i % len(images)]
    if as_bytes:
        tensor = grpc.InferInput("images", [count, 1], "BYTES")
        tensor.set_data_from_numpy(np.array([[image.tobytes()]] * count, dtype=object))
    else:
        tensor = grpc.InferInput("images", [count, len(image)], "UINT8")
        tensor.set_data_from_numpy(np.repeat(image[None], count, axis=0))
    return tensor


IMAGE_SHAPE = [3, 224, 224]  # one normalized image
OUTPUT_TYPES = {"fp32": np.float32, "fp16": np.float16}
# GPU instances: Triton's CUDA and pinned memory pools at 512 MB instead of 64 / 256 MB, as the README advises (the
# Python backend hands GPU outputs to the server through the CUDA pool)
GPU_SERVER_ARGS = " ".join(MEMORY_POOL_ARGS)
WARMUP_S = 1.5  # the Python load loop's unmeasured start of each level
REQUEST_TIMEOUT_S = 30.0  # a request unanswered this long is an error (a hung server ends the level, not the run)


def client_process(url: str, model: str, images: list[np.ndarray], as_bytes: bool, threads: int, first: int,
                   begin: float, seconds: float, shared_memory: bool = False, out_dtype=np.float32,
                   per_request: int = 1) -> dict:
    """One client process: `threads` threads sending requests of `per_request` images back to back from now until
    begin + seconds (wall clock); latencies of the requests started inside [begin, begin + seconds] are kept.
    With `shared_memory` each thread has the server write its output into a system shared-memory region of its
    own (Triton's shared-memory protocol: the tensor does not travel through gRPC), and reads it from there."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []
    end = begin + seconds

    def worker(slot: int) -> None:
        import tritonclient.grpc as grpc

        client = grpc.InferenceServerClient(url)
        outputs, region = None, None
        if shared_memory:
            import tritonclient.utils.shared_memory as shm

            name = f"out_{os.getpid()}_{slot}"
            size = output_bytes(out_dtype, per_request)
            region = shm.create_shared_memory_region(name, f"/{name}", size)
            client.register_system_shared_memory(name, f"/{name}", size)
            output = grpc.InferRequestedOutput("normalized")
            output.set_shared_memory(name, size)
            outputs = [output]
        i = first + slot
        try:
            while True:
                tensor = make_input(images, i, as_bytes, per_request)
                i += 1
                now = time.time()
                if now >= end:
                    return
                t = time.perf_counter()
                try:
                    client.infer(model, [tensor], outputs=outputs, client_timeout=REQUEST_TIMEOUT_S)
                    if region is not None:  # the answer, as a client would take it
                        shm.get_contents_as_numpy(region, out_dtype, [per_request, *IMAGE_SHAPE]).sum(dtype=np.float64)
                except InferenceServerException as exc:
                    errors.append(str(exc))
                    continue
                if now >= begin:
                    latencies[slot].append(time.perf_counter() - t)
        finally:
            if region is not None:
                try:
                    unregister(client, name)
                finally:  # the segment goes even where the server keeps the region registered
                    shm.destroy_shared_memory_region(region)

    pool = [threading.Thread(target=worker, args=(s,), daemon=True) for s in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=seconds + 60)
    return {"latencies": [t for slot in latencies for t in slot], "errors": errors}


def unregister(client: InferenceServerClient, name: str, attempts: int = 20) -> None:
    """Unregister a client's output region. The server may still hold it for a moment after its last answer ("it is
    currently in use"), so this tries again for up to a second rather than leave the region registered."""
    for attempt in range(attempts):
        try:
            client.unregister_system_shared_memory(name)
            return
        except InferenceServerException:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05)


def output_bytes(dtype, count: int = 1) -> int:
    """The size of one answer of `count` images of `dtype` (a shared-memory region's size)."""
    return count * int(np.prod(IMAGE_SHAPE)) * np.dtype(dtype).itemsize


def load(clients: ProcessPoolExecutor, processes: int, url: str, model: str, images: list[np.ndarray],
         as_bytes: bool, concurrency: int, seconds: float, warmup: float = WARMUP_S, shared_memory: bool = False,
         out_dtype=np.float32, per_request: int = 1) -> dict:
    """`concurrency` client threads over at most `processes` processes, for `seconds` after a warm-up."""
    used = min(processes, concurrency)
    shares = [concurrency // used + (1 if p < concurrency % used else 0) for p in range(used)]
    begin = time.time() + warmup
    jobs = [clients.submit(client_process, url, model, images, as_bytes, share, sum(shares[:p]), begin, seconds,
                           shared_memory, out_dtype, per_request) for p, share in enumerate(shares)]
    results = [job.result() for job in jobs]
    return {"latencies": [t for r in results for t in r["latencies"]], "elapsed": seconds,
            "errors": [e for r in results for e in r["errors"]], "per_request": per_request}


STAT_KINDS = ("queue", "compute_input", "compute_infer", "compute_output")


def server_stats(url: str, model: str) -> dict:
    """Triton's own counters for `model`: requests, images, batches, and nanoseconds per stage (summed over
    versions)."""
    import tritonclient.grpc as grpcclient

    with grpcclient.InferenceServerClient(url) as client:
        stats = client.get_inference_statistics(model_name=model, as_json=True)
    totals = {"requests": 0, "images": 0, "batches": 0, **{kind: 0 for kind in STAT_KINDS}}
    for entry in stats.get("model_stats", []):
        totals["requests"] += int(entry.get("inference_stats", {}).get("success", {}).get("count", 0))
        totals["images"] += int(entry.get("inference_count", 0))
        totals["batches"] += int(entry.get("execution_count", 0))
        for kind in STAT_KINDS:
            totals[kind] += int(entry.get("inference_stats", {}).get(kind, {}).get("ns", 0))
    return totals


def stats_between(before: dict, after: dict) -> dict:
    """Mean batch size (images per execute) and ms per request in each stage over one load level (compute: the
    batch's time, which Triton counts once per request of the batch)."""
    delta = {key: after[key] - before[key] for key in after}
    requests = max(delta["requests"], 1)
    return {"batch": delta["images"] / max(delta["batches"], 1),
            **{kind: delta[kind] / requests / 1e6 for kind in STAT_KINDS}}


def summary(runs: list[dict]) -> dict:
    """Pooled over rounds: images per second, p50/p99 latency per request in ms, errors."""
    latencies = np.asarray([t for run in runs for t in run["latencies"]] or [np.nan])
    return {"rate": sum(len(r["latencies"]) * r["per_request"] for r in runs) / sum(r["elapsed"] for r in runs),
            "p50": np.percentile(latencies, 50) * 1e3, "p99": np.percentile(latencies, 99) * 1e3,
            "errors": sum(len(r["errors"]) for r in runs), "first_error": [e for r in runs for e in r["errors"]][:1]}


def pooled(summaries: list[dict]) -> dict:
    """perf_analyzer's rounds, each summarized by it already: their mean rate and median percentiles."""
    return {"rate": float(np.mean([r["rate"] for r in summaries])),
            **{key: float(np.median([r[key] for r in summaries])) for key in ("p50", "p99")},
            "errors": sum(r["errors"] for r in summaries),
            "first_error": [e for r in summaries for e in r["first_error"]][:1]}


def check_output(url: str, model: str, tensor, want: np.ndarray, exact: bool) -> float:
    """The model's answer for one image against the offline pipeline: max abs difference (0 for headrace)."""
    import tritonclient.grpc as grpc

    got = grpc.InferenceServerClient(url).infer(model, [tensor]).as_numpy("normalized")[0]
    diff = float(np.abs(got.astype(np.float64) - want).max())
    if exact and diff != 0:
        raise SystemExit(f"{model}: served output differs from the offline pipeline (max diff {diff})")
    return diff


PYTHON_MODEL_CONFIG = '''name: "{name}"
backend: "python"
max_batch_size: 32
input [ {{ name: "images" data_type: TYPE_UINT8 dims: [ -1 ] allow_ragged_batch: true }} ]
output [ {{ name: "normalized" data_type: {out_type} dims: [ 3, 224, 224 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: {delay} }}
instance_group [ {{ count: {count} kind: {kind} }} ]
parameters [ {parameters} ]
'''
"""The config of the null model and of the DALI peer: the preprocess model's inputs and outputs, Python backend."""


def python_model_config(name: str, kind: str, instances: int, delay_us: int, out_type: str,
                        parameters: dict[str, object]) -> str:
    """PYTHON_MODEL_CONFIG for model `name` with these string `parameters`."""
    entries = ",\n             ".join(f'{{ key: "{key}" value: {{ string_value: "{value}" }} }}'
                                      for key, value in parameters.items())
    return PYTHON_MODEL_CONFIG.format(name=name, delay=delay_us, count=instances, kind=kind, out_type=out_type,
                                      parameters=entries)


def write_null_model(target: Path, kind: str, instances: int = 1, delay_us: int = 0, out_type: str = "TYPE_FP32",
                     work_us: float = 0.0, gpu_kernel: bool = False, fresh_outputs: bool = False) -> None:
    """benchmarks/triton_null as the model `null_preprocess` in the folder `target`, with its config."""
    (target / "1").mkdir(parents=True)
    shutil.copyfile(ROOT / "benchmarks" / "triton_null" / "model.py", target / "1" / "model.py")
    (target / "config.pbtxt").write_text(python_model_config(
        "null_preprocess", kind, instances, delay_us, out_type,
        {"work_us": work_us, "gpu_kernel": int(gpu_kernel), "fresh_outputs": int(fresh_outputs)}))


def write_dali_model(target: Path, kind: str, instances: int, delay_us: int, out_type: str, threads: int | None,
                     hw_decoder_load: float | None) -> None:
    """benchmarks/triton_dali as the model `dali_preprocess` in the folder `target`, with its config: the same
    instances, threads and decoder split as headrace's model."""
    (target / "1").mkdir(parents=True)
    source = (ROOT / "benchmarks" / "triton_dali" / "model.py").read_text()
    (target / "1" / "model.py").write_text(with_import_paths(source, stub_paths()))
    (target / "config.pbtxt").write_text(python_model_config(
        "dali_preprocess", kind, instances, delay_us, out_type,
        {"threads": threads or 2, "hw_decoder_load": 1.0 if hw_decoder_load is None else hw_decoder_load}))


def write_headrace_model(target: Path, kind: str, instances: int | None, threads: int | None,
                         delay_us: int, hw_decoder_load: float | None, log_timing_every: int = 0,
                         dtype: str = "fp32", background: str | None = None) -> Path:
    """model_repository/preprocess's pipeline as scripts/make_model_repository.py builds it (for the GPU: mixed
    decoder, GPU resize and normalize; FP16 outputs with `dtype` "fp16"), with its config, as the model named as
    the folder `target`; returns the pipeline file. `background`: answered from a worker thread
    (`respond_in_background`), "THREADS" or "THREADS:DEPTH": this many response threads beside it, and as many
    hand-overs waiting for it (background_queue_depth, default 1)."""
    (target / "1").mkdir(parents=True)
    options = {} if hw_decoder_load is None else {"hw_decoder_load": hw_decoder_load}
    pipe = served_preprocess(dtype=types.from_numpy_dtype(OUTPUT_TYPES[dtype]),
                             device="gpu" if kind == "KIND_GPU" else "cpu", **options)
    pipeline_file = target / "1" / "pipeline.json"
    pipe.serialize(pipeline_file)
    parameters = {"log_timing_every": log_timing_every} if log_timing_every else {}
    if background is not None:
        senders, _, depth = background.partition(":")  # not `threads`: that is the pipeline's own
        parameters.update(respond_in_background="true", response_threads=senders, background_queue_depth=depth or 1)
    (target / "config.pbtxt").write_text(triton_config(pipe, target.name, instance_kind=kind,
                                                       instance_count=instances or 1, num_threads=threads,
                                                       max_queue_delay_us=delay_us, parameters=parameters))
    return pipeline_file


def background_model(variant: str) -> str:
    """The model name of a --background variant ("THREADS[:DEPTH]")."""
    return f"preprocess_bg{variant.replace(':', '_')}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=("KIND_CPU", "KIND_GPU"), default="KIND_CPU",
                        help="where headrace's, the null model's and the DALI peer's instances run (the offline run: "
                             "the same)")
    parser.add_argument("--images", nargs="*", type=Path, help="JPEG files (default: two synthetic 427x640)")
    parser.add_argument("--distinct-sizes", type=int, default=0,
                        help="N synthetic JPEGs of N different sizes (320-600 x 400-800) instead")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per level and round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each runs every level of every model, "
                        "alternating, so that load from elsewhere on the machine hits them alike")
    parser.add_argument("--concurrency", nargs="*", type=int, default=[1, 8, 32])
    parser.add_argument("--baseline-python", default=sys.executable)
    parser.add_argument("--no-pil", action="store_true", help="leave out the PIL baseline")
    parser.add_argument("--dali", action="store_true",
                        help="also serve the same pipeline written with NVIDIA DALI in the same backend (the peer; "
                             "needs nvidia.dali importable here: its CPU build for KIND_CPU, its GPU build for "
                             "KIND_GPU)")
    parser.add_argument("--dtype", choices=tuple(OUTPUT_TYPES), default="fp32",
                        help="element type of the normalized images, for headrace, the null model and the DALI peer "
                             "(default fp32)")
    parser.add_argument("--instances", type=int,
                        help="instances of every model but the PIL baseline (default: as served, "
                             f"{MEASURED_INSTANCE_COUNTS['KIND_CPU']} for KIND_CPU and "
                             f"{MEASURED_INSTANCE_COUNTS['KIND_GPU']} for KIND_GPU)")
    parser.add_argument("--threads", type=int, help="threads per headrace instance (default: the pipeline's)")
    parser.add_argument("--hw-decoder-load", type=float,
                        help="KIND_GPU: share of JPEGs for the hardware decoder (default: the repository's, 1)")
    parser.add_argument("--queue-delay-us", type=int, default=0,
                        help="dynamic batching delay of every model but the PIL baseline (default 0, as served)")
    parser.add_argument("--client-processes", type=int, default=max(1, (os.cpu_count() or 1) // 4),
                        help="processes the client threads are spread over (default: a quarter of the cores)")
    parser.add_argument("--shared-memory", choices=("none", "system", "cuda"), default="none",
                        help="system: outputs come back through system shared memory instead of gRPC (client and "
                             "server on one machine; the PIL baseline keeps gRPC; perf_analyzer puts the inputs there "
                             "too); cuda (with --perf-analyzer): "
                             "through CUDA memory, as when the next model of an ensemble runs on the same GPU")
    parser.add_argument("--perf-analyzer", type=Path, metavar="DIR",
                        help="load from perf_analyzer in DIR (scripts/get_perf_analyzer.sh), not the Python client")
    parser.add_argument("--perf-analyzer-args", default="", help='more perf_analyzer options, e.g. "--async"')
    parser.add_argument("--server-args", help='more tritonserver options, as --server-args="--opt=value ..." '
                        f'(default: none for KIND_CPU, "{GPU_SERVER_ARGS}" for KIND_GPU)')
    parser.add_argument("--null-work-us", type=float, default=0.0, metavar="US",
                        help="the null model spins this long per execute (how much of a model's own time shows in "
                             "what the client sees; default 0: no work)")
    parser.add_argument("--null-gpu-kernel", action="store_true",
                        help="the null model runs one tiny kernel per execute and waits for it (KIND_GPU): what "
                             "using the GPU at all costs a Python-backend model")
    parser.add_argument("--null-fresh-outputs", action="store_true",
                        help="the null model reads each input and answers with a new tensor filled by one kernel "
                             "(what any GPU model must do)")
    parser.add_argument("--images-per-request", type=int, default=1, metavar="N",
                        help="each request carries N copies of one image (Python load loop; default 1): Triton's "
                             "cost per request spread over N images, as a client that batches its own images sees")
    parser.add_argument("--trace", nargs="?", type=int, const=1, default=0, metavar="N",
                        help="trace every (N-th) request of headrace and the null model (Triton's TIMESTAMPS traces) "
                             "and print the median of each server stage per level: where what headrace adds is "
                             "spent. Tracing costs time of its own: read rates from a run without it. At high "
                             "rates tracing every request can crash tritonserver before 2.57 (server#7795): trace "
                             "every 10th or so there")
    parser.add_argument("--background", nargs="*", default=[], metavar="THREADS[:DEPTH]",
                        help="also serve headrace's model answered from a worker thread (respond_in_background: "
                             "execute returns at once and the instance takes its next batch while this one runs), "
                             "once per number of response threads given (and hand-overs that may wait for the "
                             "worker, default 1), measured in the same rounds as 'headrace bgTHREADS[:DEPTH]'")
    parser.add_argument("--log-timing-every", type=int, default=0,
                        help="have headrace's backend log where execute spends its time every N calls, and print it")
    args = parser.parse_args(argv)
    if args.instances is None:
        args.instances = MEASURED_INSTANCE_COUNTS[args.kind]
    if args.server_args is None:
        args.server_args = GPU_SERVER_ARGS if args.kind == "KIND_GPU" else ""
    if args.shared_memory == "cuda" and not args.perf_analyzer:
        parser.error("--shared-memory cuda needs --perf-analyzer (the Python load loop has system shared memory only)")
    if args.images_per_request != 1 and args.perf_analyzer:
        parser.error("--images-per-request needs the Python load loop (not --perf-analyzer)")
    if not 1 <= args.images_per_request <= 32:
        parser.error("--images-per-request must be 1 to 32 (the models' max_batch_size)")
    if args.dtype != "fp32" and not args.no_pil:
        parser.error("--dtype fp16 needs --no-pil (the PIL baseline answers FP32)")
    if args.images:
        images = [np.fromfile(p, np.uint8) for p in args.images]
    elif args.distinct_sizes:
        images = distinct_jpegs(args.distinct_sizes)
    else:
        images = [jpegs(5, seed=0)[4], jpegs(5, seed=1)[4]]  # two different 427x640 images
    gpu = args.kind == "KIND_GPU"
    device_id = 0 if gpu else None
    out_dtype = OUTPUT_TYPES[args.dtype]
    out_type, out_bytes = triton_type(out_dtype), output_bytes(out_dtype)
    pa_args = tuple(shlex.split(args.perf_analyzer_args))
    hw = f", hw_decoder_load {args.hw_decoder_load if args.hw_decoder_load is not None else 'default'}" if gpu else ""
    print(f"headrace preprocess: {args.kind}, {args.instances} instance(s), {args.threads or 'pipeline default'}"
          f" thread(s), {args.dtype} outputs, queue delay {args.queue_delay_us} us{hw}; "
          f"server options: {args.server_args or 'none'}; "
          f"null model: same kind{f', spinning {args.null_work_us:g} us per execute' if args.null_work_us else ''}"
          f"{', one GPU kernel per execute' if args.null_gpu_kernel and gpu else ''}"
          f"{', reading inputs, new outputs' if args.null_fresh_outputs else ''}; "
          f"{'no PIL baseline' if args.no_pil else 'PIL baseline: 2 CPU instances'}"
          f"{'; DALI peer: same kind, instances and threads' if args.dali else ''}")
    client = f"{args.client_processes} Python process(es)"
    if args.perf_analyzer:
        client = "perf_analyzer" + ("" if args.no_pil else f" (the PIL baseline: {client})")
    print(f"images: {len(images)} ({', '.join(f'{len(j)} B' for j in images)}), {args.images_per_request} per request; "
          f"{args.seconds:.0f} s per level, "
          f"{args.rounds} rounds; client: {client}; {os.cpu_count()} cores; outputs "
          f"through {'gRPC' if args.shared_memory == 'none' else args.shared_memory + ' shared memory'}")

    runs: dict[str, dict[int, list]] = {"headrace": {}, "null model": {}}
    for variant in args.background:
        runs[f"headrace bg{variant}"] = {}
    if args.dali:
        runs["DALI"] = {}
    if not args.no_pil:
        runs["PIL baseline"] = {}
    by_analyzer = {name for name in runs if args.perf_analyzer and name != "PIL baseline"}
    server: dict[str, dict[int, list]] = {name: {} for name in runs}
    windows: dict[str, dict[int, list]] = {name: {} for name in runs}  # measured steady-clock spans, for traces
    cpu: dict[str, dict[int, list]] = {name: {} for name in runs}  # cores busy per level and round
    offline_runs = []
    diff = dali_diff = None
    with tempfile.TemporaryDirectory() as tmp, \
            ProcessPoolExecutor(args.client_processes, mp_context=get_context("spawn")) as clients:
        repo = Path(tmp) / "headrace"
        pipeline_file = write_headrace_model(repo / "preprocess", args.kind, args.instances, args.threads,
                                             args.queue_delay_us, args.hw_decoder_load, args.log_timing_every,
                                             args.dtype)
        write_null_model(repo / "null_preprocess", args.kind, args.instances, args.queue_delay_us, out_type,
                         args.null_work_us, args.null_gpu_kernel, args.null_fresh_outputs)
        for variant in args.background:
            write_headrace_model(repo / background_model(variant), args.kind, args.instances, args.threads,
                                 args.queue_delay_us, args.hw_decoder_load, args.log_timing_every, args.dtype,
                                 background=variant)
        if args.dali:
            write_dali_model(repo / "dali_preprocess", args.kind, args.instances, args.queue_delay_us, out_type,
                             args.threads, args.hw_decoder_load)
        input_data = write_input_data(Path(tmp) / "input_data.json", images) if args.perf_analyzer else None
        pipe = Pipeline.load(pipeline_file, device_id=device_id)
        out = pipe.run(images=images[:1])[0]
        want = (out.as_cpu() if gpu else out).as_array()[0].astype(np.float64)
        pipe.close()
        bytes_ok = numpy_major(args.baseline_python) < 2
        base = Path(tmp) / "baseline" / "pil_preprocess"
        (base / "1").mkdir(parents=True)
        shutil.copyfile(ROOT / "benchmarks" / "triton_baseline" / "model.py", base / "1" / "model.py")
        (base / "config.pbtxt").write_text(BASELINE_CONFIG.format(
            dtype="TYPE_STRING" if bytes_ok else "TYPE_UINT8", dims="1" if bytes_ok else "-1",
            ragged="" if bytes_ok else "allow_ragged_batch: true"))
        trace_dir = Path(tmp) / "traces"
        traced = trace_options(trace_dir, args.trace) if args.trace else ()
        if traced:
            trace_dir.mkdir()
        # all servers up at once (an idle one costs no CPU), measured in alternation
        with start_server(repo, timeout=180, extra_args=(*shlex.split(args.server_args), *traced)) as ours, \
                (start_server(base.parent, timeout=120, python=args.baseline_python) if not args.no_pil
                 else _no_server()) as theirs:
            check_output(ours.grpc_url, "preprocess", make_input(images, 0, False), want, exact=True)
            contenders = [("headrace", ours, "preprocess", False), ("null model", ours, "null_preprocess", False)]
            for variant in args.background:
                check_output(ours.grpc_url, background_model(variant), make_input(images, 0, False), want, exact=True)
                contenders.append((f"headrace bg{variant}", ours, background_model(variant), False))
            if args.dali:
                dali_diff = check_output(ours.grpc_url, "dali_preprocess", make_input(images, 0, False), want,
                                         exact=False)
                contenders.append(("DALI", ours, "dali_preprocess", False))
            if theirs is not None:
                diff = check_output(theirs.grpc_url, "pil_preprocess", make_input(images, 0, bytes_ok), want,
                                    exact=False)
                contenders.append(("PIL baseline", theirs, "pil_preprocess", bytes_ok))
            for round_ in range(args.rounds):
                offline_runs.append(offline(pipeline_file, images, args.seconds, device_id))
                for c in args.concurrency:
                    for name, serving, model, as_bytes in contenders[::1 if round_ % 2 == 0 else -1]:
                        url = serving.grpc_url
                        shared = args.shared_memory if name != "PIL baseline" else "none"
                        before = server_stats(url, model)
                        started = time.monotonic_ns()
                        used_before = cpu_snapshot(serving.pid)
                        if args.perf_analyzer and name != "PIL baseline":
                            run = perf_analyzer_level(args.perf_analyzer, url, model, input_data, c, args.seconds,
                                                      shared, out_bytes, Path(tmp), pa_args)
                        else:
                            run = load(clients, args.client_processes, url, model, images, as_bytes, c,
                                       args.seconds, shared_memory=shared == "system", out_dtype=out_dtype,
                                       per_request=args.images_per_request)
                        stop_if_exited(serving, f"{name} at concurrency {c}")
                        cpu[name].setdefault(c, []).append(
                            cores_busy(used_before, cpu_snapshot(serving.pid), (time.monotonic_ns() - started) / 1e9))
                        runs[name].setdefault(c, []).append(run)
                        server[name].setdefault(c, []).append(stats_between(before, server_stats(url, model)))
                        skipped = 0 if name in by_analyzer else int(WARMUP_S * 1e9)
                        windows[name].setdefault(c, []).append((started + skipped, time.monotonic_ns()))
            log = ours.log().splitlines()
            placement = [line for line in log if "is handed to Triton" in line]
            timing = [line for line in log if "headrace: execute over" in line]
        traces = read_traces(trace_dir) if traced else []  # complete once the server has stopped
    stages = {name: {c: stage_medians(traces, model, spans) for c, spans in windows[name].items()}
              for name, model in (("headrace", "preprocess"), ("null model", "null_preprocess"))} if traces else {}
    results = {name: {c: (pooled if name in by_analyzer else summary)(r) for c, r in levels.items()}
               for name, levels in runs.items()}
    offline_latencies = [t for run in offline_runs for t in run["latencies"]]
    ref = {"rate": sum(r["done"] for r in offline_runs) / sum(r["elapsed"] for r in offline_runs),
           "p50": np.percentile(offline_latencies, 50) * 1e3, "p99": np.percentile(offline_latencies, 99) * 1e3}

    where = "GPU" if gpu else "CPU"
    print(f"\noffline pipeline on the {where} (in process): {ref['rate']:.0f} img/s at batch 32; batch 1 p50 "
          f"{ref['p50']:.2f} ms, p99 {ref['p99']:.2f} ms")
    for line in placement[:2]:
        print("server log:", line.split("headrace: ", 1)[-1].rstrip('"'))
    for line in timing:
        print("server log:", line.split("headrace: ", 1)[-1].rstrip('"'))
    if diff is not None:
        same = "the same values" if diff == 0 else f"values within {diff:.2e}"
        print(f"baseline input: {'BYTES, numpy<2' if bytes_ok else 'UINT8 (numpy 2)'}; it returns {same} as "
              "headrace")
    if dali_diff is not None:
        print(f"DALI's model returns values within {dali_diff:.2e} of headrace's")
    print(f"\n{'model':<14}{'conc':>5}{'img/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for name, levels in results.items():
        for c, r in levels.items():
            print(f"{name:<14}{c:>5}{r['rate']:>9.1f}{r['p50']:>9.2f}{r['p99']:>9.2f}{r['errors']:>8}")
    print("\nTriton's statistics (batch: images per execute; ms per request, compute is its batch's, counted once per "
          "request of it):")
    print(f"{'model':<14}{'conc':>5}{'batch':>7}{'queue':>8}{'input':>8}{'infer':>8}{'output':>8}")
    for name, levels in server.items():
        for c, parts in levels.items():
            mean = {key: float(np.mean([p[key] for p in parts])) for key in parts[0]}
            print(f"{name:<14}{c:>5}{mean['batch']:>7.1f}{mean['queue']:>8.2f}{mean['compute_input']:>8.2f}"
                  f"{mean['compute_infer']:>8.2f}{mean['compute_output']:>8.2f}")
    print_cpu_use(cpu, results)
    if stages:
        print_stages(stages)
    print("\nheadrace against the null model (what preprocessing adds to Triton's own overhead):")
    for c in args.concurrency:
        h, n = results["headrace"][c], results["null model"][c]
        print(f"  concurrency {c:>2}: p50 {h['p50'] - n['p50']:+.2f} ms, p99 {h['p99'] - n['p99']:+.2f} ms, "
              f"throughput {h['rate'] / n['rate']:.0%} of the null model's")
    if "DALI" in results:
        print("DALI against the null model, and headrace / DALI (the peer in the same backend, same run):")
        for c in args.concurrency:
            h, d, n = results["headrace"][c], results["DALI"][c], results["null model"][c]
            print(f"  concurrency {c:>2}: DALI p50 {d['p50'] - n['p50']:+.2f} ms over the null model, throughput "
                  f"{d['rate'] / n['rate']:.0%} of it; headrace / DALI throughput x{h['rate'] / d['rate']:.2f}, "
                  f"p50 latency x{h['p50'] / d['p50']:.2f}")
            for variant in args.background:
                g = results[f"headrace bg{variant}"][c]
                print(f"                  headrace bg{variant} / DALI throughput x{g['rate'] / d['rate']:.2f}, p50 "
                      f"latency x{g['p50'] / d['p50']:.2f}")
    for variant in args.background:
        name = f"headrace bg{variant}"
        print(f"{name}: headrace answered from a worker thread (respond_in_background; response threads[:queue "
              "depth]), against the null model and against headrace answering in execute (same run):")
        for c in args.concurrency:
            g, h, n = results[name][c], results["headrace"][c], results["null model"][c]
            print(f"  concurrency {c:>2}: p50 {g['p50'] - n['p50']:+.2f} ms over the null model, throughput "
                  f"{g['rate'] / n['rate']:.0%} of it; bg / in execute: throughput x{g['rate'] / h['rate']:.2f}, "
                  f"p50 latency x{g['p50'] / h['p50']:.2f}")
    if "PIL baseline" in results:
        print("headrace / PIL baseline:")
        for c in args.concurrency:
            h, b = results["headrace"][c], results["PIL baseline"][c]
            print(f"  concurrency {c:>2}: throughput x{h['rate'] / b['rate']:.2f}, p50 latency "
                  f"x{h['p50'] / b['p50']:.2f}, p99 latency x{h['p99'] / b['p99']:.2f}")
    top = max(args.concurrency)
    print(f"headrace served at concurrency {top}: {results['headrace'][top]['rate'] / ref['rate']:.0%} of the offline "
          "rate")
    for name, levels in results.items():
        for c, r in levels.items():
            if r["errors"]:
                print(f"! {name} concurrency {c}: {r['errors']} errors, e.g. {r['first_error']}")


def stop_if_exited(serving, level: str) -> None:
    """End the benchmark with the server's last log lines if it exited during `level` (the client would only show
    refused connections)."""
    if serving.process.poll() is not None:
        raise SystemExit(f"tritonserver exited (code {serving.process.returncode}) during {level}; its log ends:\n"
                         f"{serving.log_tail(30)}")


def print_cpu_use(cpu: dict[str, dict[int, list]], results: dict[str, dict[int, dict]]) -> None:
    """Cores each part kept busy over a level (mean of the rounds, warm-up included) and its CPU ms per image served:
    whether the host, not the model, sets a level's rate ("machine" is every process, these and the rest)."""
    print(f"\nCPU use (cores busy over each level; CPU ms per image in brackets; {os.cpu_count()} cores):")
    print(f"{'model':<14}{'conc':>5}" + "".join(f"{part:>16}" for part in PARTS))
    for name, levels in cpu.items():
        for c, rounds in levels.items():
            rate = results[name][c]["rate"]
            mean = {part: float(np.mean([r[part] for r in rounds])) for part in PARTS}
            per_image = {part: f"{mean[part] / rate * 1e3:>5.2f}" if rate else "    -" for part in PARTS}
            print(f"{name:<14}{c:>5}" + "".join(f"{mean[part]:>7.2f} ({per_image[part]}) " for part in PARTS))


def print_stages(stages: dict[str, dict[int, dict]]) -> None:
    """The traced requests' median ms per server stage, per model and level."""
    columns = [stage for stage in STAGES
               if any(stage in level for levels in stages.values() for level in levels.values())]
    print("\nTriton's traces (median ms per request; to send: output start to gRPC send; in server: gRPC read to "
          "sent):")
    print(f"{'model':<14}{'conc':>5}{'traces':>8}" + "".join(f"{stage:>10}" for stage in columns))
    for name, levels in stages.items():
        for c, level in levels.items():
            print(f"{name:<14}{c:>5}{level.get('traces', 0):>8}"
                  + "".join(f"{level[stage]:>10.3f}" if stage in level else f"{'-':>10}" for stage in columns))


class _no_server:  # noqa: N801 - stands in for a server context when the PIL baseline is left out
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
