"""A helper interpreter talking to this process over two pipes: the CPU stage's worker (headrace's cpu_process) and
the fused chain's plan helper (gpu/plan_process). A new interpreter, not a fork (the pipeline's process has CUDA
and threads) nor multiprocessing's spawn (that imports the user's main module again)."""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection


def start_interpreter(code: str) -> tuple[subprocess.Popen, Connection, Connection]:
    """(the process, the pipe this process sends requests on, the pipe it receives replies on) of a new interpreter
    running `code`, which finds its ends of the pipes as file descriptors in sys.argv[1] (requests) and sys.argv[2]
    (replies); it imports from this process's sys.path."""
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        process = subprocess.Popen([sys.executable, "-c", code, str(requests_read), str(replies_write)],
                                   pass_fds=(requests_read, replies_write), stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    except BaseException:
        for fd in (requests_read, requests_write, replies_read, replies_write):
            os.close(fd)
        raise
    os.close(requests_read)
    os.close(replies_write)
    return process, Connection(requests_write, readable=False), Connection(replies_read, writable=False)


def stop_interpreter(process: subprocess.Popen, requests: Connection, replies: Connection) -> None:
    """Ask the interpreter to stop (("stop",)), close the pipes, and kill it if it has not ended within 5 s."""
    try:
        requests.send(("stop",))
    except OSError:
        pass
    requests.close()
    replies.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
