"""What a run of the SSD300 GPU pipeline's CPU stage costs in its worker process (executor option cpu_process): the
COCO reader, random_bbox_crop and the draws over a coalesced run (`CpuStage.run_group`), then the wire
(`cpu_worker.pack_group`: the values the GPU stage reads, packed into a shared block), with and without the
encoded bytes, and with the executor option parallel_reads (the files read in runs on the pool's threads);
alternating, medians; then a profile of the worker's run. `--consume MS ...` then runs a real worker process the
way the GPU stage uses it (a readers thread asking one and two runs ahead, a consumer that takes a run every MS
without using the CPU and holds the last three) and prints how long the consumer waited. No GPU needed: it runs
where the worker would, on the GPU machine's host or here. A probe for issue 20.

    python benchmarks/probes/cpu_stage_probe.py [--images 512] [--runs 30] [--batch-size 32] [--group 8]
                                                [--consume 10 20]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import ssd_pipeline as example  # noqa: E402
from process_use import process_use  # noqa: E402

from headrace import fn, pipeline_def, types  # noqa: E402
from headrace.batch import BufferPool  # noqa: E402
from headrace.engine.column_wire import Blocks  # noqa: E402
from headrace.engine.cpu_process import CpuStageProcess  # noqa: E402
from headrace.engine.cpu_stage import CpuStage  # noqa: E402
from headrace.engine.cpu_worker import pack_group  # noqa: E402

RAW_ANNOTATIONS = {("Reader", 1), ("Reader", 2)}
"""The reader's own boxes and labels: random_bbox_crop reads them in the worker; the GPU stage does not."""


def ssd_cpu_stage(root: str, annotations: str, batch_size: int, threads: int,
                  parallel_reads: bool) -> tuple[CpuStage, frozenset, list, int]:
    """The CPU stage the worker builds for the SSD300 GPU pipeline (its readers fed to the GPU), the keys of the
    values it sends, its nodes and its seed."""
    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, seed=7)
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="cpu")

    pipe = ssd()
    pipe.build()
    nodes = [n for n in pipe._executor.nodes if n.schema.batch_op or n.schema.name == "random_bbox_crop"
             or n.schema.name.startswith("random.")]
    seed = pipe._executor.seed
    pipe.close()
    pool = ThreadPoolExecutor(threads, thread_name_prefix="headrace-cpu")
    stage = CpuStage(nodes, [], batch_size, threads, seed, BufferPool(per_key=2), pool if parallel_reads else None,
                     pool)
    stage.batch_ops["Reader"].feeds_gpu = True
    keys = frozenset((node.name, k) for node in nodes for k in range(len(node.outputs))) - RAW_ANNOTATIONS
    return stage, keys, nodes, seed


def consumer_waits(nodes: list, seed: int, keys: frozenset, batch_size: int, group: int, threads: int,
                   consume: float, runs: int) -> tuple[float, dict[str, float]]:
    """(median wait for a run in ms, CpuStageProcess.timings in ms a run) with a consumer taking a run every
    `consume` seconds, as the GPU stage does: a readers thread asks for runs one and two ahead."""
    stage = CpuStage(nodes, [], batch_size, threads, seed, BufferPool(per_key=2), None,
                     ThreadPoolExecutor(threads, thread_name_prefix="headrace-cpu"))
    stage.batch_ops["Reader"].feeds_gpu = True
    worker = CpuStageProcess(nodes, batch_size, threads, seed, False).bind(stage, set(keys))
    readers, reads, held, waits = ThreadPoolExecutor(1), {}, [], []
    try:
        for index in range(runs + 5):  # the first five warm up
            if index == 5:
                used = process_use(worker.pid)
            first = index * group
            for ahead in (first, first + group, first + 2 * group):
                if ahead not in reads:
                    reads[ahead] = readers.submit(worker.run_group, ahead, group, True)
            start = time.perf_counter()
            held.append(reads.pop(first).result())
            if index >= 5:
                waits.append(time.perf_counter() - start)
            elif index == 4:  # the warm-up's answers (the worker's first run compiles and loads) do not count
                worker.timings.clear()
            del held[:-3]  # what is still decoding or queued holds its blocks
            time.sleep(consume)
        faults, cpu = (b - a for a, b in zip(used, process_use(worker.pid), strict=True))
        parts = {key: seconds / runs * 1e3 for key, seconds in worker.timings.items() if key != "blocks mapped"}
        return statistics.median(waits) * 1e3, {**parts, "the worker's CPU": cpu / runs * 1e3,
                                                "the worker's page faults (count)": faults / runs}
    finally:
        held.clear()
        readers.shutdown()
        worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--group", type=int, default=8, help="batches in a coalesced run")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--runs", type=int, default=30, help="timed runs per variant")
    parser.add_argument("--consume", type=float, nargs="*", default=[], metavar="MS",
                        help="then run a worker process with a consumer taking a run every MS")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root, annotations = example.write_coco_set(scratch, args.images, size=(480, 640))
        stage, keys, nodes, seed = ssd_cpu_stage(root, annotations, args.batch_size, args.threads, False)
        pooled = ssd_cpu_stage(root, annotations, args.batch_size, args.threads, True)[0]
        blocks = Blocks()
        without_bytes = keys - {("Reader", 0)}
        variants = {
            "CPU stage (run_group)": (stage, None),
            "CPU stage + wire": (stage, keys),
            "CPU stage + wire, no encoded bytes": (stage, without_bytes),
            "CPU stage + wire, parallel_reads": (pooled, keys),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        first = 0
        for _ in range(args.runs + 1):  # the first pass warms up
            for name, (stage, sent) in variants.items():
                start = time.perf_counter()
                if sent is None:
                    stage.run_group(first, args.group, True)
                else:
                    where = pack_group(stage, first, args.group, True, sent, blocks)[4]
                    if where is not None:
                        blocks.free(where[0])
                times[name].append(time.perf_counter() - start)
                first += args.group
        print(f"a run of {args.group} x {args.batch_size} (480x640 JPEGs), {args.threads} threads, median of "
              f"{args.runs} alternating runs:")
        for name, seconds in times.items():
            median = statistics.median(seconds[1:])
            print(f"  {name:48} {median * 1e3:7.2f} ms a run, {median / args.group * 1e3:6.3f} ms a batch")
        stage = variants["CPU stage + wire"][0]
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.runs):
            where = pack_group(stage, first, args.group, True, keys, blocks)[4]
            if where is not None:
                blocks.free(where[0])
            first += args.group
        profile.disable()
        print("\nthe worker's runs (CPU stage + wire), by own time:")
        pstats.Stats(profile).sort_stats("tottime").print_stats(18)
        blocks.close()
        for consume in args.consume:
            waited, parts = consumer_waits(nodes, seed, keys, args.batch_size, args.group, args.threads,
                                           consume / 1e3, args.runs)
            print(f"a worker process, a run taken every {consume:g} ms: the consumer waited {waited:.2f} ms a run "
                  "(median); ms a run: " + ", ".join(f"{key} {ms:.2f}" for key, ms in parts.items()))


if __name__ == "__main__":
    main()
