"""What the side-by-side benchmarks share: a loader under test (`Runner`) and one timed epoch of it."""

from __future__ import annotations

import time
from collections.abc import Iterator

from tqdm import tqdm


class Runner:
    """One library's loader: `epoch()` yields the sizes of one epoch's batches."""

    name: str
    partial_warmup = True  # whether a warm-up may stop an epoch part way

    def epoch(self) -> Iterator[int]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def timed_epoch(runner: Runner, label: str, batches: int | None = None, unit: str = "img") -> tuple[int, float]:
    """(samples, seconds) of one whole epoch (or of its first `batches`), with a progress bar counting `unit`."""
    samples = 0
    start = time.perf_counter()
    with tqdm(desc=label, unit=unit, leave=False) as bar:
        for done, size in enumerate(runner.epoch(), 1):
            samples += size
            bar.update(size)
            if done == batches:
                break
    return samples, time.perf_counter() - start


def best_ms_per_batch(pipe, iters: int, repeats: int) -> float:
    """A built pipeline's milliseconds per batch: the best of `repeats` timed runs of `iters` batches, after one
    untimed batch; the pipeline is closed after."""
    pipe.run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            pipe.run()
        best = min(best, (time.perf_counter() - start) / iters)
    if hasattr(pipe, "close"):
        pipe.close()
    return best * 1000
