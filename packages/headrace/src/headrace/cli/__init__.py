"""The `headrace` command: run, inspect, preview, benchmark and serve pipeline files; index record files.

Every subcommand lives in its own module with `add_parser(subparsers)` and `main(args) -> int`. Errors a user can
cause print one line and exit non-zero; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from headrace.cli.common import CliError, OneLineParser, user_error_message

SUBCOMMANDS = ("run", "demo", "inspect_graph", "preview", "bench", "triton_config", "serve", "tfrecord2idx", "wds2idx",
               "warmup")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand, each added by its own module."""
    from headrace import __version__

    parser = OneLineParser(prog="headrace", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"headrace {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name in SUBCOMMANDS:
        importlib.import_module(f"headrace.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse `argv`, run the subcommand, and turn user errors into one line on stderr and a non-zero status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("headrace: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the one place that turns errors into a message
        if args.debug:
            raise
        message, is_user_error = user_error_message(exc)
        if not is_user_error:
            message += " (an unexpected error; run with --debug for the traceback)"
        print(f"headrace {args.command}: error: {message}", file=sys.stderr)
        return 1


def entry_point() -> None:
    """The console script."""
    sys.exit(main())


__all__ = ["CliError", "entry_point", "main"]
