"""`headrace run FILE`: run a pipeline file for some batches or epochs behind a progress bar, print throughput."""

from __future__ import annotations

import argparse

from headrace.cli.common import add_command, say
from headrace.cli.loading import add_loading_options, load_pipeline, positive_int
from headrace.cli.progress import Span, batches_per_epoch, check_runnable, first_batch, rate_text, run_span


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "run", "run a pipeline file with a progress bar and print its throughput", main)
    add_loading_options(parser)
    add_length_options(parser, default_epochs=1)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")


def add_length_options(parser: argparse.ArgumentParser, default_epochs: int) -> None:
    """--batches / --epochs: how long to run."""
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--batches", type=positive_int, help="run this many batches")
    length.add_argument("--epochs", type=positive_int,
                        help=f"run this many epochs of the reader (default {default_epochs}; pipelines without a file "
                             "reader run 10 batches)")
    parser.set_defaults(default_epochs=default_epochs)


def plan(pipe, args: argparse.Namespace) -> tuple[int, int, bool]:
    """(epochs, batches per epoch, whether these are reader epochs) that --batches / --epochs ask for; a run of N
    batches counts as one 'epoch'."""
    if args.batches is not None:
        return 1, args.batches, False
    has_reader = any(n.schema.state == "reader" for n in pipe.graph.nodes)
    if args.epochs is None and not has_reader:
        return 1, 10, False
    return args.epochs or args.default_epochs, batches_per_epoch(pipe), True


def main(args: argparse.Namespace) -> int:
    loaded = load_pipeline(args)
    pipe = loaded.pipe
    check_runnable(pipe)
    epochs, batches, by_epoch = plan(pipe, args)
    device = "gpu" if loaded.uses_gpu else "cpu"
    say(f"{loaded.path}: batch size {pipe.batch_size}, {pipe.num_threads} threads, device {device}"
        + (f" ({'; '.join(loaded.changes)})" if loaded.changes else ""))
    try:
        startup, outputs = first_batch(pipe)
        say(f"build + first batch: {startup:.2f} s")
        total = Span()
        remaining = epochs * batches - 1  # the first batch is already done
        for epoch in range(epochs):
            count = min(batches - (1 if epoch == 0 else 0), remaining)
            if count <= 0:
                break
            span = run_span(pipe, count, f"epoch {epoch}" if by_epoch else "batches",
                            progress=not args.no_progress)
            remaining -= span.batches
            total.batches += span.batches
            total.samples += span.samples
            total.seconds += span.seconds
            what = f"epoch {epoch}" if by_epoch else "run"
            if epoch == 0:
                say(f"{what}: {span.batches + 1} batches; after the first (timed with the build): {span.batches} "
                    f"batches, {span.samples} samples in {span.seconds:.2f} s, {rate_text(span.rate)}")
            else:
                say(f"{what}: {span.batches} batches, {span.samples} samples in {span.seconds:.2f} s, "
                    f"{rate_text(span.rate)}")
        if total.batches == 0:  # one batch only: its rate includes building the pipeline
            say(f"throughput: {rate_text(len(outputs[0]) / startup)} (one batch, build included)")
            return 0
        say(f"throughput: {rate_text(total.rate)} over {total.batches} batches after the first "
            f"({total.samples} samples, {total.seconds:.2f} s)")
    finally:
        pipe.close()
    return 0
