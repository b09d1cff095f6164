"""The served GPU preprocess pipeline offline through each decoder path (nvImageCodec's C API or its Python binding;
hw_decoder_load 1 or DALI's 0.65): img/s at batch 32, batch-1 latency, and how many images fell back to the CPU.

    python benchmarks/probes/gpu_preprocess_paths.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from offline_timing import mixed_decoders, time_pipeline  # noqa: E402
from triton_helpers import jpegs, served_preprocess  # noqa: E402

from headrace import Pipeline  # noqa: E402


def measure(hw_load: float, c_api: bool, images: list[np.ndarray], seconds: float) -> tuple[float, float, int]:
    pipe = Pipeline.load(served_preprocess(device="gpu", hw_decoder_load=hw_load).serialize(), device_id=0,
                         executor_options={"nvimgcodec_capi": c_api})
    timing = time_pipeline(pipe, images, seconds)
    fallbacks = sum(decoder.fallbacks for decoder in mixed_decoders(pipe))
    pipe.close()
    return timing["done"] / timing["elapsed"], float(np.median(timing["latencies"])) * 1e3, fallbacks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    images = [jpegs(5, seed=0)[4], jpegs(5, seed=1)[4]]  # the serving benchmark's two 427x640 JPEGs
    print(f"{'decoder path':44s} {'img/s b32':>10s} {'b1 p50 ms':>10s} {'to CPU':>7s}")
    for hw_load, c_api in ((1.0, True), (1.0, False), (0.65, True), (0.65, False)):
        rate, p50, fallbacks = measure(hw_load, c_api, images, args.seconds)
        label = f"hw_decoder_load={hw_load}, {'C API' if c_api else 'Python binding'}"
        print(f"{label:44s} {rate:10,.0f} {p50:10.2f} {fallbacks:7d}")


if __name__ == "__main__":
    main()
