"""Where the ASR feature pipeline (asr_cpu.py's, device "gpu") spends a batch: the GPU stage's host time per step (ms
per batch, after a warm-up) and the calling thread's cProfile of a few batches. A probe for issue 21's GPU speed, not
a benchmark.

    python benchmarks/probes/asr_gpu_profile.py [--files 128] [--batches 20]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from asr_cpu import asr_pipeline, make_dataset  # noqa: E402

from headrace import fn, pipeline_def, types  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=128)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        manifest = make_dataset(Path(scratch), args.files, 2.0, 16.0, [22050, 44100], 42)

        @pipeline_def(batch_size=32, num_threads=8, device_id=0, seed=1)
        def pipe():
            return asr_pipeline(fn, types, str(manifest), device="gpu")

        p = pipe()
        p.build()
        for _ in range(6):
            out = p.run()
        out[0].as_cpu()
        stage = p._executor.gpu
        stage.timings.clear()
        start = time.perf_counter()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.batches):
            out = p.run()
        out[0].as_cpu()
        profiler.disable()
        seconds = time.perf_counter() - start
        print(f"{args.batches * 32 / seconds:.0f} samples/s; GPU stage host time per step, ms per batch:")
        for name, total in sorted(stage.timings.items(), key=lambda kv: -kv[1]):
            print(f"  {name:50} {total / args.batches * 1e3:8.2f}")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        p.close()


if __name__ == "__main__":
    main()
