"""placeholder"""
from headrace.cli.common import add_command


def add_parser(subparsers) -> None:
    add_command(subparsers, "bench", "todo", main)


def main(args):
    return 0
