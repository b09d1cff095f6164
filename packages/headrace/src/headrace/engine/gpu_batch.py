"""The batch as a GPU kernel sees it (headrace_kernels.registry.GpuBatch): its inputs on the device, its literal and
per-sample arguments, each sample's random stream, and what a preparing kernel made ahead of its input."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace.batch import TensorListGPU
from headrace.engine.context import BatchInfo, arg_values
from headrace_kernels.gpu.packing import sample_args
from headrace_kernels.gpu.staging import upload_arrays, upload_column

PREPARED = "__prepared__"  # values[(PREPARED, node)]: the host half a preparing kernel made for its node
PLANNED = "__planned__"  # values[(PLANNED, node)]: a launch plan made ahead


class Outputs(tuple):
    """The batches of a step whose node has several outputs, in output order."""


def upload(value) -> TensorListGPU:
    """A CPU batch (list of arrays) on the GPU in one asynchronous transfer (one (N, ...) array when the samples
    share a shape); samples a reader already put on the GPU (readers.numpy through kvikio) are taken as they are."""
    staged = upload_column(value)  # a batch kernel's column: its array, uploaded as it is
    if staged is not None:
        return TensorListGPU(staged[0] if staged[0] is not None else staged[1])
    if len(value) and all(hasattr(v, "__cuda_array_interface__") for v in value):
        return TensorListGPU(list(value))
    arrays = [np.asarray(v) for v in value]
    if not arrays:
        return TensorListGPU([])
    if any(a.dtype.hasobject for a in arrays):
        raise TypeError(f"a batch of Python objects ({arrays[0].dtype}) cannot be copied to the GPU")
    dense, samples = upload_arrays(arrays)  # one asynchronous copy through pinned memory
    return TensorListGPU(dense if dense is not None else samples)


class GpuBatchView:
    """One step's view of one batch: a kernel reads it, never the executor's tables."""

    def __init__(self, step, values: dict, info: BatchInfo, ctx):
        self.step, self.values, self.info, self.ctx = step, values, info, ctx
        self.size = info.size
        self.args: dict[str, Any] = step.args
        self.per_sample_args: frozenset[str] = step.per_sample_args
        self.meanwhile = None
        """Host work to do while a decode runs (planning the steps after it), or None."""
        self.ahead: Any = None
        """What this step's own `prepare` hook made of this batch ahead, or None (then it prepares it now)."""
        self.planned: Any = None
        """The launch this step's own `plan` hook planned for this batch ahead, or None (then it plans it now)."""
        self._rngs = None

    @property
    def iteration(self) -> int:
        return self.info.iteration

    @property
    def first_sample(self) -> int:
        return self.info.first_sample

    @property
    def stream(self):
        return self.ctx.stream

    @property
    def device_id(self) -> int:
        return self.ctx.device_id

    def active(self):
        """A context in which CuPy allocates from the pipeline's memory, on its device and stream."""
        return self.ctx.active()

    def value(self, k: int = 0):
        """Input k as it is: a TensorListGPU, or a list of host arrays."""
        return self.values[self.step.inputs[k]]

    def has_value(self, k: int = 0) -> bool:
        """Whether input k is computed already (a `plan` hook runs in the look-ahead, before the steps ahead of
        it)."""
        return self.step.inputs[k] in self.values

    def num_inputs(self) -> int:
        return len(self.step.inputs)

    def input(self, k: int = 0) -> TensorListGPU:
        """Input k on the GPU (uploaded when it comes from the host)."""
        value = self.value(k)
        return value if isinstance(value, TensorListGPU) else upload(value)

    def samples(self, k: int = 0, raw: bool = False) -> list:
        return self.input(k).samples(raw)

    def sample_args(self, part: int = -1) -> list[dict]:
        """Each sample's arguments (literals and argument inputs) of op `part` of the step (-1: its last)."""
        return sample_args(self.step.parts[part][1], self.arg_columns(part), self.size)

    def arg_columns(self, part: int = -1) -> dict[str, list]:
        """The values of each argument input of op `part` of the step, one per sample (what `sample_args` puts in
        each sample's dict)."""
        node, _, arg_inputs = self.step.parts[part]
        specs = node.schema.all_args
        return {name: arg_values(self.values[ref], specs[name], self.size) for name, ref in arg_inputs}

    @property
    def sources(self) -> list[str]:
        """Where each sample came from (the batch's source strings, as the returned batches' source_info)."""
        return self.info.sources

    @property
    def input_layouts(self) -> tuple[str, ...]:
        """The layout of each input of the step's first op ('' where unknown)."""
        return tuple(i.spec.layout or "" for i in self.step.parts[0][0].inputs)

    def rng(self, index: int) -> np.random.Generator:
        if self._rngs is None:
            self._rngs = self.info.rngs(self.step.seed)
        return self._rngs(index)

    def prepared(self, k: int = 0) -> Any:
        """What the preparing kernel producing input k (its first output) made of this batch ahead, or None."""
        node, index = self.step.inputs[k]
        return self.values.get((PREPARED, node)) if index == 0 else None
