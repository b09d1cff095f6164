"""`headrace wds2idx ARCHIVE [INDEX]`: the index file of a webdataset tar archive, in DALI's format v1.2 (what
readers.webdataset, and DALI's, read instead of scanning the archive)."""

from __future__ import annotations

import argparse
from pathlib import Path

from headrace.cli.common import CliError, add_command, say
from headrace.readers.webdataset import index_text, scan_archive


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "wds2idx", "write the index file of a webdataset tar archive (DALI's format)",
                         main)
    parser.add_argument("archive", metavar="ARCHIVE", type=Path, help="a webdataset tar archive")
    parser.add_argument("index", metavar="INDEX", type=Path, nargs="?",
                        help="the index file to write (default: the archive's name up to its first dot, + .idx)")


def default_index(archive: Path) -> Path:
    """DALI's wds2idx default: the archive's path with its name cut at the first dot (after the first character)."""
    name = archive.name
    dot = name.find(".", 1)
    return archive.with_name((name if dot < 0 else name[:dot]) + ".idx")


def main(args: argparse.Namespace) -> int:
    if not args.archive.is_file():  # a FIFO or a device would block or be read forever
        raise CliError(f"{args.archive}: not a regular file")
    try:
        samples = scan_archive(str(args.archive))
    except ValueError as exc:
        raise CliError(f"{args.archive} {exc}") from None
    if not samples:
        raise CliError(f"{args.archive}: the archive holds no sample")
    index = args.index or default_index(args.archive)
    index.write_text(index_text(samples))
    say(f"{len(samples)} samples of {args.archive} indexed in {index}")
    return 0
