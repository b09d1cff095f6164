"""Where the SSD300 GPU pipeline spends a batch: the GPU stage's host time per step (ms per batch, after a warm-up)
and the calling thread's cProfile of a few batches. A probe for issue 20's GPU speed, not a benchmark.

    python benchmarks/probes/ssd_gpu_profile.py [--images 256] [--batches 40] [--threads 8] [--dump FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks" / "probes"))

from ssd_pipeline import ssd300_training, write_coco_set  # noqa: E402
from step_times import print_step_times  # noqa: E402

from headrace import fn, pipeline_def, types  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--threads", type=int, default=8, help="the pipeline's num_threads")
    parser.add_argument("--dump", help="also write the cProfile there (pstats' format)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root, annotations = write_coco_set(scratch, args.images, size=(480, 640))

        @pipeline_def(batch_size=32, num_threads=args.threads, device_id=0, seed=1)
        def pipe():
            return ssd300_training(fn, types, root, annotations, device="gpu")

        p = pipe()
        p.build()
        print_step_times(p, 32, args.batches, 10, "images", args.dump)
        p.close()


if __name__ == "__main__":
    main()
