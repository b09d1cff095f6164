"""A CPU pipeline's next batch read while this batch's CPU ops run: the readers' phase of batch i+1 on its own
thread, as DALI's loaders read ahead of its operators. The thread pool then stays busy through a batch's serial
parts (whole-batch ops such as normalize and pad, collecting the outputs). The readers still read one batch after
the other, in order, and the ops draw per sample, so the outputs are the same bits."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from headrace.engine.cpu_stage import CpuStage


class ReadAhead:
    """Runs a CpuStage's batches with the next batch's read started as soon as this batch's read is done."""

    def __init__(self, cpu: CpuStage):
        self.cpu = cpu
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="headrace-read-ahead")
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
            finally:
                future = None
        return self.cpu.read(iteration)

    def close(self) -> None:
        """Wait for a read in flight (its readers must not be closed under it) and end the thread."""
        pending, self._next = self._next, None
        if pending is not None:
            try:
                pending[1].result()
            except BaseException:  # noqa: BLE001 - nobody asked for it
                pass
        self._thread.shutdown(wait=True)
