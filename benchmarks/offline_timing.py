"""Helpers shared by the benchmarks and probes: a pipeline fed from memory in this process (its rate at its own batch
size and its batch-1 latency, every run waited for), and the nvImageCodec decoders inside a built GPU pipeline."""

from __future__ import annotations

import time

import numpy as np


def run_waited(pipe, **inputs) -> None:
    """One `pipe.run(**inputs)`, returning once every output is complete (GPU outputs synchronized)."""
    for out in pipe.run(**inputs):
        getattr(out, "synchronize", lambda: None)()


def time_pipeline(pipe, images: list[np.ndarray], seconds: float) -> dict:
    """Batches of pipe.batch_size fed to its external source `images` for `seconds`, then single images for
    seconds / 2, after a warm-up of both: {"done": images, "elapsed": seconds, "latencies": [s per batch-1 run]}."""

    def run(batch):
        run_waited(pipe, images=batch)

    batch = [images[i % len(images)] for i in range(pipe.batch_size)]
    for _ in range(3):
        run(batch)
        run(batch[:1])
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(batch)
        done += len(batch)
    elapsed = time.perf_counter() - start
    latencies = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds / 2:
        t = time.perf_counter()
        run([images[len(latencies) % len(images)]])
        latencies.append(time.perf_counter() - t)
    return {"done": done, "elapsed": elapsed, "latencies": latencies}


def mixed_decoders(pipe) -> list:
    """The mixed decoders (headrace_kernels.gpu.decode.MixedDecoder) of a built pipeline's GPU steps, for their
    counters (`fallbacks`, `decode_seconds`) or to time the decoder alone; [] without a GPU stage."""
    stage = pipe._executor.gpu
    if stage is None:
        return []
    holders = [getattr(step, "kernel", step) for _, step in stage.steps]  # a kernel step, or an older step itself
    return [holder.decoder for holder in holders if hasattr(holder, "decoder")]
