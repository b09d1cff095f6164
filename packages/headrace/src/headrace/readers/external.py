"""`external_source`: batches from a Python callable or iterable, or fed by name."""

from __future__ import annotations

import numpy as np

from headrace.enums import to_numpy_dtype
from headrace.errors import InputDataError, SchemaError
from headrace_kernels.registry import reader


@reader("external_source")
class ExternalSource:
    """Gives the pipeline the data of a `source`, or what `run(name=...)` / `feed_input` handed it."""

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool=None):
        self.node, self.batch_size = node, batch_size
        self.source = args.get("source")
        self.batch, self.batch_info = args["batch"], args["batch_info"]
        self.cycle = args["cycle"]
        self.dtype = to_numpy_dtype(args["dtype"]) if args.get("dtype") is not None else None
        self.ndim, self.layout = args.get("ndim"), args.get("layout")
        self.fed: list = []
        self.batches_taken = 0
        self._iterator = None
        self._skip = 0
        self.taken_in_pass = 0

    @property
    def needs_feed(self) -> bool:
        return self.source is None

    def feed(self, data) -> None:
        """Queue one batch (a list of arrays, or an array whose first axis is the batch)."""
        self.fed.append(data)

    def _from_source(self, iteration: int):
        source = self.source
        if callable(source) and not hasattr(source, "__next__"):
            if self.batch:
                return source(iteration) if self.batch_info else source()
            return [source(_SampleInfo(iteration * self.batch_size + i, i, iteration))
                    for i in range(self.batch_size)]
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
                raise
            self._start_pass()
            item = next(self._iterator)
        self.taken_in_pass += 1
        return item

    def _start_pass(self) -> None:
        self._iterator, self.taken_in_pass = iter(self.source), 0

    def next_batch(self, iteration: int) -> tuple[list[list[np.ndarray]], list[str]]:
        if self.source is None:
            if not self.fed:
                raise SchemaError(f"external_source '{self.node}' has no source and was fed no data: pass it to "
                                  f"run({self.node}=...) or call feed_input('{self.node}', ...)")
            data = self.fed.pop(0)
        else:
            data = self._from_source(iteration)
        samples = self._check([np.asarray(s) for s in data])
        self.batches_taken += 1
        return [samples], [f"{self.node}[{self.batches_taken - 1}][{i}]" for i in range(len(samples))]

    def _check(self, samples: list[np.ndarray]) -> list[np.ndarray]:
        if not samples:
            raise InputDataError(f"external_source '{self.node}': got an empty batch")
        if len(samples) > self.batch_size:
            raise InputDataError(f"external_source '{self.node}': got a batch of {len(samples)} samples, more than the "
                             f"pipeline's batch_size ({self.batch_size}); smaller batches are fine")
        for i, sample in enumerate(samples):
            if self.dtype is not None and sample.dtype != self.dtype:
                raise InputDataError(f"external_source '{self.node}': sample {i} has dtype {sample.dtype}, "
                                 f"expected {self.dtype}")
            if self.ndim is not None and sample.ndim != self.ndim:
                raise InputDataError(f"external_source '{self.node}': sample {i} has {sample.ndim} dims, "
                                 f"expected {self.ndim}")
        return samples

    def get_state(self) -> dict:
        return {"batches_taken": self.batches_taken, "taken_in_pass": self.taken_in_pass}

    def set_state(self, state: dict) -> None:
        """Continue after `batches_taken` batches: a callable source is asked by iteration anyway; an iterable one
        is advanced past the batches it had given in its current pass when it is next read."""
        self.batches_taken = int(state["batches_taken"])
        self._iterator = None
        self._skip = self.taken_in_pass = int(state.get("taken_in_pass", self.batches_taken))


class _SampleInfo:
    """What a per-sample source callable receives, as DALI's SampleInfo."""

    def __init__(self, idx_in_epoch: int, idx_in_batch: int, iteration: int):
        self.idx_in_epoch, self.idx_in_batch, self.iteration = idx_in_epoch, idx_in_batch, iteration
        self.epoch_idx = 0
