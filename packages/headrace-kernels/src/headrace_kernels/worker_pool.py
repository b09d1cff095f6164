"""Python callables run in worker processes, their results handed back in shared memory: DALI's parallel
external source and python_function's `num_workers`. A `WorkerPool` runs tasks (a callable's index and the arguments
of each call) on its processes; each result, an array or a tuple of arrays per call, comes back in one
shared-memory block that the pipeline copies out of and frees."""

from __future__ import annotations

import multiprocessing
import os
import queue
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

STOP = "stop"
"""A task's outcome when a callable raised StopIteration (the end of an epoch)."""


class WorkerError(RuntimeError):
    """A callable failed in a worker process, or a worker died; the message carries the worker's traceback."""


def _as_arrays(result: Any) -> tuple[list[np.ndarray], bool]:
    """A call's result as arrays, and whether it was a tuple or list of outputs (not one array)."""
    if isinstance(result, tuple | list):
        return [np.ascontiguousarray(np.asarray(r)) for r in result], True
    return [np.ascontiguousarray(np.asarray(result))], False


def _pack(results: list[Any]) -> tuple[str | None, list]:
    """Copy the arrays of every call's result into one new shared-memory block: (block name, layout records)."""
    calls = [_as_arrays(r) for r in results]
    total = sum(a.nbytes for arrays, _ in calls for a in arrays)
    if total == 0:
        return None, [([(a.shape, a.dtype.str, 0) for a in arrays], many) for arrays, many in calls]
    block = shared_memory.SharedMemory(create=True, size=total)
    # the pipeline's process frees the block; this process's tracker must not count it as leaked
    resource_tracker.unregister("/" + block.name, "shared_memory")
    records, offset = [], 0
    try:
        for arrays, many in calls:
            entry = []
            for array in arrays:
                if array.dtype.hasobject:
                    raise TypeError(f"a result of dtype {array.dtype} cannot be shared: return numeric arrays")
                np.frombuffer(block.buf, np.uint8, array.nbytes, offset)[:] = array.view(np.uint8).reshape(-1)
                entry.append((array.shape, array.dtype.str, offset))
                offset += array.nbytes
            records.append((entry, many))
    except BaseException:
        block.close()
        block.unlink()
        raise
    block.close()
    return block.name, records


def _unpack(name: str | None, records: list) -> list[Any]:
    """The results `_pack` wrote: each call's array, or tuple of arrays; the block is freed."""
    block = shared_memory.SharedMemory(name=name) if name is not None else None
    try:
        results = []
        for entry, many in records:
            arrays = []
            for shape, dtype, offset in entry:
                dtype = np.dtype(dtype)
                count = int(np.prod(shape, dtype=np.int64))
                if block is None or count == 0:
                    arrays.append(np.empty(shape, dtype))
                else:
                    arrays.append(np.frombuffer(block.buf, dtype, count, offset).reshape(shape).copy())
            results.append(tuple(arrays) if many else arrays[0])
        return results
    finally:
        if block is not None:
            block.close()
            block.unlink()


def _worker_main(callbacks: Sequence[Callable], tasks: Any, results: Any, parent: int) -> None:
    """A worker's loop: run each task's calls, pack their results, report; None (or the parent gone) ends it."""
    while True:
        try:
            task = tasks.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:
                return
            continue
        if task is None:
            return
        task_id, callback, arguments = task
        try:
            outputs = [callbacks[callback](*args) for args in arguments]
            results.put((task_id, "ok", _pack(outputs)))
        except StopIteration:
            results.put((task_id, STOP, None))
        except BaseException as exc:  # noqa: BLE001 - reported to the pipeline with the worker's traceback
            results.put((task_id, "error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


class WorkerPool:
    """`num_workers` processes running `callbacks` (started with `start_method`: 'fork' as DALI's default, which
    takes lambdas and closures; 'spawn' needs picklable callables). `submit` a task to a worker, `result` waits
    for it."""

    def __init__(self, callbacks: Sequence[Callable], num_workers: int, start_method: str = "fork",
                 name: str = "headrace-worker"):
        context = multiprocessing.get_context(start_method)
        self.num_workers = num_workers
        self._tasks = [context.Queue() for _ in range(num_workers)]
        self._results = context.Queue()
        self._done: dict[int, tuple] = {}
        self._next_id = 0
        self._processes = [context.Process(target=_worker_main, args=(list(callbacks), q, self._results, os.getpid()),
                                           name=f"{name}-{i}", daemon=True) for i, q in enumerate(self._tasks)]
        for process in self._processes:
            process.start()

    def submit(self, worker: int, callback: int, arguments: list[tuple]) -> int:
        """Queue the calls `callbacks[callback](*args)` for each args of `arguments` on `worker`; the task's id."""
        task_id, self._next_id = self._next_id, self._next_id + 1
        self._tasks[worker % self.num_workers].put((task_id, callback, arguments))
        return task_id

    def result(self, task_id: int) -> list[Any] | str:
        """The results of task `task_id`'s calls in order, or STOP when one raised StopIteration; WorkerError when
        one failed or a worker died."""
        while task_id not in self._done:
            try:
                done_id, status, payload = self._results.get(timeout=1.0)
            except queue.Empty:
                dead = [p.name for p in self._processes if not p.is_alive()]
                if dead:
                    raise WorkerError(f"worker process {', '.join(dead)} ended unexpectedly (killed, or out of "
                                      "memory)") from None
                continue
            self._done[done_id] = (status, payload)
        status, payload = self._done.pop(task_id)
        if status == "error":
            raise WorkerError(f"a callable failed in a worker process: {payload}")
        if status == STOP:
            return STOP
        return _unpack(*payload)

    def discard(self, task_id: int) -> None:
        """Wait for task `task_id` and free what it made without reading it."""
        try:
            self.result(task_id)
        except WorkerError:
            pass

    def close(self) -> None:
        """Stop the workers (each finishes its task first) and wait for them."""
        for tasks in self._tasks:
            try:
                tasks.put(None)
            except (OSError, ValueError):
                pass
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join(timeout=1)
        self._processes = []
        while True:  # results that came after the last read
            try:
                done_id, status, payload = self._results.get(timeout=0.1)
            except (queue.Empty, OSError, ValueError):
                break
            self._done[done_id] = (status, payload)
        for done_id in list(self._done):  # results nobody read: free their blocks
            status, payload = self._done.pop(done_id)
            if status == "ok":
                _unpack(*payload)
