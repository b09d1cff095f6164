"""`external_source`: batches from a Python callable or iterable, or fed by name; with parallel=True the callable
runs in worker processes (headrace_kernels.worker_pool), as DALI's parallel external source."""

from __future__ import annotations

import inspect

import numpy as np

from headrace.enums import to_numpy_dtype
from headrace.errors import InputDataError, SchemaError
from headrace.types import BatchInfo, SampleInfo
from headrace_kernels.registry import reader


def _takes_argument(source) -> bool:
    """Whether a callable takes a positional argument (DALI then passes the iteration or a SampleInfo)."""
    try:
        parameters = inspect.signature(source).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: give it the argument
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


@reader("external_source")
class ExternalSource:
    """Gives the pipeline the data of a `source`, or what `run(name=...)` / `feed_input` handed it."""

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool=None):
        self.node, self.batch_size = node, batch_size
        self.source = args.get("source")
        self.batch, self.batch_info = args["batch"], args["batch_info"]
        self.cycle = args["cycle"]
        self.num_outputs = args.get("num_outputs")
        self.dtype = to_numpy_dtype(args["dtype"]) if args.get("dtype") is not None else None
        self.ndim, self.layout = args.get("ndim"), args.get("layout")
        self.parallel, self.depth = bool(args.get("parallel")), max(1, int(args.get("prefetch_queue_depth") or 1))
        self.fed: list = []
        self.repeat_last = bool(args.get("repeat_last"))
        self._last_fed = None  # with repeat_last: the batch a run without a new feed uses again
        if self.repeat_last and self.source is not None:
            raise SchemaError(f"external_source '{node}': repeat_last=True is for a source fed by run() or "
                              "feed_input(), not for one with a `source`")
        self.batches_taken = 0
        self._iterator = None
        self._skip = 0
        self.taken_in_pass = 0
        self.epoch_idx = 0
        self._epoch_start: int | None = 0  # the iteration the current epoch began at (None: the next one read)
        self._generator = inspect.isgeneratorfunction(self.source)
        self._workers = None
        self._pending: dict[int, int] = {}  # iteration -> task id (parallel)
        if self.parallel:
            self._check_parallel()

    def _check_parallel(self) -> None:
        if not callable(self.source) or hasattr(self.source, "__next__") or self._generator:
            raise SchemaError(f"external_source '{self.node}': parallel=True takes a callable source (a function of "
                              "a SampleInfo with batch=False, or of the iteration / a BatchInfo with batch=True), "
                              f"not {type(self.source).__name__}; use parallel=False for iterables and generators")

    @property
    def needs_feed(self) -> bool:
        return self.source is None

    def use_workers(self, options) -> None:
        """Start the worker processes of a parallel source (the executor calls this once, at build)."""
        if self.parallel and self._workers is None:
            from headrace_kernels.worker_pool import WorkerPool

            self._workers = WorkerPool([self.source], options.num_workers, options.start_method,
                                       name=f"headrace-source-{self.node}")

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None
            self._pending.clear()

    def feed(self, data) -> None:
        """Queue one batch (a list of arrays, or an array whose first axis is the batch)."""
        self.fed.append(data)

    # where a callable's samples are in their epoch
    def _epoch_iteration(self, iteration: int) -> int:
        if self._epoch_start is None:
            self._epoch_start = iteration
        return iteration - self._epoch_start

    def _end_epoch(self) -> None:
        self.epoch_idx += 1
        self._epoch_start = None

    def _calls(self, iteration: int) -> list[tuple]:
        """The arguments of the callable's calls for batch `iteration` (one per sample, or one for the batch)."""
        local = self._epoch_iteration(iteration)
        if self.batch:
            if not _takes_argument(self.source):
                return [()]
            return [(BatchInfo(local, self.epoch_idx),)] if self.batch_info else [(local,)]
        return [(SampleInfo(local * self.batch_size + i, i, local, self.epoch_idx),) for i in range(self.batch_size)]

    def _from_callable(self, iteration: int):
        calls = self._calls(iteration)
        try:
            results = [self.source(*args) for args in calls]
        except StopIteration:
            self._end_epoch()
            raise
        return results[0] if self.batch else self._samples_to_columns(results)

    def _from_workers(self, iteration: int):
        """Batch `iteration` from the worker processes, with the next `prefetch_queue_depth` - 1 batches queued."""
        workers = self._workers
        for ahead in range(iteration, iteration + self.depth):
            if ahead not in self._pending:
                self._submit(ahead)
        task = self._pending.pop(iteration)
        results = self._gather(task)
        if results is None:  # StopIteration: the batches computed ahead belong to no epoch
            for other in sorted(self._pending):
                for task_id in self._pending.pop(other):
                    workers.discard(task_id)
            self._end_epoch()
            raise StopIteration
        return results[0] if self.batch else self._samples_to_columns(results)

    def _submit(self, iteration: int) -> None:
        calls = self._calls(iteration)
        workers = self._workers
        if self.batch:
            self._pending[iteration] = [workers.submit(iteration, 0, calls)]
            return
        share = -(-len(calls) // workers.num_workers)  # the samples split into one contiguous run per worker
        self._pending[iteration] = [workers.submit(w, 0, calls[w * share:(w + 1) * share])
                                    for w in range(workers.num_workers) if calls[w * share:(w + 1) * share]]

    def _gather(self, tasks: list[int]) -> list | None:
        from headrace_kernels.worker_pool import STOP, WorkerError

        results, stopped = [], False
        for task_id in tasks:
            try:
                part = self._workers.result(task_id)
            except WorkerError as exc:
                raise InputDataError(f"external_source '{self.node}': {exc}") from None
            stopped = stopped or part == STOP
            if part != STOP:
                results += part
        return None if stopped else results

    def _samples_to_columns(self, samples: list):
        """Per-sample results as one batch per output (a sample of several outputs is a tuple)."""
        if self.num_outputs is None:
            return samples
        return tuple(list(column) for column in zip(*samples, strict=True))

    def _from_source(self, iteration: int):
        source = self.source
        if callable(source) and not hasattr(source, "__next__") and not self._generator:
            return self._from_workers(iteration) if self._workers is not None else self._from_callable(iteration)
        if self._iterator is None:
            self._start_pass()
            skip, self._skip = self._skip, 0
            for _ in range(skip):  # restored from a checkpoint: move the iterable to where it stood
                self._from_source(iteration)
        try:
            item = next(self._iterator)
        except StopIteration:
            self._iterator = None
            if self.cycle not in (True, "quiet"):
                self._end_epoch()
                raise
            self._start_pass()
            item = next(self._iterator)
        self.taken_in_pass += 1
        return item

    def _start_pass(self) -> None:
        source = self.source() if self._generator else self.source  # a generator function: a new pass each epoch
        self._iterator, self.taken_in_pass = iter(source), 0

    def next_batch(self, iteration: int) -> tuple[list[list[np.ndarray]], list[str]]:
        if self.source is None:
            if not self.fed and self._last_fed is None:
                raise SchemaError(f"external_source '{self.node}' has no source and was fed no data: pass it to "
                                  f"run({self.node}=...) or call feed_input('{self.node}', ...)")
            data = self.fed.pop(0) if self.fed else self._last_fed
            if self.repeat_last:
                self._last_fed = data
        else:
            data = self._from_source(iteration)
        columns = self._columns(data)
        outs = [self._check([np.asarray(s) for s in column], k) for k, column in enumerate(columns)]
        self.batches_taken += 1
        return outs, [f"{self.node}[{self.batches_taken - 1}][{i}]" for i in range(len(outs[0]))]

    def _columns(self, data) -> list:
        """The batch of each output: `data` itself, or with num_outputs one batch per output."""
        if self.num_outputs is None:
            return [data]
        if not isinstance(data, tuple | list) or len(data) != self.num_outputs:
            got = len(data) if isinstance(data, tuple | list) else type(data).__name__
            raise InputDataError(f"external_source '{self.node}': num_outputs={self.num_outputs}, so the source must "
                                 f"give {self.num_outputs} batches (one per output), got {got}")
        sizes = {len(column) for column in data}
        if len(sizes) > 1:
            raise InputDataError(f"external_source '{self.node}': its outputs' batches have different sizes "
                                 f"{sorted(sizes)}")
        return list(data)

    def _check(self, samples: list[np.ndarray], output: int = 0) -> list[np.ndarray]:
        where = f"external_source '{self.node}'" + (f" output {output}" if self.num_outputs is not None else "")
        if not samples:
            raise InputDataError(f"{where}: got an empty batch")
        if len(samples) > self.batch_size:
            raise InputDataError(f"{where}: got a batch of {len(samples)} samples, more than the pipeline's "
                                 f"batch_size ({self.batch_size}); smaller batches are fine")
        for i, sample in enumerate(samples):
            if self.dtype is not None and sample.dtype != self.dtype:
                raise InputDataError(f"{where}: sample {i} has dtype {sample.dtype}, expected {self.dtype}")
            if self.ndim is not None and sample.ndim != self.ndim:
                raise InputDataError(f"{where}: sample {i} has {sample.ndim} dims, expected {self.ndim}")
        return samples

    def get_state(self) -> dict:
        return {"batches_taken": self.batches_taken, "taken_in_pass": self.taken_in_pass}

    def set_state(self, state: dict) -> None:
        """Continue after `batches_taken` batches: a callable source is asked by iteration anyway; an iterable one
        is advanced past the batches it had given in its current pass when it is next read."""
        self.batches_taken = int(state["batches_taken"])
        self._iterator = None
        self._skip = self.taken_in_pass = int(state.get("taken_in_pass", self.batches_taken))
        for tasks in self._pending.values():  # batches computed ahead from where the source stood before
            for task_id in tasks:
                self._workers.discard(task_id)
        self._pending.clear()
