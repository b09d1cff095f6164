"""Where headrace's served pipeline and DALI's (benchmarks/triton_dali: the same graph with DALI's import) differ, in
process: each library's decoder alone (uint8 pixels) and whole pipeline (normalized values) on each `--device`
(cpu; gpu: the mixed decoders), on triton_preprocess.py's two images; max and mean absolute difference of every
pair, and how many values differ by more than a pixel level.

    python benchmarks/probes/served_pixels_probe.py [--device cpu gpu] [--hw-decoder-load 1.0]
"""

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from triton_helpers import dali_peer, jpegs, served_preprocess  # noqa: E402

STD = np.array([0.229, 0.224, 0.225]) * 255
"""The served pipeline's std per channel: a pixel level is 1 / std of a channel's normalized value."""


def host(batch: object) -> np.ndarray:
    """A dense output batch as one host array, from either library."""
    if hasattr(batch, "as_cpu"):
        batch = batch.as_cpu()
    return np.stack([np.asarray(batch.at(i) if hasattr(batch, "at") else batch[i]) for i in range(len(batch))])


def decoders(library: str, device: str, hw_decoder_load: float) -> object:
    """A pipeline of the decoder alone, as the served pipeline configures it, for either library."""
    if library == "dali":
        from nvidia.dali import fn, pipeline_def, types
    else:
        from headrace import fn, pipeline_def, types

    @pipeline_def(batch_size=32, num_threads=2, device_id=0 if device == "gpu" else None, seed=0)
    def decode():
        jpegs = fn.external_source(name="images", dtype=types.UINT8, ndim=1)
        if device == "gpu":
            return fn.decoders.image(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=hw_decoder_load)
        return fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)

    pipe = decode()
    pipe.build()
    return pipe


def run(pipe: object, images: list[np.ndarray]) -> np.ndarray:
    """One batch of `images` through `pipe` (either library's, one output), as float64 on the host."""
    pipe.feed_input("images", images)
    (out,) = pipe.run()
    return host(out).astype(np.float64)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", nargs="+", choices=("cpu", "gpu"), default=["cpu"])
    parser.add_argument("--hw-decoder-load", type=float, default=1.0)
    args = parser.parse_args(argv)
    images = [jpegs(5, seed=0)[4], jpegs(5, seed=1)[4]]
    model = dali_peer()
    decoded, normalized = {}, {}
    for device in args.device:
        device_id = 0 if device == "gpu" else None
        for library in ("headrace", "dali"):
            decoded[f"{library} {device}"] = run(decoders(library, device, args.hw_decoder_load), images)
        ours = served_preprocess(device=device, hw_decoder_load=args.hw_decoder_load)
        ours.build()
        normalized[f"headrace {device}"] = run(ours, images)
        normalized[f"dali {device}"] = run(model.build(32, 2, device_id, "TYPE_FP32", args.hw_decoder_load), images)
    # in pixel levels: the decoders' values are levels; the normalized CHW values times their channel's std
    for title, outputs, scale in (("decoder alone (pixel levels)", decoded, 1.0),
                                  ("served pipeline (normalized values)", normalized, STD[:, None, None])):
        print(title)
        for a, b in itertools.combinations(outputs, 2):
            diff = np.abs(outputs[a] - outputs[b])
            print(f"  {a:>13} vs {b:<13} max {diff.max():.4f}, mean {diff.mean():.5f}, "
                  f"{np.mean(diff * scale > 1.5):.4%} of values more than a level apart")


if __name__ == "__main__":
    main()
