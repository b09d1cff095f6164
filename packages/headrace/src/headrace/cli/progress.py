"""Running a pipeline for a number of batches behind a progress bar, and what that run measured."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from headrace.cli.common import CliError, need
from headrace.pipeline import Pipeline


@dataclasses.dataclass
class Span:
    """Batches run back to back: how many samples and how long they took."""

    batches: int = 0
    samples: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else math.inf


def to_host(batch):
    """A batch as host data (GPU batches have `as_cpu()`)."""
    return batch.as_cpu() if hasattr(batch, "as_cpu") else batch


def wait_for_gpu(outputs) -> None:
    """Let the GPU finish the work behind these outputs, so that a clock read next measures it."""
    if any(getattr(batch, "device", "cpu") == "gpu" for batch in outputs):
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def check_runnable(pipe: Pipeline) -> None:
    """A pipeline that waits for fed inputs (as in Triton) has nothing to read from the command line."""
    if pipe.fed_inputs:
        raise CliError(f"the pipeline takes fed inputs ({', '.join(pipe.fed_inputs)}: external_source nodes without "
                       "a source, as the Triton backend feeds them); the command line has no data for them")


def batches_per_epoch(pipe: Pipeline) -> int:
    """How many batches one epoch of the pipeline's only reader takes (its shard, rounded up)."""
    readers = [n.name for n in pipe.graph.nodes if n.schema.state == "reader"]
    if len(readers) != 1:
        raise CliError(f"epochs need exactly one reader, this pipeline has {len(readers)}; use --batches N")
    meta = pipe.reader_meta(readers[0])
    per_shard = meta["epoch_size_padded"] // meta["number_of_shards"] if meta["pad_last_batch"] \
        else -(-meta["epoch_size"] // meta["number_of_shards"])
    return max(1, -(-per_shard // pipe.batch_size))


def first_batch(pipe: Pipeline) -> tuple[float, tuple]:
    """(seconds from build to the first batch, that batch): what a training job waits before its first step."""
    start = time.perf_counter()
    pipe.build()
    outputs = pipe.run()
    wait_for_gpu(outputs)
    return time.perf_counter() - start, outputs


def run_span(pipe: Pipeline, batches: int, desc: str, on_batch: Callable[[tuple], None] | None = None,
             progress: bool = True) -> Span:
    """Run `batches` batches behind a tqdm bar counting samples; `on_batch` sees each batch's outputs."""
    tqdm = need("tqdm", "the progress bar").tqdm
    span = Span()
    start = time.perf_counter()
    outputs: tuple = ()
    with tqdm(total=batches * pipe.batch_size, desc=desc, unit="sample", disable=not progress, leave=False) as bar:
        for _ in range(batches):
            outputs = pipe.run()
            size = len(outputs[0])
            span.batches += 1
            span.samples += size
            bar.update(size)
            if on_batch is not None:
                on_batch(outputs)
    wait_for_gpu(outputs)
    span.seconds = time.perf_counter() - start
    return span


def rate_text(rate: float, unit: str = "samples") -> str:
    return f"{rate:,.0f} {unit}/s" if math.isfinite(rate) else f"- {unit}/s"
