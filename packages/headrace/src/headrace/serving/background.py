"""Serving on a thread of its own: `execute` hands its requests over and returns at once, so that Triton gives the
instance its next batch while this one runs, and each request is answered through its own callback (a Triton
response sender). Requests handed over while a run is under way are run together next. Knows nothing of Triton."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from headrace.serving.batching import BatchRunner, RequestError

Result = list[Any] | RequestError


@dataclass(frozen=True)
class Pending:
    """A request waiting for its run: its inputs (host arrays it owns) and where its outputs or error go."""

    inputs: Mapping[str, Any]
    answer: Callable[[Result], None]


_STOP = object()


class BackgroundRunner:
    """A BatchRunner on a worker thread. `submit` queues the requests of one execute; the worker takes everything
    queued (so requests that arrived during a run share the next one), runs it and answers each request in order.
    At most `waiting` hand-overs wait for the worker: `submit` blocks beyond that, so that Triton keeps batching
    requests while the worker is busy, instead of handing over one execute per request (with 0, `submit` returns
    once the worker has taken its requests). With `senders` threads,
    all answers of a run but its last go out on them, side by side (an answer that waits on another process, as a
    Triton response sender does, then holds up neither the others nor the next run). A failing answer is reported
    through `on_error` and never stops the worker."""

    def __init__(self, runner: BatchRunner, on_error: Callable[[str], None],
                 on_done: Callable[[int, float, float], None] | None = None, waiting: int = 1, senders: int = 0):
        self.runner = runner
        self.on_error = on_error
        self.on_done = on_done  # (requests, seconds running, seconds answering) after each run
        self._senders = ThreadPoolExecutor(senders, thread_name_prefix="headrace-answer") if senders else None
        self._queue: queue.Queue = queue.Queue(maxsize=max(waiting, 1))
        self._taken = threading.Semaphore(0) if waiting == 0 else None  # released per hand-over the worker takes
        self._thread = threading.Thread(target=self._serve, name="headrace-background", daemon=True)
        self._thread.start()

    def submit(self, pending: Sequence[Pending]) -> None:
        if not self._thread.is_alive():
            raise RuntimeError("the background runner is closed")
        self._queue.put(list(pending))
        if self._taken is not None:
            self._taken.acquire()

    def close(self, timeout: float = 60.0) -> None:
        """Answer everything queued, then stop the worker."""
        if self._thread.is_alive():
            self._queue.put(_STOP, timeout=timeout)
            self._thread.join(timeout)
        if self._senders is not None:
            self._senders.shutdown(wait=True)

    def _serve(self) -> None:
        stopping = False
        while not stopping:
            batch = self._queue.get()
            if batch is _STOP:
                return
            self._took()
            while True:  # whatever else is queued joins this run
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stopping = True
                    break
                self._took()
                batch += more
            self._run(batch)

    def _took(self) -> None:
        if self._taken is not None:
            self._taken.release()

    def _run(self, batch: list[Pending]) -> None:
        start = time.perf_counter()
        try:
            results: Sequence[Result] = self.runner.run([p.inputs for p in batch])
        except Exception as exc:  # noqa: BLE001 - BatchRunner answers bad requests itself; this is anything else
            results = [RequestError(f"the pipeline failed: {type(exc).__name__}: {exc}")] * len(batch)
        ran = time.perf_counter()
        for i, (pending, result) in enumerate(zip(batch, results, strict=True)):
            if self._senders is not None and i < len(batch) - 1:
                self._senders.submit(self._answer, pending, result)
            else:
                self._answer(pending, result)
        if self.on_done is not None:
            self.on_done(len(batch), ran - start, time.perf_counter() - ran)

    def _answer(self, pending: Pending, result: Result) -> None:
        try:
            pending.answer(result)
        except Exception as exc:  # noqa: BLE001 - one unanswerable request (a cancelled one) stops nothing
            self.on_error(f"headrace: a response could not be sent: {type(exc).__name__}: {exc}")


__all__ = ["BackgroundRunner", "Pending"]
