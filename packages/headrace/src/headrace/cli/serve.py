"""`headrace serve MODEL_REPOSITORY`: start a real Triton server (headrace.serving) on a model repository, print
where it listens, and stop it cleanly on Ctrl-C (SIGINT) or SIGTERM."""

from __future__ import annotations

import argparse
import errno
import signal
import socket
import time
from pathlib import Path

from headrace.cli.common import CliError, add_command, say
from headrace.cli.triton_config import serving_function

PORT_OPTIONS = ("http_port", "grpc_port", "metrics_port")


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "serve", "start a Triton server on a model repository; Ctrl-C stops it", main)
    parser.add_argument("repository", metavar="MODEL_REPOSITORY", type=Path, help="a Triton model repository")
    parser.add_argument("--http-port", type=int, help="HTTP port (default: a free one)")
    parser.add_argument("--grpc-port", type=int, help="gRPC port (default: a free one)")
    parser.add_argument("--metrics-port", type=int, help="metrics port (default: a free one)")
    parser.add_argument("--triton-arg", action="append", default=[], metavar="--OPTION=VALUE",
                        help="one more tritonserver option, as --triton-arg=--OPTION=VALUE (repeatable), e.g. "
                             "--triton-arg=--log-verbose=1")
    parser.add_argument("--memory-pools", action=argparse.BooleanOptionalAction, default=True,
                        help="start tritonserver with the Docker image's memory pools (512 MB of CUDA memory on GPU "
                             "0, 512 MB pinned; skipped without a GPU) where --triton-arg does not set them (default "
                             "on)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the server to become ready (default 60)")


def check_port_free(port: int, option: str) -> None:
    """A one-line error when `port` is out of range or something listens on it already."""
    if not 0 < port < 65536:
        raise CliError(f"--{option.replace('_', '-')} {port}: not a port number (1 to 65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliError(f"--{option.replace('_', '-')} {port}: the port is in use") from None
            if exc.errno == errno.EACCES:
                raise CliError(f"--{option.replace('_', '-')} {port}: no permission to listen on it") from None
            raise


def first_and_last_line(exc: BaseException) -> str:
    """An error whose message carries a log tail, in one line: its first line and the log's last one."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} (last log line: {lines[-1]})"


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    if not args.repository.is_dir():
        raise CliError(f"model repository '{args.repository}' is not a folder")
    ports = {name: getattr(args, name) for name in PORT_OPTIONS}
    for name, port in ports.items():
        if port is not None:
            check_port_free(port, name)
    start_server = serving_function("server", "start_server")
    extra_args = tuple(args.triton_arg)
    if args.memory_pools:
        extra_args = serving_function("server", "with_memory_pools")(extra_args)
    try:
        handle = start_server(str(args.repository), timeout=args.timeout, extra_args=extra_args, **ports)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # whatever stopped the server from starting, said in one line
        raise CliError(f"the Triton server did not start: {first_and_last_line(exc)}") from exc
    # Both signals stop the server, also where SIGINT was ignored when we started (a job run with `&`).
    previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        say(f"Triton server ready on {args.repository}")
        http_url = handle.http_url if "://" in handle.http_url else f"http://{handle.http_url}"
        say(f"  http: {http_url}")
        say(f"  grpc: {handle.grpc_url}")
        say("Ctrl-C stops it")
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        handle.stop()
    say("Triton server stopped")
    return 0
