"""Host time per GPU-stage step of headrace's RN50 pipelines (gpu_vs_dali.py's train and validation), with the decoders'
hybrid_huffman_threshold as given: where a batch's time goes when the decode is not the limit.

    python benchmarks/probes/rn50_step_times.py --data FOLDER [--cases "train 0.65" validation] [--thresholds 1000000 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_vs_dali import CASES, Library
from step_times import print_step_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--cases", nargs="+", default=["train 0.65", "validation"], choices=list(CASES))
    parser.add_argument("--thresholds", nargs="+", type=int, default=[1_000_000, 0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--batches", type=int, default=40)
    args = parser.parse_args()
    for case in args.cases:
        body, load = CASES[case]
        for threshold in args.thresholds:
            lib = Library("headrace", {"hybrid_huffman_threshold": threshold})
            pipe = lib.pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=0, seed=42)(
                lambda lib=lib, body=body, load=load: body(lib, args.data, load))()
            pipe.build()
            print(f"\n== {case}, hybrid_huffman_threshold {threshold}", flush=True)
            print_step_times(pipe, args.batch_size, args.batches, 10, "images")
            pipe.close()


if __name__ == "__main__":
    main()
