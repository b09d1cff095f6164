"""`python -m headrace` is the `headrace` command."""

from headrace.cli import entry_point

entry_point()
