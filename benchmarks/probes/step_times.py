"""The GPU stage's host time per step of a built GPU pipeline, ms per batch, and the calling thread's cProfile of the
same batches: what the ssd_ and asr_gpu_profile probes print."""

from __future__ import annotations

import cProfile
import pstats
import time


def print_step_times(pipe, batch_size: int, batches: int, warmup: int, unit: str, dump: str | None = None) -> None:
    """Run `warmup` batches, then time `batches` under cProfile; print the rate, each step's host ms per batch (the
    executor's GPU-stage timings) and the 25 functions with the most own time; `dump`: also write the profile there
    (pstats' format, to read with callers and callees)."""
    for _ in range(warmup):
        out = pipe.run()
    out[0].as_cpu()
    stage = pipe._executor.gpu
    stage.timings.clear()
    start = time.perf_counter()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(batches):
        out = pipe.run()
    out[0].as_cpu()
    profiler.disable()
    seconds = time.perf_counter() - start
    print(f"{batches * batch_size / seconds:.0f} {unit}/s; GPU stage host time per step, ms per batch:")
    for name, total in sorted(stage.timings.items(), key=lambda kv: -kv[1]):
        print(f"  {name:50} {total / batches * 1e3:8.2f}")
    if dump:
        profiler.dump_stats(dump)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
