"""`headrace triton-config FILE`: the Triton `config.pbtxt` of a pipeline file (written by headrace.serving)."""

from __future__ import annotations

import argparse
from pathlib import Path

from headrace.cli.common import CliError, add_command, say
from headrace.cli.loading import non_negative_int, positive_int, read_pipeline_file

INSTANCE_KINDS = {"cpu": "KIND_CPU", "gpu": "KIND_GPU"}


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "triton-config", "the Triton config.pbtxt of a pipeline file", main)
    parser.add_argument("file", metavar="FILE", type=Path, help="a pipeline file (JSON)")
    parser.add_argument("--model-name", help="the model's name (default: the file's name without .json)")
    parser.add_argument("--max-batch-size", type=positive_int,
                        help="the largest batch Triton sends (default: the file's batch_size)")
    parser.add_argument("--instance-kind", choices=tuple(INSTANCE_KINDS), default="cpu",
                        help="where the model instances run (default cpu)")
    parser.add_argument("--instance-count", type=positive_int, default=1,
                        help="model instances Triton runs side by side (default 1)")
    parser.add_argument("--max-queue-delay-us", type=non_negative_int, default=0, metavar="US",
                        help="how long Triton may hold a request to batch it with later ones (default 0, which "
                             "measured best for CPU and GPU instances: docs/serving.md)")
    parser.add_argument("--allow-module", action="append", default=[], metavar="MODULE", dest="allowed_modules",
                        help="trust this module for the user code the file names (repeatable); the served model "
                             "gets the same list as its allowed_modules parameter")
    parser.add_argument("--respond-in-background", action="store_true",
                        help="answer from a worker thread, so that an instance takes its next batch while one runs "
                             "(the respond_in_background parameter; docs/serving.md says when it pays)")
    parser.add_argument("--out", type=Path, help="write config.pbtxt here instead of printing it")


def serving_function(module: str, name: str):
    """`headrace.serving.<module>.<name>`, or a one-line error when serving support is not installed."""
    import importlib

    try:
        found = importlib.import_module(f"headrace.serving.{module}")
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == "headrace.serving" or exc.name.startswith("headrace.serving.")):
            raise CliError(f"serving support is not installed (this headrace has no headrace.serving.{module})") \
                from None
        raise CliError(f"serving support needs the Python package '{exc.name}', which is not installed") from None
    if not hasattr(found, name):
        raise CliError(f"serving support is not installed (headrace.serving.{module} has no {name})")
    return getattr(found, name)


def main(args: argparse.Namespace) -> int:
    triton_config = serving_function("config", "triton_config")
    read_pipeline_file(args.file)  # a missing or malformed file is reported as for every other subcommand
    model_name = args.model_name or args.file.stem
    text = triton_config(pipeline_file=str(args.file), model_name=model_name, max_batch_size=args.max_batch_size,
                         instance_kind=INSTANCE_KINDS[args.instance_kind], instance_count=args.instance_count,
                         max_queue_delay_us=args.max_queue_delay_us,
                         allowed_modules=args.allowed_modules,
                         parameters={"respond_in_background": "true"} if args.respond_in_background else None)
    if args.out is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    say(f"config.pbtxt of model '{model_name}' written to {args.out}")
    return 0
