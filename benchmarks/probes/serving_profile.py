"""Where a served batch spends its time, in process and without Triton: the preprocess pipeline through the backend's
BatchRunner (as `execute` runs it) next to `pipe.run` and the decoder alone, per batch size; `--phases` times the GPU
stage's parts, `--cprofile B` profiles one batch size, `--dali` times DALI's served model's own work beside them (the
same graph with DALI, its answers copied out: benchmarks/triton_dali).

    python benchmarks/probes/serving_profile.py [--device gpu] [--sizes 1 8 32] [--batches 200] [--phases]
                                                [--distinct-sizes N] [--gap-ms 0 1 3] [--cprofile 8] [--dali]
                                                [--timeline] [--pinned-input]
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from offline_timing import mixed_decoders, run_waited  # noqa: E402
from triton_helpers import dali_peer, distinct_jpegs, jpegs, served_preprocess  # noqa: E402

from headrace.serving.batching import BatchRunner, InputSpec  # noqa: E402


def dali_preprocess(device: str) -> object:
    """benchmarks/triton_dali's DaliPreprocess on `device`: what DALI's served model runs per execute."""
    return dali_peer().DaliPreprocess(32, 2, 0 if device == "gpu" else None, "TYPE_FP32", 1.0, [3, 224, 224])


def served_pipeline(device: str):
    """The served preprocess pipeline on `device`, built."""
    pipe = served_preprocess(device=device)
    pipe.build()
    return pipe


def per_batch_ms(call, batches: int, gap: float = 0.0) -> tuple[float, float]:
    """Median and 90th percentile of `call()` over `batches` calls, in ms, after 5 warm-up calls; `gap` seconds
    of sleep before each (a server at low load waits for its next request)."""
    for _ in range(5):
        call()
    times = []
    for _ in range(batches):
        if gap:
            time.sleep(gap)
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3), float(np.percentile(times, 90) * 1e3)


def decode_alone(decoder, ctx, encoded: list) -> None:
    """The pipeline's own GPU decoder on `encoded`, waited for: the floor under a served batch."""
    with ctx.active():
        prepared = decoder.prepare(encoded, 0, 0)
        decoder.allocate(prepared, ctx.stream)
        decoder.run(prepared, ctx.stream)
        ctx.stream.synchronize()


# (module, object name, function name, label): the GPU stage's parts that --phases times, nested as they call
PHASES = [("headrace.serving.batching", "BatchRunner", "_try_run", "the pipeline's run"),
          ("headrace.engine.gpu_stage", "GpuStage", "_cpu_stage", "CPU stage (fed inputs, parse, allocate)"),
          ("headrace_kernels.nvimgcodec_capi", None, "CodeStreams", "  parse (nvImageCodec C API)"),
          ("headrace_kernels.gpu.decode", "MixedDecoder", "start_here", "  start the decode in the CPU stage"),
          ("headrace_kernels.gpu.decode", "MixedDecoder", "run", "decode step"),
          ("headrace_kernels.nvimgcodec_capi", "Decoder", "start", "  start the decode"),
          ("headrace.engine.gpu_stage", "GpuStage", "plan_ahead", "  plan while it decodes"),
          ("headrace_kernels.gpu.plan_cache", "FusedPlanCache", "plan", "    plans kept by size"),
          ("headrace_kernels.gpu.image_ops", None, "plan_crop_mirror_normalize", "    plan anew"),
          ("headrace_kernels.gpu.image_ops", None, "place", "    outputs, records, tables to the device"),
          ("headrace_kernels.nvimgcodec_capi", "StartedDecode", "finish", "  wait for the decode"),
          ("headrace_kernels.gpu.image_ops", None, "launch", "resize + normalize launch"),
          ("headrace.engine.gpu_stage", "GpuStage", "_sync_previous", "wait for the batch before")]


def timed_phases(events: list | None = None) -> tuple[dict[str, float], list[str]]:
    """Wrap the PHASES functions with timers (a module function also where headrace imported it by name): the dict
    they add their seconds to, and the phases this version of headrace does not have; each call's (label, start,
    end) also goes to `events` where given."""
    seconds: dict[str, float] = {}
    missing = []
    for module_name, owner_name, name, label in PHASES:
        try:
            owner = importlib.import_module(module_name)
            owner = getattr(owner, owner_name) if owner_name else owner
            function = getattr(owner, name)
        except (ImportError, AttributeError):
            missing.append(".".join(filter(None, (module_name, owner_name, name))))
            continue
        seconds[label] = 0.0

        def wrapper(*args, _function=function, _label=label, **kwargs):
            start = time.perf_counter()
            try:
                return _function(*args, **kwargs)
            finally:
                end = time.perf_counter()
                seconds[_label] += end - start
                if events is not None:
                    events.append((_label, start, end))

        setattr(owner, name, wrapper)
        if owner_name is None:
            for module_name_, module in list(sys.modules.items()):
                if module_name_.startswith("headrace") and getattr(module, name, None) is function:
                    setattr(module, name, wrapper)
    return seconds, missing


def print_timeline(served, size: int, batches: int, events: list, gap: float = 0.0) -> None:
    """When each timed part of a served batch of `size` starts and ends, from the batch's start (medians over
    `batches`, each part's first call in its batch, `gap` seconds of sleep before each): what lies on the way
    from the request to its answer."""
    starts: dict[str, list[float]] = {}
    ends: dict[str, list[float]] = {}
    totals = []
    for _ in range(batches):
        if gap:
            time.sleep(gap)
        events.clear()
        begin = time.perf_counter()
        served(size)
        totals.append(time.perf_counter() - begin)
        seen = set()
        for label, start, end in events:
            if label not in seen:
                seen.add(label)
                starts.setdefault(label, []).append(start - begin)
                ends.setdefault(label, []).append(end - begin)
    after = f" after {gap * 1e3:g} ms idle" if gap else ""
    print(f"timeline of a served batch of {size}{after} (ms from its start, medians of {batches}; the whole batch "
          f"{np.median(totals) * 1e3:.3f}):")
    for label in sorted(starts, key=lambda k: np.median(starts[k])):
        print(f"  {np.median(starts[label]) * 1e3:7.3f} - {np.median(ends[label]) * 1e3:7.3f}  {label.strip()}"
              f"{'' if len(starts[label]) == batches else f' ({len(starts[label])} of the batches)'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--sizes", nargs="*", type=int, default=[1, 8, 32])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--cprofile", type=int, default=0, help="profile the runner at this batch size")
    parser.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"), help="cProfile's order")
    parser.add_argument("--dump", help="with --cprofile: also write the profile there (pstats' format)")
    parser.add_argument("--phases", action="store_true", help="time the GPU stage's parts per batch")
    parser.add_argument("--timeline", action="store_true",
                        help="with --phases: when each part of a served batch starts and ends, per batch size")
    parser.add_argument("--gap-ms", type=float, nargs="*", default=[0.0],
                        help="sleep this long before each batch (several: one row each); default none")
    parser.add_argument("--distinct-sizes", type=int, default=0,
                        help="cycle through N JPEGs of N sizes (default: two of 427x640, as triton_preprocess.py)")
    parser.add_argument("--dali", action="store_true", help="also time DALI's served model's work (DALI importable)")
    parser.add_argument("--pinned-input", action="store_true",
                        help="the mixed decoder reads the encoded bytes from pinned memory (MixedDecoder.pinned_input)")
    args = parser.parse_args(argv)

    pipe = served_pipeline(args.device)
    if args.pinned_input:
        for decoder in mixed_decoders(pipe):
            decoder.pinned_input = True
    runner = BatchRunner(pipe, [InputSpec("images", np.dtype(np.uint8), (-1,))], ["normalized"])
    images = distinct_jpegs(args.distinct_sizes) if args.distinct_sizes else [jpegs(5, seed=0)[4],
                                                                                jpegs(5, seed=1)[4]]
    turn = itertools.count()

    def batch(size: int) -> list[np.ndarray]:  # the next `size` images, cycling through them
        return [images[next(turn) % len(images)] for _ in range(size)]

    def direct(size):
        run_waited(pipe, images=batch(size))

    def served(size):
        runner.run([{"images": image[None]} for image in batch(size)])

    calls = [("pipe.run", direct), ("BatchRunner", served)]
    if args.dali:
        dali = dali_preprocess(args.device)
        calls.append(("DALI model", lambda size: dali(batch(size))))

    print(f"{args.device}: {'model':<12}{'batch':>6}{'p50 ms':>9}{'p90 ms':>9}{'img/s':>9}")
    for size in args.sizes:
        for gap in args.gap_ms:
            after = f" after {gap:g} ms idle" if gap else ""
            for label, call in calls:
                p50, p90 = per_batch_ms(lambda s=size, c=call: c(s), args.batches, gap / 1e3)
                print(f"{args.device}: {label:<12}{size:>6}{p50:>9.2f}{p90:>9.2f}{size / p50 * 1e3:>9.0f}{after}")
    stage = pipe._executor.gpu
    if stage is not None:
        decoder = mixed_decoders(pipe)[0]
        for size in args.sizes:
            p50, p90 = per_batch_ms(lambda s=size: decode_alone(decoder, stage.ctx, batch(s)), args.batches)
            print(f"{args.device}: {'decode only':<12}{size:>6}{p50:>9.2f}{p90:>9.2f}{size / p50 * 1e3:>9.0f}")
    if args.phases and stage is not None:
        # timers go in only now: the rows above are timed without them
        events: list = []
        seconds, missing = timed_phases(events if args.timeline else None)
        if missing:
            print("not in this version, not timed:", ", ".join(missing))
        print("GPU stage parts, ms per pipe.run batch (mean; nested parts indented):")
        for size in args.sizes:
            for _ in range(5):
                direct(size)
            for label in seconds:
                seconds[label] = 0.0
            for _ in range(args.batches):
                direct(size)
            print(f"  batch {size}: " + ", ".join(f"{label.strip()} {total / args.batches * 1e3:.3f}"
                                                  for label, total in seconds.items() if total))
        if args.timeline:
            for size in args.sizes:
                for gap in args.gap_ms:
                    print_timeline(served, size, args.batches, events, gap / 1e3)
        events.clear()
    if args.cprofile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.batches):
            served(args.cprofile)
        profiler.disable()
        if args.dump:
            profiler.dump_stats(args.dump)
        print(f"cProfile of {args.batches} BatchRunner batches of {args.cprofile} (calling thread, {args.sort}):")
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(45)
    pipe.close()


if __name__ == "__main__":
    main()
