"""Requests in, per-request outputs or errors out: one pipeline run per group of requests that fits in the
pipeline's batch_size, outputs split back by request; a failing request is answered with its own error and the
others are run again without it. Knows nothing of Triton, so it is tested on its own."""

from __future__ import annotations

import collections
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headrace.errors import SampleError


class RequestError(Exception):
    """What one request gets back instead of outputs; the other requests of its batch are not affected."""


@dataclass(frozen=True)
class InputSpec:
    """A model input: the name of the external source it feeds, element type and per-sample dims (-1: varies)."""

    name: str
    dtype: np.dtype
    dims: tuple[int, ...]


@dataclass
class _Request:
    position: int
    size: int
    samples: dict[str, list[np.ndarray]]


class BatchRunner:
    """Runs a served pipeline on batches of requests (each a mapping of input name to an (n, ...) array)."""

    def __init__(self, pipe, inputs: Sequence[InputSpec], output_names: Sequence[str]):
        self.pipe = pipe
        self.inputs = list(inputs)
        self.output_names = list(output_names)
        self.max_samples = pipe.batch_size
        self.seconds: collections.Counter = collections.Counter()  # host time per part, summed over runs
        fed = set(pipe.fed_inputs)
        names = {spec.name for spec in self.inputs}
        if names != fed:
            raise ValueError(f"the model inputs {sorted(names)} do not match the pipeline's external sources "
                             f"{sorted(fed)}")
        if len(self.output_names) != len(pipe.outputs):
            raise ValueError(f"{len(self.output_names)} output names for {len(pipe.outputs)} pipeline outputs")

    def run(self, requests: Sequence[Mapping[str, Any]]) -> list[list[Any] | RequestError]:
        """Outputs (one array per output name, first axis the request's batch) or a RequestError, per request."""
        results: list[list[Any] | RequestError | None] = [None] * len(requests)
        pending = []
        for position, request in enumerate(requests):
            try:
                pending.append(self._split(position, request))
            except RequestError as exc:
                results[position] = exc.with_traceback(None)  # its frames would hold this call's requests
        group: list[_Request] = []
        for request in pending:
            if group and sum(r.size for r in group) + request.size > self.max_samples:
                self._run_group(group, results)
                group = []
            group.append(request)
        if group:
            self._run_group(group, results)
        return results

    def _split(self, position: int, request: Mapping[str, Any]) -> _Request:
        """Check a request against the inputs and cut its arrays into samples."""
        missing = [spec.name for spec in self.inputs if request.get(spec.name) is None]
        if missing:
            raise RequestError(f"the request lacks input(s) {missing} (the model takes "
                               f"{[spec.name for spec in self.inputs]})")
        unknown = sorted(set(request) - {spec.name for spec in self.inputs})
        if unknown:
            raise RequestError(f"the request has unknown input(s) {unknown} (the model takes "
                               f"{[spec.name for spec in self.inputs]})")
        size, samples = None, {}
        for spec in self.inputs:
            array = request[spec.name]
            if array.dtype != spec.dtype:
                raise RequestError(f"input '{spec.name}' has element type {array.dtype}, the model expects "
                                   f"{spec.dtype}")
            if array.ndim != len(spec.dims) + 1 or any(d not in (-1, s) for d, s in zip(spec.dims, array.shape[1:],
                                                                                        strict=False)):
                raise RequestError(f"input '{spec.name}' has shape {list(array.shape)}, the model expects "
                                   f"[batch, {', '.join(map(str, spec.dims))}]")
            if size is not None and array.shape[0] != size:
                raise RequestError(f"the inputs have different batch sizes ({size} and {array.shape[0]} for "
                                   f"'{spec.name}')")
            size = array.shape[0]
            samples[spec.name] = [array[i] for i in range(size)]
        if not size:
            raise RequestError("the request has a batch of 0 samples")
        if size > self.max_samples:
            raise RequestError(f"the request has {size} samples, more than the pipeline's batch_size "
                               f"({self.max_samples})")
        return _Request(position, size, samples)

    def _run_group(self, group: list[_Request], results: list) -> None:
        """Run the group as one pipeline batch; drop a request whose sample fails and run the rest again."""
        while group:
            feeds = {spec.name: [s for r in group for s in r.samples[spec.name]] for spec in self.inputs}
            start = time.perf_counter()
            outputs, error = self._try_run(feeds)
            if isinstance(error, SampleError):
                culprit = _owner(group, error.sample)
                if culprit is None:
                    self._run_alone(group, results, error)
                    return
                request, index = culprit
                results[request.position] = RequestError(
                    f"sample {index} of this request: {error.op} (node '{error.node}') failed: {_cause(error)}")
                group = [r for r in group if r is not request]
                continue
            if error is not None:  # not tied to one sample: find the culprit by running alone
                self._run_alone(group, results, error)
                return
            ran = time.perf_counter()
            for batch in outputs:  # GPU batches are made on the pipeline's stream: done before they are handed on
                getattr(batch, "synchronize", lambda: None)()
            self.seconds["pipeline run"] += ran - start
            self.seconds["waiting for the GPU"] += time.perf_counter() - ran
            offset = 0
            for request in group:
                try:
                    results[request.position] = [_rows(batch, offset, request.size, name)
                                                 for batch, name in zip(outputs, self.output_names, strict=True)]
                except RequestError as exc:
                    results[request.position] = exc.with_traceback(None)
                offset += request.size
            return

    def _try_run(self, feeds: dict[str, list]) -> tuple[tuple | None, Exception | None]:
        """One pipeline run: (outputs, None), or (None, the exception) with its tracebacks dropped (`_forget`), so
        that nothing of the failed run outlives it."""
        try:
            return self.pipe.run(**feeds), None
        except Exception as exc:  # noqa: BLE001 - answered to the requests, never raised
            self.pipe.clear_fed_inputs()
            _forget(exc)
            return None, exc

    def _run_alone(self, group: list[_Request], results: list, error: Exception) -> None:
        if len(group) == 1:
            results[group[0].position] = RequestError(f"the pipeline failed on this request: {error}")
            return
        for request in group:
            self._run_group([request], results)


def _forget(error: BaseException) -> None:
    """Clear the frames of the tracebacks of `error`, its causes and contexts, and drop the tracebacks. Those frames
    hold the failed run's batch: pooled buffers, that the pool reuses only once nothing else refers to them, and up
    the stack Triton's requests and responses (shared memory). A frame that holds the exception raised through it
    (a local) makes a cycle that only the cyclic garbage collector frees, late: memory grew by gigabytes when good
    and bad requests shared batches (issue 26)."""
    pending, seen = [error], set()
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)  # skips frames still running (this one, the caller's)
        exc.__traceback__ = None
        pending += [exc.__cause__, exc.__context__]


def _owner(group: list[_Request], sample: int) -> tuple[_Request, int] | None:
    """The request holding sample `sample` of the merged batch, and the sample's index inside it."""
    if sample is None or sample < 0:
        return None
    for request in group:
        if sample < request.size:
            return request, sample
        sample -= request.size
    return None


def _cause(exc: SampleError) -> str:
    return str(exc.__cause__) if exc.__cause__ is not None else str(exc)


def _rows(batch, start: int, count: int, name: str):
    """Samples start..start+count of an output batch as one array (a dense batch's own array, or a view of it). GPU
    batches stay on the device (CuPy arrays), complete when returned (`_run_group` waited for the batch itself)."""
    if batch.is_dense_tensor():
        array = batch.as_array()
        return array if start == 0 and count == len(array) else array[start:start + count]
    samples = [batch.at(i) for i in range(start, start + count)]
    shapes = {tuple(s.shape) for s in samples}
    if len(shapes) > 1:
        raise RequestError(f"output '{name}' has samples of different shapes {sorted(shapes)}; a Triton output "
                           "is one array per request (send such samples in separate requests, or pad them)")
    if getattr(batch, "device", "cpu") != "gpu":
        return np.stack(samples)
    rows = type(batch)(samples, stream=batch.stream, device_id=batch.device_id).as_array()
    batch.synchronize()  # stacking runs on the pipeline's stream: done before Triton reads the rows
    return rows
