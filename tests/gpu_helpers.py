"""Helpers of the GPU tests: run the same one-op graph on the CPU and on the GPU over the same batch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from headrace import Pipeline, fn


def run_graph(batch: list[np.ndarray], graph: Callable, device: str, seed: int = 3, upload: bool = True) -> list:
    """graph(data, device) on one external batch (uploaded first for the GPU unless `upload` is False); returns the
    output samples as numpy arrays."""
    pipe = Pipeline(batch_size=len(batch), num_threads=2, device_id=0, seed=seed)
    with pipe:
        data = fn.external_source(source=lambda: batch, name="data")
        out = graph(data.gpu() if device == "gpu" and upload else data, device)
        pipe.set_outputs(out)
    (result,) = pipe.run()
    if result.device == "gpu":
        result = result.as_cpu()
    samples = [np.asarray(result.at(i)) for i in range(len(result))]
    pipe.close()
    return samples


def cpu_and_gpu(batch: list[np.ndarray], graph: Callable, seed: int = 3, upload: bool = True) -> tuple[list, list]:
    return run_graph(batch, graph, "cpu", seed), run_graph(batch, graph, "gpu", seed, upload)


def max_level_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    """The largest absolute difference over all samples (shapes must match exactly)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape, (x.shape, y.shape)
        assert x.dtype == y.dtype, (x.dtype, y.dtype)
        if x.size:
            a, b = x.astype(np.float64), y.astype(np.float64)
            finite = np.isfinite(a) & np.isfinite(b)
            # infinities and NaNs must sit in the same places with the same values; they never count as "close"
            np.testing.assert_array_equal(a[~finite], b[~finite])
            if finite.any():
                worst = max(worst, float(np.max(np.abs(a[finite] - b[finite]))))
    return worst
