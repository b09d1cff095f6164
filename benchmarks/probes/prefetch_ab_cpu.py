"""The executor option prefetch_beyond_queue on the CPU: the RN50 training pipeline (CPU decode) with it True and
False in alternating rounds, one process. Each round first takes the batches the pipeline's prefetcher computed
while the other one ran (with True it has one more ready), so that a round times its own work only.

    python benchmarks/probes/prefetch_ab_cpu.py [--images 512] [--batch-size 32] [--rounds 8] [--batches 96]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from headrace.data.synthetic import make_image_folder
from headrace.demo import resnet50_train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batches", type=int, default=96, help="timed batches per round and setting")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        data = make_image_folder(Path(scratch) / "images", args.images, 4, size=(375, 500))
        pipes = {beyond: resnet50_train(data_dir=str(data), device="cpu", batch_size=args.batch_size,
                                        num_threads=args.threads, seed=1,
                                        executor_options={"prefetch_beyond_queue": beyond})
                 for beyond in (True, False)}
        for pipe in pipes.values():
            pipe.build()
            for _ in range(4):
                pipe.run()
        rates: dict[bool, list[float]] = {True: [], False: []}
        for round_ in range(args.rounds):
            for beyond in (True, False) if round_ % 2 == 0 else (False, True):
                pipe = pipes[beyond]
                for _ in range(pipe.prefetch_queue_depth + 2):  # computed while the other setting ran
                    pipe.run()
                start = time.perf_counter()
                for _ in range(args.batches):
                    pipe.run()
                rates[beyond].append(args.batches * args.batch_size / (time.perf_counter() - start))
            print(f"round {round_}: True {rates[True][-1]:,.0f}, False {rates[False][-1]:,.0f} img/s", flush=True)
        for pipe in pipes.values():
            pipe.close()
    true, false = statistics.median(rates[True]), statistics.median(rates[False])
    print(f"medians: prefetch_beyond_queue True {true:,.0f}, False {false:,.0f} img/s; False / True {false / true:.3f}")


if __name__ == "__main__":
    main()
