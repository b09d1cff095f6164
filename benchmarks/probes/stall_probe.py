"""Where headrace's slow rounds go (issue 27: RN50 train at hw_decoder_load 1.0 scatters 14k-28k img/s between
rounds where DALI's holds). gpu_vs_dali.py's pipeline, each library's built once, alternating rounds; every batch's
time (when `run()` hands it out), so a slow round shows as a few long batches or as every batch a little slower.
For headrace also, per batch: the GPU stage's host time per part, Python's collections, and (--stacks) every
thread's stack samples, split between the slow batches (over `--slow` x the median) and the rest. Each `--variant`
adds headrace's pipeline with other decoder arguments or executor options to the same rounds (an A/B in one process).

    python benchmarks/probes/stall_probe.py [--case "train 1.0"] [--images 2048] [--rounds 9] [--batches 24]
    python benchmarks/probes/stall_probe.py --rounds 12 --variant cpu_affinity=gpu --variant decoder_memory=pool
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cupti_trace import SYNC_CALLS, CuptiTrace
from gpu_vs_dali import CASES, Library, build, epoch_rate
from stack_samples import StackSampler, print_counts


class BatchLog:
    """Per round, the time each batch was handed out with the GPU stage's part timings (headrace) and the device's
    free memory at that moment (allocations and frees between batches: a library's own, or its decoder's); and the
    collections that ran (start, seconds, generation)."""

    def __init__(self):
        self.rounds: list[list[tuple[float, Counter, int]]] = []
        self.collections: list[tuple[float, float, int]] = []
        self._began = 0.0

    def on_collection(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.collections.append((self._began, time.perf_counter() - self._began, info["generation"]))

    def run(self, pipe, batches: int) -> float:
        """`batches` batches, each one's end logged as a round; images per second over them."""
        import cupy

        free = cupy.cuda.runtime.memGetInfo
        stage = getattr(getattr(pipe, "_executor", None), "gpu", None)
        timings = stage.timings if stage is not None else {}
        start = time.perf_counter()
        ends = [(start, Counter(timings), free()[0])]
        count = 0
        for _ in range(batches):
            out = pipe.run()
            count += len(out[0])
            ends.append((time.perf_counter(), Counter(timings), free()[0]))
        out[0].as_cpu()  # waits for the last batch
        ends[-1] = (time.perf_counter(), *ends[-1][1:])
        self.rounds.append(ends)
        return count / (ends[-1][0] - start)

    def batches(self) -> list[tuple[float, float, Counter, int]]:
        """(start, seconds, part seconds, change of the device's free bytes) of each batch but each round's first
        (computed ahead, while the other library ran) and last (it waits for a copy to the host)."""
        return [(ends[i - 1][0], ends[i][0] - ends[i - 1][0], ends[i][1] - ends[i - 1][1], ends[i][2] - ends[i - 1][2])
                for ends in self.rounds for i in range(2, len(ends) - 1)]


def summarize(name: str, log: BatchLog, slow_factor: float, batch: int) -> list[tuple[float, float]]:
    """Print the batch times' spread, the slow batches and, for headrace, the parts' time in slow batches against
    the rest; how often the device's free memory moved; returns the slow batches' (start, end)."""
    rows = log.batches()
    times = sorted(row[1] for row in rows)
    median = statistics.median(times)
    pick = [times[min(len(times) - 1, int(q * len(times)))] * 1e3 for q in (0.1, 0.5, 0.9, 0.99)]
    slow = [row for row in rows if row[1] > slow_factor * median]
    fast = [row for row in rows if row[1] <= slow_factor * median]
    share = sum(row[1] for row in slow) / sum(times)
    print(f"\n{name}: {len(rows)} batches, ms p10 {pick[0]:.2f} p50 {pick[1]:.2f} p90 {pick[2]:.2f} p99 {pick[3]:.2f} "
          f"max {times[-1] * 1e3:.2f}; {len(slow)} over {slow_factor} x the median, {share:.1%} of the time "
          f"(at the median's pace: {batch / median:,.0f} img/s)")
    if slow:
        print("  slowest: " + ", ".join(f"{s * 1e3:.1f}" for s in sorted((row[1] for row in slow), reverse=True)[:16])
              + " ms")
    if slow and any(row[2] for row in rows):
        names = sorted({k for row in rows for k in row[2]})
        print(f"  {'GPU stage host ms per batch':78} {'slow':>8} {'rest':>8}")
        for key in names:
            mean_slow = sum(row[2][key] for row in slow) / len(slow) * 1e3
            mean_fast = sum(row[2][key] for row in fast) / max(1, len(fast)) * 1e3
            print(f"  {key:78} {mean_slow:8.2f} {mean_fast:8.2f}")
    moved = [row for row in rows if row[3]]
    print(f"  device free memory moved in {len(moved)} of {len(rows)} batches ({sum(1 for row in slow if row[3])} of "
          f"the {len(slow)} slow ones); largest moves " +
          ", ".join(f"{row[3] / 2**20:+.1f}" for row in sorted(moved, key=lambda r: -abs(r[3]))[:8]) + " MiB")
    overlapping = [c for c in log.collections
                   if any(row[0] <= c[0] + c[1] and c[0] <= row[0] + row[1] for row in slow)]
    full = sum(1 for c in log.collections if c[2] == 2)
    print(f"  collections: {len(log.collections)} ({full} full, {sum(c[1] for c in log.collections) * 1e3:.0f} ms); "
          f"during slow batches {len(overlapping)} ({sum(c[1] for c in overlapping) * 1e3:.0f} ms)")
    return [(row[0], row[0] + row[1]) for row in slow]


class LaneTimes:
    """Wall seconds of each part decoded on headrace's decode lanes (DecodeLane._run wrapped while in the block):
    whether a slow round's decodes themselves took longer."""

    def __init__(self):
        self.parts: list[float] = []

    def __enter__(self) -> LaneTimes:
        from headrace_kernels.gpu.decode_lanes import DecodeLane

        self._original = original = DecodeLane._run

        def timed(lane, work):
            start = time.perf_counter()
            try:
                return original(lane, work)
            finally:
                self.parts.append(time.perf_counter() - start)

        DecodeLane._run = timed
        return self

    def __exit__(self, *exc) -> None:
        from headrace_kernels.gpu.decode_lanes import DecodeLane

        DecodeLane._run = self._original

    def take(self) -> str:
        parts, self.parts = self.parts, []
        return f", lane parts {len(parts)} x {statistics.mean(parts) * 1e3:.2f} ms" if parts else ""


def machine_times() -> tuple[float, float, float]:
    """This process's CPU seconds, and the machine's (all cores) busy and stolen seconds, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    busy = (sum(fields[:3]) + sum(fields[5:7])) / tick  # user, nice, system, irq, softirq
    steal = fields[7] / tick if len(fields) > 7 else 0.0
    used = os.times()
    return used.user + used.system, busy, steal


def process_counts() -> tuple[int, int, int]:
    """This process's minor page faults and voluntary and involuntary context switches so far (getrusage): page
    faults take the address space's lock that mmap and munmap take too, and a thread that waits switches."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_nvcsw, usage.ru_nivcsw


def print_topology(device_id: int = 0) -> None:
    """The machine's NUMA nodes and their CPUs, the CPUs sysfs lists as local to the GPU, and the first CPU's SMT
    siblings: where the scheduler may put a pipeline's threads (executor option cpu_affinity)."""
    import cupy

    from headrace_kernels.gpu.affinity import gpu_cpus

    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    listed = ", ".join(f"{n.name} {(n / 'cpulist').read_text().strip()}" for n in nodes) or "none listed"
    bus = cupy.cuda.Device(device_id).pci_bus_id.lower()
    local = Path("/sys/bus/pci/devices") / bus / "local_cpulist"
    siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    print(f"CPUs {sorted(os.sched_getaffinity(0))}; NUMA {listed}; GPU {bus} local "
          f"{local.read_text().strip() if local.exists() else '?'} (cpu_affinity='gpu' keeps threads on "
          f"{sorted(gpu_cpus(device_id) or []) or 'nothing: no choice'}); cpu0's SMT siblings "
          f"{siblings.read_text().strip() if siblings.exists() else '?'}", flush=True)


def one_round(name: str, pipe, log: BatchLog, rates: list[float], batches: int, lanes: LaneTimes,
              sampler: StackSampler | None) -> str:
    """One library's round: its rate appended to `rates`; what it used (wall clock when it began, cores of this
    process and of the machine, stolen cores, headrace's lane parts) as text."""
    before, counts, began, clock = machine_times(), process_counts(), time.perf_counter(), time.time()
    gc.callbacks.append(log.on_collection)
    try:
        with sampler or contextlib.nullcontext():
            rates.append(log.run(pipe, batches))
    finally:
        gc.callbacks.remove(log.on_collection)
    wall = time.perf_counter() - began
    used = [b - a for a, b in zip(before, machine_times(), strict=True)]
    faults, waits, preempted = (round((b - a) / batches) for a, b in zip(counts, process_counts(), strict=True))
    when = time.strftime("%H:%M:%S", time.localtime(clock)) + f"{clock % 1:.2f}"[1:]
    return (f"{name} {rates[-1]:,.0f} (at {when}, process {used[0] / wall:.1f} cores, machine {used[1] / wall:.1f}, "
            f"stolen {used[2] / wall:.2f}; a batch: {faults} page faults, {waits} + {preempted} context switches"
            f"{lanes.take() if name != 'dali' else ''})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="train 1.0", choices=list(CASES))
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: generate --images)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batches", type=int, default=96, help="per round and library (about a second)")
    parser.add_argument("--slow", type=float, default=1.5, help="a batch is slow over this many times the median")
    parser.add_argument("--libs", nargs="+", default=["headrace", "dali"], choices=["headrace", "dali"])
    parser.add_argument("--variant", nargs="+", action="append", default=[], metavar="NAME=VALUE",
                        help="also headrace's pipeline with these decoder arguments (preallocate_width_hint=500) and "
                        "executor options (decoder_memory=pool), in the same rounds; repeat for more variants; lanes=N "
                        "splits its large batches over N decode lanes, pinned=1 hands nvImageCodec the encoded "
                        "bytes in pinned host memory")
    parser.add_argument("--stacks", action="store_true", help="sample every thread's stack while headrace runs")
    parser.add_argument("--cupy-events", action="store_true",
                        help="record and wait for events through CuPy, which holds the interpreter lock meanwhile, "
                        "instead of headrace_kernels.gpu.events (an A/B between two processes)")
    parser.add_argument("--executor", nargs="*", default=[], metavar="NAME=VALUE",
                        help="executor options of headrace's pipeline")
    parser.add_argument("--cupti", nargs="*", metavar="NAME_PART",
                        help="record CUDA calls with CUPTI (cupti-python) and compare headrace's batches in its slow "
                        "rounds (under 0.8 x its median rate) with the rest: the calls whose names hold one of these "
                        "parts (default: the synchronizing ones, cupti_trace.SYNC_CALLS), or 'all': every call, "
                        "kernel and copy (which slowed the pipelines 3-10x)")
    args = parser.parse_args()
    from headrace.data.synthetic import make_image_folder

    body, load = CASES[args.case]
    if args.cupy_events:
        from headrace_kernels.gpu import events

        events.record = lambda stream: stream.record()
        events.wait = lambda stream, event: stream.wait_event(event)
    print_topology()
    with tempfile.TemporaryDirectory() as scratch:
        data = args.data or str(make_image_folder(Path(scratch) / "images", args.images, 10, size=(375, 500),
                                                  progress=True))
        count = sum(1 for p in Path(data).rglob("*") if p.is_file())
        from headrace import ExecutorOptions

        executor = dict(item.split("=", 1) for item in args.executor)
        libs = {name: Library(name) for name in args.libs}
        executors = {"headrace": executor}
        known = {field.name for field in dataclasses.fields(ExecutorOptions)}
        hooks: dict[str, dict] = {}  # a variant's settings of its mixed decoders themselves (DECODER_HOOKS)
        for items in args.variant:
            given = dict(item.split("=", 1) for item in items)
            name = "headrace[" + " ".join(items) + "]"
            executors[name] = {**executor, **{k: v for k, v in given.items() if k in known}}
            hooks[name] = dict(DECODER_HOOKS[k](given.pop(k)) for k in list(given) if k in DECODER_HOOKS)
            libs[name] = Library("headrace", {k: _value(v) for k, v in given.items() if k not in known})
        order = list(libs)
        pipes = {}
        for name, lib in libs.items():
            chosen = executors.get(name, {})
            if chosen:
                lib.pipeline_def = _with_options(lib.pipeline_def, ExecutorOptions.from_strings(chosen))
            pipes[name] = build(lib, body, data, load, args.batch_size, args.threads)[0]
            if hooks.get(name):
                decoders = [k.decoder for k in pipes[name]._executor.gpu.kernels() if hasattr(k, "decoder")]
                for decoder in decoders:
                    for attribute, value in hooks[name].items():
                        setattr(decoder, attribute, value)
                print(f"{name}: {len(decoders)} mixed decoder(s) changed")
            epoch_rate(pipes[name], -(-count // args.batch_size), 1)  # warm-up epoch
        logs = {name: BatchLog() for name in libs}
        rates: dict[str, list[float]] = {name: [] for name in libs}
        sampler = StackSampler() if args.stacks else None
        trace = None
        if args.cupti is not None:
            try:
                trace = CuptiTrace() if args.cupti == ["all"] else CuptiTrace(calls=tuple(args.cupti) or SYNC_CALLS)
            except Exception as exc:  # noqa: BLE001 - no cupti-python or libcupti here: run without the trace
                print(f"no CUPTI trace: {type(exc).__name__}: {exc}")
        with LaneTimes() as lanes, trace or contextlib.nullcontext():
            for round_ in range(args.rounds):
                notes = [one_round(name, pipes[name], logs[name], rates[name], args.batches, lanes,
                                   sampler if name == "headrace" else None)
                         for name in (order if round_ % 2 == 0 else order[::-1])]
                print(f"round {round_}: " + ", ".join(notes), flush=True)
        medians = {name: statistics.median(r) for name, r in rates.items()}
        print(f"\n{args.case}, {count} JPEGs, batch {args.batch_size}: medians " +
              ", ".join(f"{k} {v:,.0f} img/s" for k, v in medians.items()) +
              "".join(f", {name} / DALI {medians[name] / medians['dali']:.2f}x" for name in medians
                      if "dali" in medians and name != "dali"))
        slow = {name: summarize(name, logs[name], args.slow, args.batch_size) for name in libs}
        if sampler is not None and sampler.samples:
            spans = slow.get("headrace", [])
            in_slow = [s for s in sampler.samples if any(a <= s[0] <= b for a, b in spans)]
            rest = [s for s in sampler.samples if not any(a <= s[0] <= b for a, b in spans)]
            print()
            print_counts(in_slow, f"headrace's stack samples during its slow batches ({len(spans)}):", 10)
            print_counts(rest, "headrace's stack samples during the rest:", 10)
        if trace is not None:
            trace.compare(*round_spans(logs["headrace"], rates["headrace"]))
        for pipe in pipes.values():
            if hasattr(pipe, "close"):
                pipe.close()


DECODER_HOOKS = {"lanes": lambda text: ("lane_count", lambda n=int(text): n),
                 "pinned": lambda text: ("pinned_input", bool(int(text)))}
"""Variant settings that change a built pipeline's MixedDecoder objects: `lanes=N` splits large batches over N
decode lanes, `pinned=1` hands nvImageCodec the encoded bytes in pinned host memory."""


def round_spans(log: BatchLog, rates: list[float], cut: float = 0.8) -> tuple[list, list]:
    """The (start, end) of every batch of the rounds under `cut` x the median rate, and of the other rounds'."""
    median = statistics.median(rates)
    slow, rest = [], []
    for ends, rate in zip(log.rounds, rates, strict=True):
        spans = [(ends[i - 1][0], ends[i][0]) for i in range(2, len(ends) - 1)]
        (slow if rate < cut * median else rest).extend(spans)
    return slow, rest


def _value(text: str) -> bool | int | float:
    """A decoder argument's value from the command line: true / false, an int or a float."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return float(text) if "." in text else int(text)


def _with_options(pipeline_def, options):
    """`pipeline_def` whose pipelines take these executor options."""
    def wrapped(*args, **kwargs):
        return pipeline_def(*args, executor_options=options, **kwargs)
    return wrapped


if __name__ == "__main__":
    main()
