"""`headrace tfrecord2idx FILE INDEX`: the index file of a TFRecord file, in DALI's format ('offset size' per record),
which readers.tfrecord (and DALI's) need; every record's framing and CRCs are checked on the way."""

from __future__ import annotations

import argparse
import os
import struct
from pathlib import Path

from headrace import tfrecord
from headrace.cli.common import CliError, add_command, say


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "tfrecord2idx", "write the index file of a TFRecord file (DALI's format)", main)
    parser.add_argument("file", metavar="FILE", type=Path, help="a TFRecord file")
    parser.add_argument("index", metavar="INDEX", type=Path, help="the index file to write")


def record_spans(path: Path) -> list[tuple[int, int]]:
    """(offset, size) of every record of a TFRecord file, read front to back; CliError at the first bad record."""
    spans = []
    size = os.path.getsize(path)
    with open(path, "rb") as file:
        offset = 0
        while offset < size:
            where = f"{path}: record {len(spans)} at offset {offset}"
            header = file.read(12)
            if len(header) < 12:
                raise CliError(f"{where}: the file ends inside the record's header (truncated)")
            length, crc = struct.unpack("<QI", header)
            if crc != tfrecord.masked_crc32c(header[:8]):
                raise CliError(f"{where}: the CRC of the record's length does not match (not a TFRecord file?)")
            if offset + 16 + length > size:
                raise CliError(f"{where}: the record's {length} bytes run past the end of the file (truncated)")
            data = file.read(length)
            (data_crc,) = struct.unpack("<I", file.read(4))
            if data_crc != tfrecord.masked_crc32c(data):
                raise CliError(f"{where}: the CRC of the record's data does not match (corrupt data)")
            spans.append((offset, 16 + length))
            offset += 16 + length
    return spans


def main(args: argparse.Namespace) -> int:
    if not args.file.is_file():  # a FIFO or a device would block or be read forever
        raise CliError(f"{args.file}: not a regular file")
    spans = record_spans(args.file)
    args.index.write_text("".join(f"{offset} {size}\n" for offset, size in spans))
    say(f"{len(spans)} records of {args.file} indexed in {args.index}")
    return 0
