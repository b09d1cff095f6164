"""What every subcommand shares: the error type, a parser whose errors are one line, and how a subcommand is added."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from headrace.errors import HeadraceError


class CliError(Exception):
    """A mistake the user can fix (a missing file, a busy port, no GPU); printed as one line, no traceback."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line that points at --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_command(subparsers, name: str, help: str, handler: Callable[[argparse.Namespace], int | None],
                description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand parser that calls `handler(args)`; `--debug` works after the subcommand too."""
    parser = subparsers.add_parser(name, help=help, description=description or help)
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error")
    parser.set_defaults(handler=handler)
    return parser


def user_error_message(exc: BaseException) -> tuple[str, bool]:
    """(one line describing `exc`, whether it is an error the user caused)."""
    is_user_error = isinstance(exc, CliError | HeadraceError | OSError)
    if isinstance(exc, FileNotFoundError) and exc.filename:
        text = f"{exc.filename}: no such file or directory"
    elif isinstance(exc, OSError) and exc.strerror and exc.filename:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    if not is_user_error:
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split()), is_user_error


class MissingDependencyError(CliError):
    """An optional package a subcommand needs is not installed."""


def need(module: str, purpose: str, install: str = "pip install 'headrace[cli]'"):
    """Import `module`, or raise a MissingDependencyError that says what needs it and how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(f"{purpose} needs the Python package '{module.split('.')[0]}', which is not "
                                f"installed ({install})") from exc


def say(line: str) -> None:
    """A result line on stdout (progress bars go to stderr)."""
    print(line, file=sys.stdout, flush=True)
