"""placeholder"""
from headrace.cli.common import add_command


def add_parser(subparsers) -> None:
    add_command(subparsers, "serve", "todo", main)


def main(args):
    return 0
