"""Decode lanes: a thread and a CUDA stream of its own for each nvImageCodec decoder of a mixed decoder node.

nvImageCodec's batch decode call does most of its host work on the calling thread (about 13 ms for 256 crops on an
H100's hardware decoder). Handed to a lane, a batch decodes while the pipeline's threads go on: the next batch's
decode runs while this one is resized, as DALI's mixed stage runs ahead of its GPU stage. Two lanes that each
decode half of a batch on two decoders take about half the time (benchmarks/HISTORY.md)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np

from headrace_kernels.gpu.affinity import keep_thread_on
from headrace_kernels.gpu.cupy_module import cupy

SPLIT_FROM = 64
"""The smallest batch split across two lanes (at hw_decoder_load 1)."""
MEMBER_LANES = 2
"""The lanes that decode the batches of a coalesced batch in turn, where each batch decodes whole (one call)."""
AHEAD_FROM = 64
"""The smallest batch handed to a lane ahead: a smaller one decodes in the calling thread, where the hand-offs'
waits for the GIL would cost more than its decode overlaps (SSD300's batches of 32, a request)."""


class DecodeLane:
    """One decoder's thread, stream and lock: the parts handed to it decode in turn on its stream, and the caller
    may also decode on it directly, holding `lock` (one decode call at a time per decoder)."""

    def __init__(self, device_id: int, cpus: frozenset[int] | None = None):
        cp = cupy()
        self.device_id, self.cpus = device_id, cpus  # the CPUs its thread runs on (None: the scheduler's choice)
        with cp.cuda.Device(device_id):
            self.stream = cp.cuda.Stream(non_blocking=True)
        self.lock = threading.Lock()
        self._thread: ThreadPoolExecutor | None = None
        self._thread_lock = threading.Lock()  # a part handed over while the lane closes goes to its next thread

    def submit(self, work: Callable[[DecodeLane], np.ndarray]) -> Future:
        """Run `work(self)` on the lane's thread, after the parts handed to it before."""
        with self._thread_lock:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix="headrace-decode", initializer=keep_thread_on,
                                                  initargs=(self.cpus,))
            return self._thread.submit(self._run, work)

    def _run(self, work: Callable[[DecodeLane], np.ndarray]) -> np.ndarray:
        # done on the device before anyone reads the images, or the part fails: the pipeline's stream need not wait
        # for this one, and a batch nobody takes (or whose part failed) leaves nothing queued on its memory
        with self.lock, cupy().cuda.Device(self.device_id):
            try:
                statuses = work(self)
            except BaseException:
                with contextlib.suppress(Exception):  # a broken stream: the part's own error is the one to raise
                    self.stream.synchronize()
                raise
            self.stream.synchronize()
        return statuses

    def close(self) -> None:
        """Wait for the parts handed to the lane; its thread ends (a later part starts a new one)."""
        with self._thread_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=True)


def split(count: int, lanes: int) -> list[np.ndarray]:
    """The indices of a batch of `count` images as one consecutive part per lane (one part below SPLIT_FROM)."""
    if count < SPLIT_FROM or lanes == 1:
        return [np.arange(count)]  # array_split's 10 us, where a request's batch of one has none to spare
    return np.array_split(np.arange(count), lanes)


class LaneDecode:
    """A batch decode handed to lanes: each part's indices and the future of its per-image statuses."""

    def __init__(self, parts: list[tuple[np.ndarray, Future]], count: int):
        self.parts, self.count = parts, count

    def statuses(self) -> np.ndarray:
        """Wait for every part, then the batch's per-image statuses; a part whose call failed raises here, once all
        parts are done (the batch's code streams and memory must outlive every part's decode)."""
        try:
            out = np.zeros(self.count, np.uint32)
            for which, future in self.parts:
                out[which] = future.result()
            return out
        finally:  # a part failed, or the caller was interrupted: the others still run until they are done
            wait([future for _, future in self.parts])
