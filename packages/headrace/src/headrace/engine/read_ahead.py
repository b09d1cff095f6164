"""A CPU pipeline's next batch read while this batch's CPU ops run: the readers' phase of batch i+1 on its own
thread, as DALI's loaders read ahead of its operators. The thread pool then stays busy through a batch's serial
parts (whole-batch ops such as normalize and pad, collecting the outputs). The readers still read one batch after
the other, in order, and the ops draw per sample, so the outputs are the same bits."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future, wait

from headrace.engine.cpu_stage import CpuStage

CLOSE_WAIT_S = 10.0
"""How long close() waits for a read in flight before leaving it to its (daemon) thread."""


class _ReadThread:
    """One daemon thread running submitted calls in order. A daemon: a read that never returns (a source blocked
    for good) must not hold the interpreter at exit, as a ThreadPoolExecutor's thread would."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True, name="headrace-read-ahead").start()

    def submit(self, function, *args) -> Future:
        future: Future = Future()
        self._jobs.put((future, function, args))
        return future

    def stop(self) -> None:
        self._jobs.put(None)

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._run(*job)
            job = None

    @staticmethod
    def _run(future: Future, function, args) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever takes the read
            future.set_exception(exc)
            future = None  # the error's traceback holds this frame: it must not hold the future holding the error
            return
        future.set_result(result)


class ReadAhead:
    """Runs a CpuStage's batches with the next batch's read started as soon as this batch's read is done."""

    def __init__(self, cpu: CpuStage):
        self.cpu = cpu
        self._thread = _ReadThread()
        self._next: tuple[int, Future] | None = None

    def run(self, iteration: int):
        """Batch `iteration` (CpuStage.run's result); starts reading batch `iteration + 1` once this one's read
        succeeded (a read that failed, or ended the data with StopIteration, is not followed by another)."""
        read = self._take(iteration)
        self._next = (iteration + 1, self._thread.submit(self.cpu.read, iteration + 1))
        return self.cpu.finish(iteration, read)

    def _take(self, iteration: int):
        pending, self._next = self._next, None
        if pending is not None:
            ahead, future = pending
            pending = None
            try:  # `future` goes when this returns or raises: no cycle through this frame holds a failed read
                if ahead == iteration:
                    return future.result()
                try:
                    future.result()  # read for another sequence of iterations (the caller started over): dropped
                except BaseException:  # noqa: BLE001 - nobody asked for it
                    pass
                self.cpu.states_after.pop(ahead, None)  # with the state it recorded for a checkpoint
            finally:
                future = None
        return self.cpu.read(iteration)

    def close(self) -> None:
        """Wait (a while) for a read in flight, whose readers must not be closed under it, and end the thread."""
        pending, self._next = self._next, None
        if pending is not None:
            wait([pending[1]], timeout=CLOSE_WAIT_S)
        self._thread.stop()
