"""GPU reductions: headrace's segmented kernel (kernels/reduce.cu, one reduction over the whole ragged batch) side by
side with CuPy reducing sample by sample, on the same device arrays; prints milliseconds per batch and the ratio.

Usage (on a GPU machine): python benchmarks/gpu_reductions.py"""

from __future__ import annotations

import time

import cupy as cp
import numpy as np

from headrace_kernels.gpu import tensor_ops


def _time(func, repeats: int = 20) -> float:
    func()
    cp.cuda.Stream.null.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        func()
    cp.cuda.Stream.null.synchronize()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    rng = np.random.default_rng(0)
    cases = {
        "64 ragged uint8 HWC images, mean over HW": (
            [cp.asarray(rng.integers(0, 256, (int(h), int(w), 3), dtype=np.uint8))
             for h, w in rng.integers(200, 600, (64, 2))], dict(axes=(0, 1)), "reductions.mean",
            lambda s: s.mean(axis=(0, 1), dtype=cp.float64).astype(cp.float32)),
        "64 ragged float32 masks, mean over all": (
            [cp.asarray(rng.uniform(0, 1, (int(h), int(w))).astype(np.float32))
             for h, w in rng.integers(200, 600, (64, 2))], dict(axes=None), "reductions.mean",
            lambda s: s.mean(dtype=cp.float64).astype(cp.float32)),
        "256 small 32x32x3 uint8, max over C": (
            [cp.asarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(256)],
            dict(axes=(2,)), "reductions.max", lambda s: s.max(axis=2)),
    }
    print(f"{'case':48s} {'headrace ms':>12s} {'cupy per sample ms':>19s} {'ratio':>7s}")
    for title, (samples, axes, op, peer) in cases.items():
        args = {"axes": None, "axis_names": None, "keep_dims": False, "dtype": None, **axes}
        ours = _time(lambda samples=samples, args=args, op=op: tensor_ops.reduce(op, samples, args))
        theirs = _time(lambda samples=samples, peer=peer: [peer(s) for s in samples])
        print(f"{title:48s} {ours:12.3f} {theirs:19.3f} {theirs / ours:6.1f}x")


if __name__ == "__main__":
    main()
