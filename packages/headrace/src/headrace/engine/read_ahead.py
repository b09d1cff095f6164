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


class _SerialThread:
    """One daemon thread running submitted calls in order. A daemon: a read that never returns (a source blocked
    for good) must not hold the interpreter at exit, as a ThreadPoolExecutor's thread would."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True, name=name).start()

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
    """Runs a CpuStage's batches with the next batch's read started as soon as this batch's read is done. With
    `overlap`, the next batch's CPU ops start then too, on one of two driver threads taking batches in turn: the
    pool's workers go from the end of one batch straight to the next instead of idling through the batch's last
    sample and the hand-offs between batches. Only for ops without side effects across samples (the executor
    decides): two batches' samples then run at the same time."""

    def __init__(self, cpu: CpuStage, overlap: bool = False):
        self.cpu = cpu
        self._thread = _SerialThread("headrace-read-ahead")
        self._drivers = (_SerialThread("headrace-batches-0"), _SerialThread("headrace-batches-1")) if overlap else ()
        # iteration -> (its read, its CPU ops' result on a driver; None: the caller runs them)
        self._pending: dict[int, tuple[Future, Future | None]] = {}

    def run(self, iteration: int):
        """Batch `iteration` (CpuStage.run's result); starts reading batch `iteration + 1` once this one's read
        succeeded (a read that failed, or ended the data with StopIteration, is not followed by another)."""
        for ahead in [i for i in self._pending if i != iteration]:
            self._drop(ahead, *self._pending.pop(ahead))
        if iteration not in self._pending:
            self._start(iteration)
        read, result = self._pending.pop(iteration)
        try:  # the next batch starts once this one's read succeeded, as the sequential pipeline would read it
            if read.exception() is None:
                self._start(iteration + 1)
            return self._finish(iteration, read) if result is None else result.result()
        finally:  # no cycle through this frame holds a failed batch
            read = result = None

    def _drop(self, ahead: int, *futures: Future | None) -> None:
        """Wait for work done ahead for another sequence of iterations (the caller started over) and drop it, with
        the state its read recorded for a checkpoint."""
        for future in futures:
            try:
                if future is not None:
                    future.result()
            except BaseException:  # noqa: BLE001 - nobody asked for it
                pass
        self.cpu.states_after.pop(ahead, None)

    def _start(self, iteration: int) -> None:
        read = self._thread.submit(self.cpu.read, iteration)
        result = self._drivers[iteration % 2].submit(self._finish, iteration, read) if self._drivers else None
        self._pending[iteration] = (read, result)

    def _finish(self, iteration: int, read: Future):
        try:
            batch = read.result()
        finally:  # a failed read's error, raised again here, must not hold (through this frame) the future holding it
            read = None
        return self.cpu.finish(iteration, batch)

    def close(self) -> None:
        """Wait (a while) for the work in flight, whose readers must not be closed under it, and end the threads."""
        futures = [f for pair in self._pending.values() for f in pair if f is not None]
        self._pending.clear()
        if futures:
            wait(futures, timeout=CLOSE_WAIT_S)
        for thread in (self._thread, *self._drivers):
            thread.stop()
