"""Where the ASR feature pipeline (asr_cpu.py's, device "gpu") spends a batch: the GPU stage's host time per step (ms
per batch, after a warm-up) and the calling thread's cProfile of a few batches. A probe for issue 21's GPU speed, not
a benchmark.

    python benchmarks/probes/asr_gpu_profile.py [--files 128] [--batches 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "probes"))

from asr_cpu import asr_pipeline, make_dataset  # noqa: E402
from step_times import print_step_times  # noqa: E402

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
        print_step_times(p, 32, args.batches, 6, "samples")
        p.close()


if __name__ == "__main__":
    main()
