"""`headrace bench FILE`: throughput per epoch, time to first batch, host RSS and GPU memory; with
`--vs torchvision`, the same measurements of the torchvision equivalent in the same run, side by side."""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

from headrace.cli.common import CliError, add_command, need, say
from headrace.cli.loading import add_loading_options, load_pipeline, positive_int
from headrace.cli.progress import Span, batches_per_epoch, check_runnable, first_batch, rate_text, run_span

MIB = 1 << 20


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "bench", "throughput, time to first batch, host RSS and GPU memory of a "
                         "pipeline file over some epochs", main)
    add_loading_options(parser)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=positive_int, default=3, help="epochs to measure (default 3)")
    length.add_argument("--batches", type=positive_int, help="measure one run of this many batches instead")
    parser.add_argument("--vs", choices=("torchvision",), help="also run the torchvision equivalent, side by side")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (for logs)")


class MemoryProbe:
    """Peak host RSS (this process and its children, such as DataLoader workers) and GPU memory in use."""

    def __init__(self, gpu: bool):
        psutil = need("psutil", "measuring host memory")
        self.process = psutil.Process()
        self.psutil = psutil
        self.gpu = gpu
        self.peak_rss = self.peak_gpu = 0
        self.processes = 1

    def sample(self, *_) -> None:
        processes = [self.process]
        try:
            processes += self.process.children(recursive=True)
        except self.psutil.Error:
            pass
        rss = 0
        for process in processes:
            try:
                rss += process.memory_info().rss
            except self.psutil.Error:  # a worker that just exited
                continue
        self.processes = max(self.processes, len(processes))
        self.peak_rss = max(self.peak_rss, rss)
        if self.gpu:
            import cupy

            free, total = cupy.cuda.runtime.memGetInfo()
            self.peak_gpu = max(self.peak_gpu, total - free)


@dataclasses.dataclass
class Result:
    """What one contender measured."""

    name: str
    first_batch: float
    epochs: list[Span]
    peak_rss: int
    processes: int
    peak_gpu: int | None

    @property
    def rate(self) -> float:
        samples = sum(e.samples for e in self.epochs)
        seconds = sum(e.seconds for e in self.epochs)
        return samples / seconds if seconds else math.inf


def bench_headrace(pipe, epochs: int, batches: int, gpu: bool, progress: bool) -> Result:
    probe = MemoryProbe(gpu)
    startup, outputs = first_batch(pipe)
    probe.sample()
    spans = [run_span(pipe, batches, f"headrace epoch {e}", on_batch=probe.sample, progress=progress)
             for e in range(epochs)]
    return Result("headrace", startup, spans, probe.peak_rss, probe.processes, probe.peak_gpu if gpu else None)


def bench_torchvision(plan, batch_size: int, workers: int, epochs: int, batches: int | None,
                      progress: bool) -> Result:
    from headrace.cli.torchvision_peer import build_loader

    tqdm = need("tqdm", "the progress bar").tqdm
    probe = MemoryProbe(False)
    import torchvision.datasets  # noqa: F401 - imported before the clock starts, as headrace already is

    start = time.perf_counter()
    loader = build_loader(plan, batch_size, workers)
    iterator = iter(loader)
    next(iterator)
    startup = time.perf_counter() - start
    probe.sample()
    spans = []
    for epoch in range(epochs):
        span = Span()
        count = batches or len(loader)
        begin = time.perf_counter()
        with tqdm(total=count * batch_size, desc=f"torchvision epoch {epoch}", unit="sample", disable=not progress,
                  leave=False) as bar:
            while span.batches < count:
                try:
                    images, _labels = next(iterator)
                except StopIteration:
                    iterator = iter(loader)
                    continue
                span.batches += 1
                span.samples += len(images)
                bar.update(len(images))
                probe.sample()
        span.seconds = time.perf_counter() - begin
        spans.append(span)
    del iterator, loader
    return Result("torchvision", startup, spans, probe.peak_rss, probe.processes, None)


def _report(results: list[Result]) -> None:
    width = 22
    say(f"{'':26}" + "".join(f"{r.name:>{width}}" for r in results))
    say(f"{'time to first batch':26}" + "".join(f"{r.first_batch:>{width - 2}.2f} s" for r in results))
    for epoch in range(max(len(r.epochs) for r in results)):
        say(f"{f'epoch {epoch}':26}" + "".join(f"{rate_text(r.epochs[epoch].rate):>{width}}" for r in results))
    say(f"{'throughput (all epochs)':26}" + "".join(f"{rate_text(r.rate):>{width}}" for r in results))
    say(f"{'peak host RSS':26}" + "".join(
        f"{f'{r.peak_rss / MIB:,.0f} MiB' + (f' ({r.processes} proc)' if r.processes > 1 else ''):>{width}}"
        for r in results))
    say(f"{'peak GPU memory in use':26}" + "".join(
        f"{(f'{r.peak_gpu / MIB:,.0f} MiB' if r.peak_gpu is not None else 'no GPU used'):>{width}}" for r in results))
    if len(results) == 2:
        ours, theirs = results
        say(f"headrace / {theirs.name}: throughput {ratio_text(ours.rate, theirs.rate, 'faster', 'slower')}, "
            f"time to first batch {ratio_text(ours.first_batch, theirs.first_batch, 'slower', 'faster')}, "
            f"peak RSS {ratio_text(ours.peak_rss, theirs.peak_rss, 'more', 'less')}")


def ratio_text(ours: float, theirs: float, above: str, below: str) -> str:
    """'1.19x (faster)': headrace's figure over the peer's, and what that means for this figure."""
    ratio = ours / theirs if theirs else float("inf")
    return f"{ratio:.2f}x ({above if ratio > 1 else below if ratio < 1 else 'the same'})"


def main(args: argparse.Namespace) -> int:
    loaded = load_pipeline(args)
    pipe = loaded.pipe
    check_runnable(pipe)
    plan = None
    if args.vs == "torchvision":
        from headrace.cli.torchvision_peer import match, require_torchvision

        plan = match(pipe)  # refuse before anything runs
        require_torchvision()
        if loaded.uses_gpu:
            raise CliError("--vs torchvision compares CPU pipelines; drop --device gpu")
    epochs, batches = (1, args.batches) if args.batches else (args.epochs, None)
    per_epoch = batches or batches_per_epoch(pipe)
    device = "gpu" if loaded.uses_gpu else "cpu"
    say(f"{loaded.path}: batch size {pipe.batch_size}, {pipe.num_threads} threads, device {device}, "
        f"{epochs} x {per_epoch} batches" + (f" ({'; '.join(loaded.changes)})" if loaded.changes else ""))
    try:
        results = [bench_headrace(pipe, epochs, per_epoch, loaded.uses_gpu, not args.no_progress)]
    finally:
        pipe.close()
    if plan is not None:
        say(f"torchvision: {plan.describe()}, DataLoader(batch_size={pipe.batch_size}, "
            f"num_workers={pipe.num_threads})")
        results.append(bench_torchvision(plan, pipe.batch_size, pipe.num_threads, epochs, batches,
                                         not args.no_progress))
    _report(results)
    return 0
