"""headrace against DALI's GPU build in one process on the same JPEGs: ResNet-50 training (hw_decoder_load 0.65 and
1.0), validation and the served (fed) pipelines, written once against the shared API and built by each library.
Alternating rounds (A B, B A, ...) of a few epochs each; medians, the ratio headrace / DALI, GPU memory above the
baseline and build + first batch per pipeline. `--fresh` runs each library's pipeline alone in a new process instead:
build + first batch of a new process, and the GPU memory it holds after a warm-up epoch, after more epochs and after
releasing it (each library's own pools, given back: `release_memory()`, DALI's `ReleaseUnusedMemory()`), with where
headrace's is held.

    python benchmarks/gpu_vs_dali.py [--images 2048] [--batch-size 256] [--threads 8] [--rounds 7] [--epochs 12]
    python benchmarks/gpu_vs_dali.py --fresh [--libs dali headrace] [--epochs 5] [--profile-first 30]
    (DALI's GPU build: ../shared/tools/dali-gpu/README.md says how it reaches the GPU machine)
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# headrace.demo's values, written out so that DALI's fresh processes (--fresh) do not import headrace
IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
IMAGENET_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def decode_crop(api, data: str, hw_load: float):
    """train's reader and decoder alone: the ceiling the shared decoder sets on train."""
    fn, types = api.fn, api.types
    jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=hw_load,
                                           random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 1.333],
                                           **api.decoder_args)
    return images, labels


def decode_whole(api, data: str, hw_load: float):
    """validation's reader and decoder alone: the ceiling the shared decoder sets on validation."""
    fn, types = api.fn, api.types
    jpegs, labels = fn.readers.file(file_root=data, random_shuffle=False, name="Reader")
    return fn.decoders.image(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=hw_load,
                             **api.decoder_args), labels


def train(api, data: str, hw_load: float):
    fn, types = api.fn, api.types
    images, labels = decode_crop(api, data, hw_load)
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=IMAGENET_MEAN,
                                      std=IMAGENET_STD, mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


def validation(api, data: str, hw_load: float):
    fn, types = api.fn, api.types
    images, labels = decode_whole(api, data, hw_load)
    images = fn.resize(images, resize_shorter=256)
    images = fn.crop_mirror_normalize(images, crop=(224, 224), dtype=types.FLOAT16, output_layout="CHW",
                                      mean=IMAGENET_MEAN, std=IMAGENET_STD)
    return images, labels


def fed(api, data: str, hw_load: float):
    """The served pipeline (model_repository/preprocess's, decoded on the GPU): encoded JPEGs fed by the caller per
    batch, as Triton's requests feed it, so nothing can be read ahead."""
    fn, types = api.fn, api.types
    encoded = fn.external_source(name=FED_INPUT, dtype=types.UINT8, ndim=1)
    images = fn.decoders.image(encoded, device="mixed", output_type=types.RGB, hw_decoder_load=hw_load,
                               **api.decoder_args)
    images = fn.resize(images, resize_shorter=256)
    return fn.crop_mirror_normalize(images, crop=(224, 224), dtype=types.FLOAT, output_layout="CHW",
                                    mean=IMAGENET_MEAN, std=IMAGENET_STD)


FED_INPUT = "encoded"
CASES = {"train 0.65": (train, 0.65), "train 1.0": (train, 1.0), "validation": (validation, 0.65),
         "fed": (fed, 0.65), "decode crop 0.65": (decode_crop, 0.65), "decode crop 1.0": (decode_crop, 1.0),
         "decode 0.65": (decode_whole, 0.65)}
PIPELINES = ["train 0.65", "train 1.0", "validation", "fed"]
"""The default cases; the "decode" ones cut a pipeline after its decoder (where the rates stop)."""


class Library:
    """One library's `fn`, `types` and `pipeline_def`, imported by name."""

    def __init__(self, name: str, decoder_args: dict | None = None, executor: dict[str, str] | None = None):
        self.decoder_args = decoder_args or {}  # extra arguments of this library's decoder nodes
        self.build_args = {}  # extra arguments of its pipeline_def: headrace's executor options
        if executor and name == "headrace":
            from headrace import ExecutorOptions

            self.build_args = {"executor_options": ExecutorOptions.from_strings(executor)}
        if name == "dali":
            import nvidia.dali as root
            from nvidia.dali import fn, pipeline_def, types
        else:
            import headrace as root
            from headrace import fn, pipeline_def, types
        self.name, self.root, self.fn, self.types, self.pipeline_def = name, root, fn, types, pipeline_def


class CollectorPauses:
    """Python's garbage collections while one library's rounds run, per library: count and seconds by generation
    (a full collection scans every object of the process, DALI's and torch's included, holding the GIL)."""

    def __init__(self):
        self.totals: dict[str, dict[int, list[float]]] = {}
        self._current: dict[int, list[float]] = {}
        self._began = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            entry = self._current.setdefault(info["generation"], [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - self._began

    def start(self) -> None:
        self._current = {}

    def stop(self, name: str) -> None:
        total = self.totals.setdefault(name, {})
        for generation, (count, seconds) in self._current.items():
            entry = total.setdefault(generation, [0, 0.0])
            entry[0] += count
            entry[1] += seconds
        self._current = {}

    def summary(self) -> str:
        text = "; ".join(f"{name}: " + ", ".join(f"gen {g} x{c} {s * 1e3:.0f} ms" for g, (c, s) in sorted(t.items()))
                         for name, t in self.totals.items())
        self.totals = {}
        return text or "none"


def device_used_mib() -> float:
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    return (total - free) / 2**20


class Feed:
    """The encoded JPEGs of `data`, handed to a fed pipeline (the "fed" case) a batch at a time, in a cycle."""

    def __init__(self, data: str, batch: int):
        import numpy as np

        self.encoded = [np.fromfile(p, np.uint8) for p in sorted(Path(data).rglob("*")) if p.is_file()]
        self.batch, self.next = batch, 0

    def __call__(self) -> dict:
        start, count = self.next, len(self.encoded)
        self.next = (start + self.batch) % count
        return {FED_INPUT: [self.encoded[(start + i) % count] for i in range(self.batch)]}


def feed_for(case: str, data: str, batch: int) -> Feed | None:
    """What feeds the case's pipeline each batch: None where its readers read."""
    return Feed(data, batch) if CASES[case][0] is fed else None


def defined_and_built(lib: Library, body, data: str, hw_load: float, batch: int, threads: int, **pipeline_args):
    """The case's pipeline built, with the seconds its definition and its `build()` took."""
    start = time.perf_counter()
    pipe = lib.pipeline_def(batch_size=batch, num_threads=threads, device_id=0, seed=42, **pipeline_args,
                            **lib.build_args)(lambda: body(lib, data, hw_load))()
    defined = time.perf_counter()
    pipe.build()
    return pipe, defined - start, time.perf_counter() - defined


def next_batch(pipe, feed: Feed | None):
    """The pipeline's next outputs (fed the next batch where it is fed)."""
    return pipe.run(**feed()) if feed is not None else pipe.run()


def build(lib: Library, body, data: str, hw_load: float, batch: int, threads: int, feed: Feed | None = None,
          phases: dict | None = None):
    """The built pipeline, its build + first batch seconds and the GPU memory it added (MiB). A fed pipeline
    keeps no batch ahead (prefetch_queue_depth 1, as a served one); `phases` gets the seconds of the definition,
    `build()` and the first `run()`."""
    before = device_used_mib()
    depth = {"prefetch_queue_depth": 1} if feed is not None else {}
    pipe, define_s, build_s = defined_and_built(lib, body, data, hw_load, batch, threads, **depth)
    built = time.perf_counter()
    next_batch(pipe, feed)[0].as_cpu()
    run_s = time.perf_counter() - built
    if phases is not None:
        phases.update(define_s=define_s, build_s=build_s, run_s=run_s)
    return pipe, define_s + build_s + run_s, device_used_mib() - before


def epoch_rate(pipe, batches: int, epochs: int, use: list[float] | None = None, feed: Feed | None = None) -> float:
    """Images a second over `epochs` epochs; `use` gets the process's CPU cores meanwhile (CPU seconds of all its
    threads, the decoder's host threads included, per wall second)."""
    start, cpu, count = time.perf_counter(), time.process_time(), 0
    for _ in range(batches * epochs):
        out = next_batch(pipe, feed)
        count += len(out[0])
    out[0].as_cpu()  # waits for the last batch
    wall = time.perf_counter() - start
    if use is not None:
        use.append((time.process_time() - cpu) / wall)
    return count / wall


def iterated(lib: Library, body, data: str, hw_load: float, batch: int, threads: int, phases: dict):
    """The built pipeline and the library's PyTorch iterator over it (reader 'Reader', whole epochs, reset after
    each), with its first batch taken; `phases` gets the seconds of the definition, `build()`, and the iterator's
    making and first batch. DALI's iterator copies each batch into a new torch tensor; headrace's hands the batch
    over (DLPack), so in training the two hold different numbers of batches."""
    import torch

    if lib.name == "dali":
        from nvidia.dali.plugin.pytorch import DALIGenericIterator
    else:
        from headrace_torch import DALIGenericIterator
    pipe, define_s, build_s = defined_and_built(lib, body, data, hw_load, batch, threads)
    built = time.perf_counter()
    loop = DALIGenericIterator([pipe], ["data", "label"], reader_name="Reader", auto_reset=True)
    next(loop)
    torch.cuda.synchronize()
    phases.update(define_s=define_s, build_s=build_s, run_s=time.perf_counter() - built)
    return pipe, loop


def iterator_rate(loop, epochs: int) -> float:
    """Images a second over `epochs` epochs through a PyTorch iterator (the rest of the current one first)."""
    import torch

    start, count = time.perf_counter(), 0
    for _ in range(epochs):  # next() to the epoch's end (auto_reset starts the next): `for` would reset at once
        while (outputs := next(loop, None)) is not None:
            count += outputs[0]["data"].shape[0]
    torch.cuda.synchronize()
    return count / (time.perf_counter() - start)


def give_back(pipes: dict) -> None:
    """Drop both pipelines and return their pools to the device, so the next case's memory starts from nothing:
    DALI keeps a process-wide pool that outlives its pipelines until ReleaseUnusedMemory()."""
    for pipe in pipes.values():
        if hasattr(pipe, "release_memory"):
            pipe.release_memory()
    pipes.clear()
    gc.collect()
    from nvidia.dali import backend

    backend.ReleaseUnusedMemory()


def held_detail(pipe) -> dict:
    """Where headrace's pipeline holds GPU memory (MiB): its small and large pools, each per-batch purpose,
    nvImageCodec's buffers where they come from headrace's pool (executor option decoder_memory='pool'), and CuPy's
    default pool where anything was allocated outside the pipeline's allocator."""
    memory = pipe._executor.gpu.ctx.memory
    detail = {"small": memory.small.total_bytes(), "large": memory.large.total_bytes()}
    for purpose, entry in memory.per_batch.items():
        detail[purpose] = sum(pool.total_bytes() for pool in entry.pools())
    from headrace_kernels.nvimgcodec_memory import DecoderMemory

    reserved = sum(DecoderMemory.reserved().values())  # nvImageCodec's own buffers, with decoder_memory=pool
    if reserved:
        detail["nvImageCodec's buffers"] = reserved
    import cupy

    stray = cupy.get_default_memory_pool().total_bytes()  # CuPy allocations made outside the pipeline's allocator
    if stray:
        detail["CuPy's default pool"] = stray
    return {name: round(size / 2**20) for name, size in detail.items()}


def limit_decode_lanes(lanes: int | None) -> None:
    """At most `lanes` decode lanes in headrace's mixed decoders built from now on (each lane has an nvImageCodec
    decoder of its own, with its own device buffers): what the second lane costs in GPU memory and gains in rate."""
    if lanes is None:
        return
    from headrace_kernels.gpu.decode import MixedDecoder

    default = MixedDecoder.lane_count
    MixedDecoder.lane_count = lambda self: min(lanes, default(self))


def warm_up_with(size: int | None) -> None:
    """headrace's mixed decoders built from now on warm up on a batch of `size` x `size` JPEGs instead of their
    16 x 16 ones (0: no warm-up batch): whether the warm-up image sends the first call to nvImageCodec's CUDA decoder
    at hw_decoder_load 1.0, whose buffers DALI, never calling it there, does not have."""
    if size is None:
        return
    import io

    import numpy as np
    from PIL import Image

    from headrace_kernels.gpu import decode

    if size == 0:
        decode.MixedDecoder._warm_up = lambda self, decoder, capacity, stream: None
        return
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), (120, 130, 140)).save(buffer, format="JPEG", quality=90)
    image = np.frombuffer(buffer.getvalue(), np.uint8)
    decode.tiny_jpeg = lambda: image


def first_batch_profile(rows: int) -> dict:
    """What the profiler (yappi, wall clock, every thread, C functions included) saw since it started: the main
    thread's functions by total time, and every thread's by own time (seconds)."""
    import yappi

    yappi.stop()
    main = next(t.id for t in yappi.get_thread_stats() if t.name == "_MainThread")

    def listed(stats, key: str, waits: bool) -> list:
        stats.sort(key, "desc")
        kept = (s for s in stats if waits or not any(word in s.name for word in IDLE_CALLS))
        return [[f"{Path(s.module).name}:{s.lineno} {s.name}", s.ncall, round(s.ttot, 3), round(s.tsub, 3)]
                for s, _ in zip(kept, range(rows), strict=False)]

    return {"main thread, by total": listed(yappi.get_func_stats(filter={"ctx_id": main}), "ttot", True),
            "all threads, by own time, waits left out": listed(yappi.get_func_stats(), "tsub", False)}


IDLE_CALLS = ("acquire", "sleep", "wait", "select", "poll")
"""Calls whose own time is a thread waiting (a pool's idle workers), left out of the profile's own-time view."""


def fresh_child(lib_name: str, case: str, data: str, batch: int, threads: int, epochs: int,
                executor: dict[str, str] | None = None, profile: int = 0, iterate: bool = False) -> dict:
    """One library's pipeline alone in this (new) process: import + build + first batch seconds (and each phase's),
    and the GPU memory (MiB above the CUDA context) after a warm-up epoch, after `epochs` more, after giving back
    what is unused and after dropping the pipeline. `profile` > 0: that many rows of a profile of import to first
    batch (its times inflated by the profiler: compare the phases of runs without it). `iterate`: the batches go
    through the library's PyTorch iterator (`iterated`), as a training loop takes them."""
    import cupy

    cupy.cuda.runtime.memGetInfo()  # the CUDA context, which both libraries need, is the baseline
    if iterate:
        import torch

        torch.zeros(1, device="cuda")  # torch's own CUDA state, which both iterators need, too
    base = device_used_mib()
    feed, phases = feed_for(case, data, batch), {}  # the caller's encoded bytes, read before the clock starts
    if profile:
        import yappi

        yappi.set_clock_type("wall")
        yappi.start(builtins=True, profile_threads=True)
    start = time.perf_counter()
    lib = Library(lib_name, executor=executor)
    imported = time.perf_counter()
    body, load = CASES[case]
    count = sum(1 for p in Path(data).rglob("*") if p.is_file())
    batches = -(-count // batch)
    if iterate:
        pipe, loop = iterated(lib, body, data, load, batch, threads, phases)
        run_epochs = functools.partial(iterator_rate, loop)
        del loop
    else:
        pipe = build(lib, body, data, load, batch, threads, feed, phases)[0]
        run_epochs = functools.partial(epoch_rate, pipe, batches, feed=feed)
    first = time.perf_counter()
    profiled = first_batch_profile(profile) if profile else None
    run_epochs(1)
    warm = device_used_mib() - base
    rate = run_epochs(epochs)
    later = device_used_mib() - base
    result = {"import_s": imported - start, "first_s": first - start, **phases, "warm_mib": warm,
              "later_mib": later, "rate": rate}
    if profiled:
        result["profile"] = profiled
    del run_epochs  # the iterator with it
    if iterate:
        gc.collect()
        torch.cuda.empty_cache()  # the iterators' torch tensors that nothing holds any more
    if lib_name == "headrace":
        result["held"] = held_detail(pipe)
        pipe.release_memory()
        result["released_mib"] = device_used_mib() - base
        pipe.close()
        del pipe
        gc.collect()
    else:
        from nvidia.dali import backend

        backend.ReleaseUnusedMemory()
        result["released_mib"] = device_used_mib() - base
        del pipe
        gc.collect()
        backend.ReleaseUnusedMemory()
    result["closed_mib"] = device_used_mib() - base
    return result


def fresh_run(args, lib: str, case: str, data: str, profile: int = 0) -> dict | None:
    """fresh_child's result from a new process (None, with its output printed, where it failed)."""
    extra = [] if args.headrace_lanes is None else ["--headrace-lanes", str(args.headrace_lanes)]
    if args.headrace_warm_up_size is not None:
        extra += ["--headrace-warm-up-size", str(args.headrace_warm_up_size)]
    if args.headrace_executor:
        extra += ["--headrace-executor", *args.headrace_executor]
    if profile:
        extra += ["--profile-first", str(profile)]
    if args.iterator:
        extra += ["--iterator"]
    done = subprocess.run([sys.executable, __file__, "--child", lib, case, "--data", data, "--batch-size",
                           str(args.batch_size), "--threads", str(args.threads), "--epochs", str(args.epochs), *extra],
                          capture_output=True, text=True, timeout=900)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        print(f"{case} {lib}: failed\n{done.stdout[-2000:]}{done.stderr[-3000:]}", flush=True)
        return None
    return json.loads(line[7:])


def print_profile(case: str, lib: str, profile: dict) -> None:
    for title, rows in profile.items():
        print(f"  {case}, {lib}, import to first batch under the profiler, {title} (calls, total s, own s):")
        for name, calls, total, own in rows:
            print(f"    {total:7.3f} {own:7.3f} {calls:>7} {name}")


def fresh_processes(args, data: str) -> None:
    """Each library's pipeline of each case in a new process of its own, alternating the libraries; then, with
    --profile-first, one more process each under the profiler (not in the medians)."""
    rows = []
    for case in args.cases:
        results: dict[str, list[dict]] = {lib: [] for lib in args.libs}
        for repeat in range(args.repeats):
            for lib in args.libs if repeat % 2 == 0 else args.libs[::-1]:
                result = fresh_run(args, lib, case, data)
                if result is not None:
                    results[lib].append(result)
                    print(f"{case} {lib}: {json.dumps(result)}", flush=True)
        profiles = {lib: fresh_run(args, lib, case, data, args.profile_first) for lib in args.libs} \
            if args.profile_first else {}
        rows.append((case, results, profiles))
    print(f"\nbatch {args.batch_size}, {args.threads} threads, each pipeline alone in a new process ({args.repeats} "
          "each); medians")
    print("| pipeline | library | import + build + first batch s | import s | define s | build() s | first run() s "
          f"| GPU MiB after 1 epoch | after {args.epochs + 1} | after release | after closing | img/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for case, results, profiles in rows:
        for lib, runs in results.items():
            if not runs:
                continue

            def med(key: str, runs=runs) -> float:
                return statistics.median(r[key] for r in runs)

            print(f"| {case} | {lib} | {med('first_s'):.2f} | {med('import_s'):.2f} | {med('define_s'):.2f} | "
                  f"{med('build_s'):.2f} | {med('run_s'):.2f} | {med('warm_mib'):+.0f} | {med('later_mib'):+.0f} | "
                  f"{med('released_mib'):+.0f} | {med('closed_mib'):+.0f} | {med('rate'):,.0f} |")
        held = [r["held"] for r in results.get("headrace", []) if "held" in r]
        if held:
            print(f"  headrace's pools after the epochs ({case}), MiB: {held[-1]}")
        for lib, profiled in profiles.items():
            if profiled is not None and "profile" in profiled:
                print(f"  {case}, {lib}, under the profiler: import {profiled['import_s']:.2f} s, define "
                      f"{profiled['define_s']:.2f}, build() {profiled['build_s']:.2f}, first run() "
                      f"{profiled['run_s']:.2f}")
                print_profile(case, lib, profiled["profile"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=12,
                        help="per round and side: a round of a few epochs measures the work a pipeline did ahead "
                             "while the other ran, not its steady rate (benchmarks/README.md)")
    parser.add_argument("--untimed", type=int, default=4, metavar="BATCHES",
                        help="batches each library runs before its timed round (default 4): the batches a pipeline "
                             "computed ahead while the other one's round ran are spent before the clock starts "
                             "(headrace's hold about 3: the queue's 2 and the look-ahead's)")
    parser.add_argument("--cases", nargs="+", default=PIPELINES, choices=list(CASES))
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: generate --images)")
    parser.add_argument("--fresh", action="store_true",
                        help="each pipeline alone in a new process: first batch and GPU memory, not the rates")
    parser.add_argument("--libs", nargs="+", default=["dali", "headrace"], choices=["dali", "headrace"])
    parser.add_argument("--repeats", type=int, default=2, help="--fresh: new processes per library and case")
    parser.add_argument("--headrace-huffman-threshold", type=int,
                        help="hybrid_huffman_threshold of headrace's decoders only (DALI keeps its default)")
    parser.add_argument("--headrace-lanes", type=int, choices=(1, 2),
                        help="at most this many decode lanes in headrace's decoders (2 at hw_decoder_load 1.0 by "
                             "default, each with a decoder of its own)")
    parser.add_argument("--headrace-warm-up-size", type=int,
                        help="headrace's decoders warm up on JPEGs of this many pixels a side (default 16; 0: none)")
    parser.add_argument("--headrace-executor", nargs="+", metavar="NAME=VALUE", default=[],
                        help="executor options of headrace's pipelines (e.g. decoder_memory=pool: nvImageCodec's own "
                             "buffers from a pool headrace counts)")
    parser.add_argument("--gc", choices=("default", "freeze", "off"), default="default",
                        help="Python's garbage collector during the rounds: as it is, gc.freeze() after the builds "
                             "(what exists then is never scanned again), or disabled")
    parser.add_argument("--profile-first", type=int, default=0, metavar="ROWS",
                        help="--fresh: then one more process per library and case under yappi (every thread, wall "
                             "clock), printing this many rows of where import to first batch went")
    parser.add_argument("--iterator", action="store_true",
                        help="--fresh: the batches go through each library's PyTorch iterator (DALIGenericIterator), "
                             "as in training: DALI's copies each batch into a torch tensor, headrace's hands it over")
    parser.add_argument("--child", nargs=2, metavar=("LIB", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit_decode_lanes(args.headrace_lanes)
    warm_up_with(args.headrace_warm_up_size)
    executor = dict(item.split("=", 1) for item in args.headrace_executor)
    if args.child:
        result = fresh_child(*args.child, args.data, args.batch_size, args.threads, args.epochs, executor,
                             args.profile_first, args.iterator)
        print("RESULT " + json.dumps(result), flush=True)
        return
    from headrace.data.synthetic import make_image_folder

    with tempfile.TemporaryDirectory() as scratch:
        data = args.data or str(make_image_folder(Path(scratch) / "images", args.images, 10, size=(375, 500),
                                                  progress=True))
        if args.fresh:
            fresh_processes(args, data)
            return
        ours = {} if args.headrace_huffman_threshold is None else \
            {"hybrid_huffman_threshold": args.headrace_huffman_threshold}
        libs = [Library("dali"), Library("headrace", ours, executor)]
        pauses = CollectorPauses()
        count = sum(1 for p in Path(data).rglob("*") if p.is_file())
        batches = -(-count // args.batch_size)
        rows = []
        for case in args.cases:
            body, load = CASES[case]
            pipes, firsts, memory = {}, {}, {}
            feeds = {lib.name: feed_for(case, data, args.batch_size) for lib in libs}
            for lib in libs:  # each built and warmed alone: its memory is what it added
                pipe, firsts[lib.name], built = build(lib, body, data, load, args.batch_size, args.threads,
                                                      feeds[lib.name])
                before = device_used_mib()
                epoch_rate(pipe, batches, 1, feed=feeds[lib.name])  # warm-up epoch
                pipes[lib.name], memory[lib.name] = pipe, built + device_used_mib() - before
            rates: dict[str, list[float]] = {lib.name: [] for lib in libs}
            cores: dict[str, list[float]] = {lib.name: [] for lib in libs}
            if args.gc == "freeze":
                gc.freeze()
            elif args.gc == "off":
                gc.disable()
            for round_ in range(args.rounds):
                for lib in libs if round_ % 2 == 0 else libs[::-1]:
                    for _ in range(args.untimed):
                        next_batch(pipes[lib.name], feeds[lib.name])
                    pauses.start()
                    rates[lib.name].append(epoch_rate(pipes[lib.name], batches, args.epochs, cores[lib.name],
                                                      feeds[lib.name]))
                    pauses.stop(lib.name)
                print(f"{case} round {round_}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()),
                      flush=True)
            gc.enable()
            gc.unfreeze()
            print(f"{case}: Python collector (gc {args.gc}) during the rounds: {pauses.summary()}", flush=True)
            dali, ours = statistics.median(rates["dali"]), statistics.median(rates["headrace"])
            rows.append((case, dali, ours, firsts, memory, {k: statistics.median(v) for k, v in cores.items()}))
            give_back(pipes)
    print(f"\n{count} JPEGs, batch {args.batch_size}, {args.threads} threads, {args.rounds} rounds x {args.epochs} "
          "epochs per side; medians")
    print("| pipeline | DALI img/s | headrace img/s | headrace / DALI | first batch s (DALI / headrace) "
          "| GPU MiB after warm-up (DALI / headrace) | host CPU cores (DALI / headrace) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for case, dali, ours, firsts, memory, used in rows:
        verdict = "faster" if ours > dali else "slower"
        print(f"| {case} | {dali:,.0f} | {ours:,.0f} | {ours / dali:.2f} ({verdict}) | {firsts['dali']:.2f} / "
              f"{firsts['headrace']:.2f} | {memory['dali']:+.0f} / {memory['headrace']:+.0f} | "
              f"{used['dali']:.1f} / {used['headrace']:.1f} |")


if __name__ == "__main__":
    main()
