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
STOP_TIMEOUT_S = 60.0  # how long `close` waits for the worker's last run


class BackgroundRunner:
    """A BatchRunner on a worker thread. The requests handed over while a run was under way are run together next,
    and every request is answered exactly once, in order, whatever fails: the worker never stops before `close`."""

    def __init__(self, runner: BatchRunner, on_error: Callable[[str], None],
                 on_done: Callable[[int, float, float], None] | None = None, waiting: int = 1, senders: int = 0):
        self.runner = runner
        self.on_error = on_error
        self.on_done = on_done  # (requests, seconds running, seconds answering) after each run
        # a run's answers but the last go out side by side on `senders` threads: one that waits on another process
        # (a Triton response sender) holds up neither the others nor the next run
        self._senders = ThreadPoolExecutor(senders, thread_name_prefix="headrace-answer") if senders else None
        self._queue: queue.Queue = queue.Queue(maxsize=max(waiting, 1))
        self._taken = threading.Semaphore(0) if waiting == 0 else None  # released per hand-over the worker takes
        self._lock = threading.Lock()  # submit against close: nothing is handed over after the stop
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="headrace-background", daemon=True)
        self._thread.start()

    def submit(self, pending: Sequence[Pending]) -> None:
        """Hand over one execute's requests. Blocks while `waiting` hand-overs wait already (with 0, until the worker
        takes these), so that Triton keeps batching requests while the worker is busy."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the background runner is closed")
            self._queue.put(list(pending))
        if self._taken is not None:
            self._taken.acquire()

    def close(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Answer everything handed over, then stop the worker and the response threads. False where the worker did
        not stop within `timeout` (a run that hangs): then nothing is shut down under it."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(_STOP)  # the worker empties the queue, so this waits at most for one run
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        if self._senders is not None:
            self._senders.shutdown(wait=True)
        return True

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
            del batch  # the answered requests' inputs and senders go now, not at the next hand-over

    def _took(self) -> None:
        if self._taken is not None:
            self._taken.release()

    def _run(self, batch: list[Pending]) -> None:
        answered = 0
        try:
            start = time.perf_counter()
            try:
                results: Sequence[Result] = self.runner.run([p.inputs for p in batch])
            except Exception as exc:  # noqa: BLE001 - BatchRunner answers bad requests itself; this is anything else
                self._report(f"headrace: a pipeline run failed: {type(exc).__name__}: {exc}")
                results = [RequestError(f"the pipeline failed: {type(exc).__name__}: {exc}")] * len(batch)
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} results for {len(batch)} requests")
            ran = time.perf_counter()
            for pending, result in zip(batch, results, strict=True):
                if self._senders is not None and answered < len(batch) - 1:
                    self._senders.submit(self._answer, pending, result)
                else:
                    self._answer(pending, result)
                answered += 1
            if self.on_done is not None:
                self.on_done(len(batch), ran - start, time.perf_counter() - ran)
        except Exception as exc:  # noqa: BLE001 - the worker outlives anything; the unanswered get an error
            self._report(f"headrace: the background worker failed: {type(exc).__name__}: {exc}")
            for pending in batch[answered:]:
                self._answer(pending, RequestError(f"the server failed to answer: {type(exc).__name__}: {exc}"))

    def _answer(self, pending: Pending, result: Result) -> None:
        """`pending.answer(result)`; where that fails (outputs the server cannot take), an error once more, so that
        the request is not left waiting; where that fails too (a cancelled request), a report."""
        try:
            pending.answer(result)
            return
        except Exception as exc:  # noqa: BLE001 - one unanswerable request stops nothing
            failure = f"{type(exc).__name__}: {exc}"
        try:
            pending.answer(RequestError(f"its response could not be sent: {failure}"))
        except Exception:  # noqa: BLE001 - reported below
            pass
        self._report(f"headrace: a response could not be sent: {failure}")

    def _report(self, message: str) -> None:
        try:
            self.on_error(message)
        except Exception:  # noqa: BLE001 - a failing logger must not stop the worker
            pass


__all__ = ["STOP_TIMEOUT_S", "BackgroundRunner", "Pending"]
