"""The per-batch cost of user functions on the CPU, headrace against DALI's CPU build in one process: a trivial
function (x + 1 on 32 small float32 arrays) through python_function (per sample and per batch) and
experimental.numba_function, each pipeline against the same pipeline without the op (the difference is the op's
cost). Alternating rounds (A B, B A, ...), medians of milliseconds per batch. Then python_function's worker
processes (`num_workers`, headrace's own) on a CPU-heavy pure-Python function, against the same op in the
pipeline's thread.

    python benchmarks/custom_ops_cpu.py [--rounds 7] [--batches 300] [--batch-size 32] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def plus_one(x):
    return x + 1


def plus_one_batch(xs):
    return [x + 1 for x in xs]


def plus_one_numba(out0, in0):
    for i in range(in0.shape[0]):
        out0[i] = in0[i] + 1


def python_heavy(x):
    """About a millisecond of pure Python per sample (it holds the GIL throughout)."""
    total = 0.0
    for value in x.tolist() * 400:
        total += value * value
    return x + total


def build(lib: str, case: str, batch: int):
    if lib == "dali":
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.numba.fn.experimental import numba_function
    else:
        from headrace import fn, pipeline_def, types
        from headrace.plugin.numba.fn.experimental import numba_function
    data = [np.arange(64, dtype=np.float32) + i for i in range(batch)]
    extra = {"exec_dynamic": True} if lib == "dali" else {}

    @pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=0, **extra)
    def pipe():
        x = fn.external_source(source=lambda: data)
        if case == "python_function":
            return fn.python_function(x, function=plus_one)
        if case == "python_function batch":
            return fn.python_function(x, function=plus_one_batch, batch_processing=True)
        if case.startswith("python_heavy"):
            workers = int(case.rsplit(" ", 1)[1])
            return fn.python_function(x, function=python_heavy, num_workers=workers)
        if case == "numba_function":
            return numba_function(x, run_fn=plus_one_numba, out_types=[types.FLOAT], in_types=[types.FLOAT],
                                  outs_ndim=[1], ins_ndim=[1])
        return x  # the baseline: feeding the batch alone

    p = pipe()
    p.build()
    for _ in range(5):
        p.run()
    return p


def ms_per_batch(pipe, batches: int) -> float:
    start = time.perf_counter()
    for _ in range(batches):
        pipe.run()
    return (time.perf_counter() - start) / batches * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="python_function's num_workers in the last table")
    args = parser.parse_args()
    cases = ["baseline", "python_function", "python_function batch", "numba_function"]
    libs = ["headrace", "dali"]
    pipes = {(lib, case): build(lib, case, args.batch_size) for lib in libs for case in cases}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in pipes}
    for round_ in range(args.rounds):
        for lib in libs if round_ % 2 == 0 else libs[::-1]:
            for case in cases:
                times[(lib, case)].append(ms_per_batch(pipes[(lib, case)], args.batches))
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"batch {args.batch_size}, {args.rounds} rounds x {args.batches} batches; ms per batch (medians)")
    print("| case | headrace ms | DALI ms | headrace op cost ms | DALI op cost ms | DALI / headrace (op cost) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case in cases:
        ours, theirs = median[("headrace", case)], median[("dali", case)]
        if case == "baseline":
            print(f"| {case} | {ours:.3f} | {theirs:.3f} | | | |")
            continue
        our_cost = ours - median[("headrace", "baseline")]
        their_cost = theirs - median[("dali", "baseline")]
        print(f"| {case} | {ours:.3f} | {theirs:.3f} | {our_cost:.3f} | {their_cost:.3f} | "
              f"{their_cost / our_cost:.2f} ({'headrace faster' if their_cost > our_cost else 'headrace slower'}) |")
    heavy = {n: build("headrace", f"python_heavy {n}", args.batch_size) for n in (0, args.workers)}
    spent: dict[int, list[float]] = {n: [] for n in heavy}
    for round_ in range(args.rounds):
        for n in heavy if round_ % 2 == 0 else list(heavy)[::-1]:
            spent[n].append(ms_per_batch(heavy[n], max(10, args.batches // 20)))
    serial, parallel = statistics.median(spent[0]), statistics.median(spent[args.workers])
    print(f"\nCPU-heavy python_function (pure Python, ~1 ms a sample): in the pipeline's thread {serial:.1f} ms per "
          f"batch, in {args.workers} worker processes {parallel:.1f} ms: {serial / parallel:.2f}x")


if __name__ == "__main__":
    main()
