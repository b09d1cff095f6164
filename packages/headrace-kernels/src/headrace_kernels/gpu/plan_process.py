"""The fused resize + crop_mirror_normalize's host plan computed in a helper process (executor option
`plan_process`): the sample records and tap-table axes depend only on the images' shapes and the samples' arguments,
so a process of their own computes them with its own interpreter lock, and the pipeline's threads wait for the
answer without holding theirs. The pipeline's process then only writes the images' addresses and places the plan.
The helper runs the same `plan_crop_mirror_normalize` on the same argument values, so the plan is the same bits;
where it fails or is gone, the pipeline plans in its own process (which then names a bad sample)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from headrace_kernels.gpu.image_ops import Batch, plan_crop_mirror_normalize
from headrace_kernels.gpu.packing import sample_args
from headrace_kernels.interpreter_process import start_interpreter, stop_interpreter

_START = "from headrace_kernels.gpu.plan_process import main; main()"
ANSWER_SECONDS = 60.0
"""How long a plan may take in the helper before it counts as hung (its first includes compiling the planning
code's loops): then it is stopped and the pipeline plans in its own process."""


def host_plan(spec: dict, shapes: np.ndarray, columns: list[dict[str, list]], per_sample_norm: bool) -> tuple:
    """(records, tap tables, output type, output channels, CHW, normalize, channels, input type name) of a batch of
    packed uint8 HWC images of `shapes` (n, 3), with `columns` per op of the chain (`spec["parts"]`' order);
    `per_sample_norm`: crop_mirror_normalize's mean or std come per sample."""
    n = len(shapes)
    args = [sample_args(literal, part, n) for literal, part in zip(spec["parts"], columns, strict=True)]
    flips = args[0] if spec["flip"] else None
    colours = [(op, args[part]) for part, op in spec["colours"]]
    packed = (np.zeros(n, np.uint64), shapes)
    batch, out_dtype, out_channels, chw, normalize = plan_crop_mirror_normalize(
        [None] * n, args[-1], per_sample_norm, args[spec["resize"]], packed, flips, colours)
    return batch.rec, batch.tables, out_dtype, out_channels, chw, normalize, batch.channels, batch.in_dtype


def main() -> None:
    """The helper's loop: ("plan", shapes, columns, per_sample_norm) -> ("ok", host_plan) or ("error", message);
    it ends when its pipe closes or on ("stop",)."""
    requests = Connection(int(sys.argv[1]), writable=False)
    replies = Connection(int(sys.argv[2]), readable=False)
    spec = requests.recv()
    while True:
        try:
            message = requests.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        try:
            reply = ("ok", host_plan(spec, *message[1:]))
        except Exception as exc:  # noqa: BLE001 - the pipeline plans again in its process and reports it there
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            replies.send(reply)
        except (BrokenPipeError, OSError):
            return


class PlanProcess:
    """One helper process for one fused step: `plan` asks it for a batch's host plan and waits (the interpreter lock
    released meanwhile). None from `plan` means: plan in this process (the helper failed on this batch, or is gone
    or hung; such a helper is not asked again). A forked copy of the pipeline's process never uses its parent's
    helper."""

    def __init__(self, spec: dict, answer_seconds: float = ANSWER_SECONDS):
        """`spec` (chain_spec): the chain's literal arguments per op, which part is the resize and which the colour
        ops, whether a flip leads it."""
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self.answer_seconds = answer_seconds
        self._asked = self._received = 0  # requests sent, replies read (tickets count from 1)
        self._process: subprocess.Popen | None = None
        self._process, self._requests, self._replies = start_interpreter(_START)
        self._requests.send(spec)

    @classmethod
    def start(cls, spec: dict) -> PlanProcess | None:
        """A helper for `spec`, or None with a warning where no interpreter can be started (an embedding process,
        as Triton's stub, may not name one): the pipeline then plans in its own process."""
        try:
            if not sys.executable:
                raise OSError("this interpreter does not name its executable (sys.executable is empty)")
            return cls(spec)
        except OSError as exc:
            warnings.warn(f"headrace: the plan helper process could not start ({exc}); the fused resize + normalize "
                          "is planned in the pipeline's process", RuntimeWarning, stacklevel=3)
            return None

    def plan(self, shapes: np.ndarray, columns: list[dict[str, list]], per_sample_norm: bool) -> tuple | None:
        """The helper's `host_plan` of this batch, or None (plan it here)."""
        return self.answer(self.submit(shapes, columns, per_sample_norm))

    def submit(self, shapes: np.ndarray, columns: list[dict[str, list]], per_sample_norm: bool) -> int | None:
        """Ask for this batch's `host_plan` without waiting: the ticket to `answer` with, or None (plan it here).
        Answers come in the order asked."""
        with self._lock:
            if self._process is None or os.getpid() != self._owner:
                return None
            try:
                self._requests.send(("plan", shapes, columns, per_sample_norm))
            except OSError:
                self._gone()
                return None
            self._asked += 1
            return self._asked

    def answer(self, ticket: int | None) -> tuple | None:
        """The `host_plan` asked for with `ticket`, or None (plan it here). Answers to earlier tickets that nobody
        collected are dropped on the way (their batches were dropped or failed); a ticket whose answer went so
        gets None."""
        if ticket is None:
            return None
        reply = None
        with self._lock:
            while reply is None and self._received < ticket and self._process is not None:
                try:
                    if not self._replies.poll(self.answer_seconds):
                        self._give_up(f"did not answer within {self.answer_seconds:g} s")
                        break
                    received = self._replies.recv()
                except (EOFError, OSError):
                    self._gone()
                    break
                self._received += 1
                if self._received == ticket:  # the replies before it: batches nobody collected
                    reply = received
        return reply[1] if reply is not None and reply[0] == "ok" else None

    def _gone(self) -> None:
        code = self._process.poll()
        self._give_up("is gone" + (f" (exit code {code})" if code is not None else ""))

    def _give_up(self, what: str) -> None:
        warnings.warn(f"headrace: the plan helper process (pid {self._process.pid}) {what}; the fused resize + "
                      "normalize is planned in the pipeline's process from now on", RuntimeWarning, stacklevel=4)
        self._process.kill()
        self._stop()

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if os.getpid() != self._owner:  # a fork: the helper is the parent's to stop
            return
        stop_interpreter(process, self._requests, self._replies)

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def adopt(images: list, addresses: np.ndarray, answer: tuple) -> tuple:
    """A plan from the helper's answer for the decoded `images` at `addresses`: (Batch, output type, output channels,
    CHW, normalize), as `plan_crop_mirror_normalize` returns it."""
    rec, tables, out_dtype, out_channels, chw, normalize, channels, in_dtype = answer
    rec["in"] = addresses
    batch = Batch(list(images), channels, in_dtype, np.dtype(in_dtype), rec=rec)
    batch.tables = tables
    return batch, out_dtype, out_channels, chw, normalize


def chain_spec(parts: tuple[dict[str, Any], ...], flip: bool, resize: int, colours: list[tuple[int, str]]) -> dict:
    """The helper's description of a fused chain (PlanProcess): the literal arguments of each op, whether a flip
    leads it, which part is the resize and which the colour ops ((part, op) pairs)."""
    return {"parts": list(parts), "flip": flip, "resize": resize, "colours": colours}
