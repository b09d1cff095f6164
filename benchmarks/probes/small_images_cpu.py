"""Per-image overhead on the CPU: the training pipeline's readers.file -> image_random_crop (CPU decode) -> resize on
small JPEGs, where the decode itself is cheap and what each sample costs around it decides the rate; headrace against
DALI's CPU build in alternating rounds of one process, then where headrace's CPU time goes (yappi, CPU clock).

    python benchmarks/probes/small_images_cpu.py [--size 64 80] [--images 256] [--rounds 6] [--batches 60] [--yappi]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import tempfile
import time
from pathlib import Path

from headrace.data.synthetic import make_image_folder


def pipeline(library: str, data: str, batch: int, threads: int):
    root = importlib.import_module(library)
    fn, types = root.fn, root.types

    @root.pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=42)
    def small():
        jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        return fn.resize(images, resize_x=32, resize_y=32), labels

    pipe = small()
    pipe.build()
    return pipe


def rate(pipe, batches: int) -> float:
    start = time.perf_counter()
    for _ in range(batches):
        pipe.run()
    return batches * pipe.batch_size / (time.perf_counter() - start)


def profile(pipe, batches: int, rows: int = 20) -> None:
    import yappi

    yappi.set_clock_type("cpu")
    yappi.start(builtins=True, profile_threads=True)
    for _ in range(batches):
        pipe.run()
    yappi.stop()
    stats = yappi.get_func_stats()
    stats.sort("tsub", "desc")
    print(f"headrace under yappi (CPU clock, every thread; it inflates Python 3-5x), ms a batch, {batches} batches:")
    for stat in list(stats)[:rows]:
        print(f"  own {stat.tsub * 1e3 / batches:7.3f}  total {stat.ttot * 1e3 / batches:7.3f}  calls "
              f"{stat.ncall / batches:6.1f}  {Path(stat.module).name}:{stat.lineno} {stat.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", nargs=2, type=int, default=[64, 80], metavar=("HEIGHT", "WIDTH"))
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batches", type=int, default=60, help="timed batches per round and library")
    parser.add_argument("--yappi", action="store_true", help="then profile headrace's pipeline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        data = str(make_image_folder(Path(scratch) / "images", args.images, 2, size=tuple(args.size)))
        pipes = {name: pipeline(library, data, args.batch_size, args.threads)
                 for name, library in (("dali", "nvidia.dali"), ("headrace", "headrace"))}
        for pipe in pipes.values():
            rate(pipe, 5)
        rates: dict[str, list[float]] = {name: [] for name in pipes}
        for round_ in range(args.rounds):
            for name in list(pipes) if round_ % 2 == 0 else list(pipes)[::-1]:
                rates[name].append(rate(pipes[name], args.batches))
            print(f"round {round_}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()), flush=True)
        dali, ours = statistics.median(rates["dali"]), statistics.median(rates["headrace"])
        print(f"{args.size[0]}x{args.size[1]} JPEGs, batch {args.batch_size}, {args.threads} threads, medians: DALI "
              f"{dali:,.0f}, headrace {ours:,.0f} img/s; headrace / DALI {ours / dali:.2f}")
        if args.yappi:
            profile(pipes["headrace"], 30)


if __name__ == "__main__":
    main()
