"""Throughput of data-dependent pipelines on the CPU, headrace beside DALI's CPU build, in one process.

Two pipelines, written once and built with either library's `pipeline_def`/`fn`/`types`:
- `blur`: the dynamic blur of issue 7 (mask ratio -> per-sample gaussian window), on uint8 masks;
- `branches`: per-sample `if`/`elif`/`else` (rotate, brightness/contrast, or a flip) on RGB images.
Rounds alternate the order of the libraries so that load from neighbours falls on both alike; the median of the
rounds is printed with the ratio headrace / DALI (above 1: headrace is faster).

    python benchmarks/dynamic_cpu.py --batch 32 --size 256 --iters 20 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _odd_window_masks(rng: np.random.Generator, batch: int, size: int) -> list[np.ndarray]:
    """Masks whose blur window 16 + ratio * 300 rounds to an odd number (DALI rejects even windows)."""
    masks = []
    while len(masks) < batch:
        count = int(rng.integers(0, size * size // 4))
        if round(16 + count / (size * size) * 300) % 2 == 0:
            continue
        flat = np.zeros(size * size, np.uint8)
        flat[rng.choice(size * size, count, replace=False)] = 255
        masks.append(flat.reshape(size, size))
    return masks


def build(library: str, which: str, batch: int, threads: int, data: list[np.ndarray]):
    if library == "headrace":
        from headrace import fn, pipeline_def, types
    else:
        from nvidia.dali import fn, pipeline_def, types

    def source():
        return data

    if which == "blur":
        @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1)
        def pipe():
            masks = fn.external_source(source=source, batch=True, layout="HW")
            nonzero_ratio = fn.reductions.mean(fn.cast(masks > 0, dtype=types.FLOAT), axes=(0, 1))
            blur_size = fn.cast(16 + nonzero_ratio * 300, dtype=types.INT32)
            return fn.gaussian_blur(masks, window_size=blur_size)
    else:
        @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1, enable_conditionals=True)
        def pipe():
            images = fn.external_source(source=source, batch=True, layout="HWC")
            choice = fn.random.uniform(range=[0.0, 1.0])
            if choice < 0.3:
                images = fn.rotate(images, angle=fn.random.uniform(range=[-30.0, 30.0]), keep_size=True)
            elif choice < 0.6:
                images = fn.brightness_contrast(images, brightness=1.3, contrast=0.8)
            else:
                images = fn.flip(images, horizontal=1)
            return images

    built = pipe()
    built.build()
    return built


def samples_per_second(pipe, iters: int, batch: int) -> float:
    pipe.run()  # warm-up
    start = time.perf_counter()
    for _ in range(iters):
        pipe.run()
    return iters * batch / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=256, help="height and width of masks and images")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    inputs = {"blur": _odd_window_masks(rng, args.batch, args.size),
              "branches": [rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8)
                           for _ in range(args.batch)]}
    for which, data in inputs.items():
        pipes = {lib: build(lib, which, args.batch, args.threads, data) for lib in ("headrace", "dali")}
        rates: dict[str, list[float]] = {lib: [] for lib in pipes}
        for round_index in range(args.rounds):
            order = list(pipes) if round_index % 2 == 0 else list(reversed(pipes))
            for lib in order:
                rates[lib].append(samples_per_second(pipes[lib], args.iters, args.batch))
        ours, theirs = statistics.median(rates["headrace"]), statistics.median(rates["dali"])
        print(f"{which:9s} headrace {ours:9.1f} samples/s   dali {theirs:9.1f} samples/s   "
              f"ratio {ours / theirs:5.2f}   (batch {args.batch}, {args.size}x{args.size}, "
              f"{args.threads} threads, median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
