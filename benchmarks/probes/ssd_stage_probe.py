"""Which part of the SSD300 GPU pipeline holds headrace back against DALI's GPU build: the example's graph cut after
each stage (the CPU ops alone, + image_slice, + the image chain, the whole graph; also the whole-image decode and
other hw_decoder_load values), each cut built by both libraries in one process on the same files, alternating
rounds, medians and ratios; then headrace's GPU-stage host time per step for each cut. A probe for issue 20.

    python benchmarks/probes/ssd_stage_probe.py [--images 256] [--rounds 5] [--batches 1024] [--cuts cpu slice full]
                                                [--switch-intervals 0.005 0.001]

`--switch-intervals S ...` times headrace's cuts once per interpreter GIL switch interval in every round (the same
pipelines, the interval set before each measurement and put back after), so the intervals are compared in one
process; the executor option `switch_interval` would set it for the whole process at build.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ssd_pipeline as example  # noqa: E402
from process_use import process_use  # noqa: E402
from ssd_cpu import device_synchronizer  # noqa: E402
from stack_samples import StackSampler, print_counts  # noqa: E402

from headrace import ExecutorOptions  # noqa: E402


def reader_and_crop(fn):
    jpegs, bboxes, labels = fn.readers.coco(file_root=DATA["root"], annotations_file=DATA["annotations"], ltrb=True,
                                            ratio=True, skip_empty=True, shuffle_after_epoch=True, name="Reader")
    anchor, shape, bboxes, labels = fn.random_bbox_crop(
        bboxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0],
        bbox_layout="xyXY", allow_no_crop=True, num_attempts=1)
    return jpegs, anchor, shape, bboxes, labels


def image_chain(fn, types, images):
    """The example's image ops after the decode (flip, resize 300, hsv, brightness_contrast, crop_mirror_normalize)."""
    images = fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5))
    images = fn.resize(images, resize_x=300, resize_y=300)
    images = fn.hsv(images, hue=fn.random.uniform(range=[-0.5, 0.5]), saturation=fn.random.uniform(range=[0.5, 1.5]),
                    dtype=types.FLOAT)
    images = fn.brightness_contrast(images, brightness=fn.random.uniform(range=[0.875, 1.125]),
                                    contrast=fn.random.uniform(range=[0.5, 1.5]), contrast_center=128,
                                    dtype=types.UINT8)
    return fn.crop_mirror_normalize(images, crop=(300, 300), mean=example.MEAN, std=example.STD, mirror=0,
                                    dtype=types.FLOAT, output_layout="CHW")


def cut_cpu(fn, types):
    _, anchor, shape, bboxes, _ = reader_and_crop(fn)
    return anchor, shape, bboxes


def cut_slice(fn, types, load=0.65):
    jpegs, anchor, shape, _, _ = reader_and_crop(fn)
    return fn.decoders.image_slice(jpegs, anchor, shape, device="mixed", output_type=types.RGB, hw_decoder_load=load)


def cut_image(fn, types):
    jpegs, _, _, _, _ = reader_and_crop(fn)
    return fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)


def cut_chain(fn, types):
    return image_chain(fn, types, cut_slice(fn, types))


def cut_full(fn, types):
    return example.ssd300_training(fn, types, DATA["root"], DATA["annotations"], device="gpu")


CUTS = {"cpu": cut_cpu, "slice": cut_slice, "slice 1.0": lambda fn, types: cut_slice(fn, types, 1.0),
        "slice 0": lambda fn, types: cut_slice(fn, types, 0.0), "image": cut_image, "chain": cut_chain,
        "full": cut_full, "full ahead": cut_full, "full 2 threads": cut_full, "full 1 a run": cut_full,
        "full coalesced 4": cut_full, "full coalesced 8": cut_full, "full coalesced 16": cut_full,
        "full process": cut_full,
        "full at home": cut_full, "full queue 2": cut_full, "full pool": cut_full,
        "full near gpu": cut_full, "full huffman 0": cut_full, "full pool huffman 0": cut_full,
        "full parallel reads": cut_full, "full worker 2 ahead": cut_full, "full worker 3 ahead": cut_full,
        "full coalesced 16 worker 2 ahead": cut_full, "full plan process": cut_full,
        "full plan at home": cut_full, "full placed in gpu stage": cut_full}
DECODER_ATTRIBUTES = {"full ahead": {"ahead_from": 1}}
"""Cuts whose headrace build sets these attributes of its mixed decoders: every batch decoded ahead on a decode lane
(ahead_from 1; DALI's mixed stage always runs ahead)."""
THREADS = {"full 2 threads": 2}
"""Cuts built with their own num_threads (nvImageCodec's CPU threads too): headrace only."""
COALESCED = {"full 1 a run": 1, "full coalesced 4": 4, "full coalesced 8": 8, "full coalesced 16": 16}
"""Cuts whose headrace build runs that many batches as one in the GPU stage (executor option coalesce_batches;
the other cuts take its default)."""
PROCESS = {"full process": "on", "full at home": "off"}
"""Cuts whose headrace build runs its readers and CPU ops in a worker process or not (executor option cpu_process;
the other cuts take its default, 'auto': in a worker where batches coalesce with their CPU ops merged)."""
QUEUE_2 = {"full queue 2"}
"""Cuts whose headrace build hands out finished batches through a queue of 2 (the prefetch depth), not of a whole
coalesced run plus one: the prefetch thread waits for the consumer before it starts the next run."""
OPTIONS = {"full pool": {"decoder_memory": "pool"}, "full near gpu": {"cpu_affinity": "gpu"},
           "full pool huffman 0": {"decoder_memory": "pool"}, "full parallel reads": {"parallel_reads": "true"},
           "full worker 2 ahead": {"cpu_process_ahead": "2"}, "full worker 3 ahead": {"cpu_process_ahead": "3"},
           "full coalesced 16 worker 2 ahead": {"coalesce_batches": "16", "cpu_process_ahead": "2"},
           "full plan process": {"plan_process": "on"}, "full plan at home": {"plan_process": "off"},
           "full placed in gpu stage": {"place_in_gpu_stage": "true"}}
"""Cuts whose headrace build sets these executor options: nvImageCodec's own buffers from a CUDA memory pool, the
pipeline's threads on the GPU's NUMA node, the readers' files read on the pool's threads, the CPU stage's worker
asked for two or three runs beyond the one it answers (and with runs of 16 batches), the fused chain's host plans
computed in a helper process or not (plan_process; the other cuts take its default, 'auto': in the helper for this
pipeline), and those plans collected and placed by the GPU stage instead of the look-ahead (place_in_gpu_stage)."""
DECODER_ARGS = {"full huffman 0": {"hybrid_huffman_threshold": 0},
                "full pool huffman 0": {"hybrid_huffman_threshold": 0}}
"""Cuts whose headrace build gives its image decoder these arguments: Huffman decoding on the GPU for every image
the CUDA decoder takes (DALI's default leaves images under 10^6 pixels to the host threads; the same pixels)."""
HEADRACE_ONLY = set(DECODER_ATTRIBUTES) | set(THREADS) | set(COALESCED) | set(PROCESS) | \
    QUEUE_2 | set(OPTIONS) | set(DECODER_ARGS)
DATA: dict[str, str] = {}
WORKER_TIMINGS = ("waiting for the worker's answer", "the worker's compute", "from its answer to here",
                  "unpacking its answer", "the worker idle between answers")
"""The pipeline process's timings of its CPU stage's worker (CpuStageProcess.timings), seconds."""


def build(name: str, cut: str, batch_size: int, threads: int, executor: dict[str, str] | None = None):
    lib = example.library(name)
    given = {**(executor or {}), **({"coalesce_batches": str(COALESCED[cut])} if cut in COALESCED else {}),
             **({"cpu_process": PROCESS[cut]} if cut in PROCESS else {}),
             **OPTIONS.get(cut, {})}
    options = {"executor_options": ExecutorOptions.from_strings(given)} if name == "headrace" and given else {}

    fn = _WithDecoderArgs(lib.fn, DECODER_ARGS[cut]) if name == "headrace" and cut in DECODER_ARGS else lib.fn

    @lib.pipeline_def(batch_size=batch_size, num_threads=THREADS.get(cut, threads), device_id=0, seed=7, **options)
    def pipe():
        out = CUTS[cut](fn, lib.types)
        return out if isinstance(out, tuple) else (out,)

    built = pipe()
    built.build()
    if cut in QUEUE_2:
        built.prefetch_queue_depth = 3 - built._executor.batches_per_run  # the prefetcher's queue: 2 batches
    for kernel in built._executor.gpu.kernels() if cut in DECODER_ATTRIBUTES else ():
        if hasattr(kernel, "decoder"):
            for attribute, value in DECODER_ATTRIBUTES[cut].items():
                setattr(kernel.decoder, attribute, value)
    return built


class _WithDecoderArgs:
    """A library's `fn` whose `decoders.*` ops take these arguments too."""

    def __init__(self, fn, extra: dict):
        self._fn, self._extra = fn, extra

    def __getattr__(self, name: str):
        found = getattr(self._fn, name)
        if name != "decoders":
            return found
        return SimpleNamespace(**{op: functools.partial(getattr(found, op), **self._extra)
                                  for op in ("image", "image_crop", "image_slice", "image_random_crop")})


class ThreadTimes:
    """Wall time and the calling thread's CPU time of the GPU stage's parts (readers, the decoders' host half, the
    launches and plans ahead, each step), while in the `with` block: the stage's methods wrapped for the while."""

    PARTS = {"_readers": "readers and CPU ops", "_read_group": "readers and CPU ops", "_prepare": "decoders' host half",
             "launch_ahead": "launches ahead", "plan_ahead": "plans ahead"}

    def __init__(self):
        self.totals: dict[str, list[float]] = {}
        self._saved: list[tuple[object, str, object]] = []

    def _add(self, name: str, wall: float, cpu: float) -> None:
        total = self.totals.setdefault(name, [0.0, 0.0])
        total[0] += wall
        total[1] += cpu

    def _timed(self, owner, attribute: str, name_of) -> None:
        original = getattr(owner, attribute)
        self._saved.append((owner, attribute, original))

        def wrapper(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self._add(name_of(args), time.perf_counter() - wall, time.thread_time() - cpu)

        setattr(owner, attribute, wrapper)

    def __enter__(self) -> ThreadTimes:
        from headrace.engine import gpu_stage

        for attribute, name in self.PARTS.items():
            self._timed(gpu_stage.GpuStage, attribute, lambda args, name=name: name)
        self._timed(gpu_stage, "run_step", lambda args: f"step {args[0].node.schema.name}")
        return self

    def __exit__(self, *exc) -> None:
        for owner, attribute, original in reversed(self._saved):
            setattr(owner, attribute, original)


def print_yappi(pipe, batches: int, batch_size: int, sync, top: int = 25) -> None:
    """`batches` batches under yappi's CPU clock (every thread; it slows call-heavy Python 3-5x, so read shares, not
    times): each thread's CPU time, then the functions with the most own time in each of the three busiest."""
    import yappi

    yappi.set_clock_type("cpu")
    yappi.start(builtins=True)
    rate(pipe, batches, batch_size, sync)
    yappi.stop()
    print(f"  yappi, CPU ms per batch by thread ({batches} batches):")
    names = {t.native_id: t.name for t in threading.enumerate()} | {t.ident: t.name for t in threading.enumerate()}
    for thread in sorted(yappi.get_thread_stats(), key=lambda t: -t.ttot):
        print(f"    {names.get(thread.tid, names.get(thread.id, thread.name)):40} {thread.ttot / batches * 1e3:8.2f}")
    threads = sorted(yappi.get_thread_stats(), key=lambda t: -t.ttot)
    for thread in threads[:3]:
        name = names.get(thread.tid, names.get(thread.id, thread.name))
        print(f"  {name}: own CPU ms per batch, calls per batch, function ({thread.ttot / batches * 1e3:.2f} ms):")
        stats = yappi.get_func_stats(filter={"ctx_id": thread.id})
        for stat in sorted(stats, key=lambda f: -f.tsub)[:top]:
            where = f"{Path(stat.module).name}:{stat.lineno}" if stat.module else ""
            print(f"    {stat.tsub / batches * 1e3:7.3f} {stat.ncall / batches:7.1f}  {stat.name} ({where})")
    yappi.clear_stats()


def print_stacks(pipe, batches: int, batch_size: int, sync, interval: float = 0.0005, top: int = 12) -> None:
    """`batches` batches while every thread's Python stack is sampled each `interval` seconds: per thread, the
    innermost headrace or benchmark line of each sample, counted (stack_samples.py)."""
    with StackSampler(interval) as sampler:
        rate(pipe, batches, batch_size, sync)
    print_counts(sampler.samples, f"stack samples by thread ({batches} batches), innermost headrace line:", top)


def rate(pipe, batches: int, batch_size: int, sync) -> float:
    start = time.perf_counter()
    for _ in range(batches):
        pipe.run()
        sync()
    return batches * batch_size / (time.perf_counter() - start)


def at_interval(interval: float | None, measure, *args) -> float:
    """`measure(*args)` with the interpreter's GIL switch interval at `interval` seconds (None: as it is)."""
    if interval is None:
        return measure(*args)
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        return measure(*args)
    finally:
        sys.setswitchinterval(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=1024,
                        help="timed batches per round: a round of a few hundred batches measures the work a "
                             "pipeline did ahead while the other ran, not its steady rate (benchmarks/README.md)")
    parser.add_argument("--untimed", type=int, default=32,
                        help="batches run before each timed round: the work a pipeline holds ahead (headrace's SSD300: "
                             "about 25 batches), computed while the other one's round ran, is spent first")
    parser.add_argument("--cuts", nargs="+", default=["cpu", "slice", "chain", "full"], choices=list(CUTS))
    parser.add_argument("--yappi", type=int, default=0, metavar="BATCHES",
                        help="also profile that many batches of each headrace cut with yappi (CPU time, every thread)")
    parser.add_argument("--stacks", type=int, default=0, metavar="BATCHES",
                        help="also sample every thread's Python stack over that many batches of each headrace cut")
    parser.add_argument("--executor", nargs="*", default=[], metavar="NAME=VALUE",
                        help="executor options of the headrace builds (switch_interval=0.0005, lookahead=after)")
    parser.add_argument("--libs", nargs="+", default=["headrace", "dali"], choices=["headrace", "dali"])
    parser.add_argument("--switch-intervals", nargs="*", type=float, default=[], metavar="SECONDS",
                        help="time headrace's cuts at each of these GIL switch intervals too (same process)")
    args = parser.parse_args()
    sync = device_synchronizer()
    with tempfile.TemporaryDirectory() as scratch:
        DATA["root"], DATA["annotations"] = example.write_coco_set(scratch, args.images, size=(480, 640))
        executor = dict(item.split("=", 1) for item in args.executor)
        pipes = {(lib, cut): build(lib, cut, args.batch_size, args.threads, executor) for cut in args.cuts
                 for lib in args.libs
                 if lib == "headrace" or cut not in HEADRACE_ONLY}
        for pipe in pipes.values():
            rate(pipe, 8, args.batch_size, sync)  # warm-up
        rates: dict[tuple[str, str], list[float]] = {key: [] for key in pipes}
        intervals = {f"headrace@{s * 1e3:g}ms": s for s in args.switch_intervals} if "headrace" in args.libs else {}
        for cut in args.cuts:
            for name in intervals:
                rates[(name, cut)] = []
        runs = list(args.libs) + list(intervals)
        for round_ in range(args.rounds):
            for cut in args.cuts:
                for lib in runs if round_ % 2 == 0 else runs[::-1]:
                    pipe = pipes.get(("headrace", cut) if lib in intervals else (lib, cut))
                    if pipe is not None:
                        rate(pipe, args.untimed, args.batch_size, sync)
                        rates[(lib, cut)].append(at_interval(intervals.get(lib), rate, pipe, args.batches,
                                                             args.batch_size, sync))
            print(f"round {round_}: " + "  ".join(f"{lib} {cut} {r[-1]:.0f}" for (lib, cut), r in rates.items()
                                                  if r), flush=True)
        print(f"\nimages/s, median of {args.rounds} alternating rounds, batch {args.batch_size}, "
              f"{args.threads} threads, interpreter switch interval {sys.getswitchinterval() * 1e3:g} ms")
        for cut in args.cuts:
            medians = {lib: statistics.median(rates[(lib, cut)]) for lib in runs if rates.get((lib, cut))}
            ratio = f"  headrace / DALI {medians['headrace'] / medians['dali']:.2f}x" \
                if "headrace" in medians and "dali" in medians else ""
            against = "".join(f"  {name} / headrace {medians[name] / medians['headrace']:.2f}x" for name in intervals
                              if name in medians and "headrace" in medians)
            print(f"  {cut:10s} " + "  ".join(f"{lib} {m:8.0f}" for lib, m in medians.items()) + ratio + against)
        if "headrace" in args.libs:
            for cut in args.cuts:
                pipe = pipes[("headrace", cut)]
                stage = pipe._executor.gpu
                if stage is None:  # the CPU ops alone: no GPU stage
                    continue
                # a few runs first: the answers the worker computed before the other cuts' rounds would count that
                # pause as its idle time and as their time from its answer to here
                rate(pipe, 4 * pipe._executor.batches_per_run, args.batch_size, sync)
                stage.timings.clear()
                worker = getattr(stage.reads, "timings", None)  # the CPU stage's worker process (cpu_process)
                if worker is not None:
                    worker.clear()
                pids = {"this process": os.getpid()}
                if getattr(stage.reads, "pid", None):
                    pids["the worker"] = stage.reads.pid
                before = {name: process_use(pid) for name, pid in pids.items()}
                with ThreadTimes() as times:
                    got = rate(pipe, args.batches, args.batch_size, sync)
                used = {name: [(b - a) / args.batches for a, b in zip(before[name], process_use(pid), strict=True)]
                        for name, pid in pids.items()}
                print(f"\nheadrace {cut}: {got:.0f} img/s; a batch: " + "; ".join(
                    f"{name} {faults:.0f} page faults, {cpu * 1e3:.2f} CPU ms" for name, (faults, cpu) in used.items()))
                print("host ms per batch:")
                for name, total in sorted(stage.timings.items(), key=lambda kv: -kv[1]):
                    print(f"  {name:50} {total / args.batches * 1e3:8.2f}")
                if worker:
                    waited, computed, came, unpacked, idle = (worker[key] / args.batches * 1e3
                                                              for key in WORKER_TIMINGS)
                    print(f"  the CPU stage's worker, ms per batch: waiting for its answers {waited:.2f}; its compute "
                          f"{computed:.2f}; idle between answers {idle:.2f}; from its answer to the readers' thread "
                          f"{came:.2f}; unpacking {unpacked:.2f}; {worker['blocks mapped']} shared blocks mapped")
                print("  wall / CPU time of its own thread (the rest: waiting for the GIL, the device, a lock), "
                      "ms per batch:")
                for name, (wall, cpu) in sorted(times.totals.items(), key=lambda kv: -kv[1][0]):
                    print(f"  {name:50} {wall / args.batches * 1e3:8.2f} {cpu / args.batches * 1e3:8.2f}")
                if args.yappi:
                    print_yappi(pipe, args.yappi, args.batch_size, sync)
                if args.stacks:
                    print_stacks(pipe, args.stacks, args.batch_size, sync)
        for pipe in pipes.values():
            if hasattr(pipe, "close"):
                pipe.close()


if __name__ == "__main__":
    main()
