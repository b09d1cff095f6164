"""What every stage of the executor shares: node seeds, the per-sample context, the record of a per-sample op,
argument inputs turned into values, the batch being computed, and the collectors of dense outputs."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np

from headrace.batch import BufferPool
from headrace.graph import DataNode, OpNode
from headrace.schema import Arg
from headrace_kernels.registry import get_cpu_batch_draw_kernel, get_cpu_batch_kernel
from headrace_kernels.rng import sample_rng

Ref = tuple[str, int]  # (node name, output index): where a value lives in a batch's values


def node_seed(pipeline_seed: int, node: OpNode) -> int:
    """The seed of a node's random stream: its own `seed` argument, else a hash of (pipeline seed, node name)."""
    own = node.args.get("seed", -1)
    if own != -1:
        return own & (2**63 - 1)
    digest = hashlib.blake2b(f"{pipeline_seed}/{node.name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def ref_of(data: DataNode) -> Ref:
    return data.op.name, data.index


class SampleContext:
    """What a kernel sees of the sample it works on: a random stream keyed by (node seed, sample number), where the
    sample came from (its batch's source: a file path, ...) and the layouts of the node's inputs ('' if unknown).
    `output` gives the array for the kernel's first output: where that output is collected, the sample's row of the
    batch buffer, so the kernel writes the batch in place."""

    __slots__ = ("_collector", "_rng", "_slot", "index", "input_layouts", "seed", "source")

    def __init__(self, seed: int, index: int, source: str = "", input_layouts: tuple[str, ...] = (),
                 collector: Collector | None = None, slot: int = 0):
        self.seed, self.index, self._rng = seed, index, None
        self.source, self.input_layouts = source, input_layouts
        self._collector, self._slot = collector, slot

    @property
    def rng(self) -> np.random.Generator:
        if self._rng is None:  # Generator(Philox(key=[seed, index])), re-keyed in place: ~15x cheaper to make
            self._rng = sample_rng(self.seed, self.index)
        return self._rng

    def output(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialized array of `shape` and `dtype` for the first output, which the kernel must fill and
        return as it is: the sample's row of the collected batch where it fits there, else a new array."""
        if self._collector is not None:
            row = self._collector.row(self._slot, shape, dtype)
            if row is not None:
                return row
        return np.empty(shape, dtype)


class SampleOp:
    """A per-sample op ready to run: its kernel, its arguments with defaults filled in, and where inputs come from."""

    def __init__(self, node: OpNode, kernel, seed: int, frame_args: frozenset[str] = frozenset()):
        self.node, self.kernel, self.seed = node, kernel, seed
        self.frame_args = frame_args
        """Argument inputs given per frame of a sequence (fn.per_frame), for a kernel that runs frame by frame."""
        self.static_args = node.resolved_args()
        self.inputs = [ref_of(i) for i in node.inputs]
        self.input_layouts = tuple(i.spec.layout or "" for i in node.inputs)
        self.arg_inputs = [(node.schema.all_args[name], ref_of(d)) for name, d in node.arg_inputs.items()]
        self.num_outputs = len(node.outputs)
        self.guard = ref_of(node.guard) if node.guard is not None else None
        self.skips = self.static_args.get("on_error") == "skip"  # a failed sample is replaced (engine.skips)
        # an input-less random op with a whole-batch twin draws the batch in one call (same values)
        self.batch_draw = None
        if not self.inputs and not self.arg_inputs and self.guard is None and self.num_outputs == 1 \
                and not node.schema.whole_batch:
            self.batch_draw = get_cpu_batch_draw_kernel(node.schema.name)
        # an op with literal arguments and a whole-batch twin runs a whole batch in one call (same values)
        self.batch_kernel = None
        if self.inputs and not self.arg_inputs and self.guard is None and not self.skips \
                and not node.schema.whole_batch:
            self.batch_kernel = get_cpu_batch_kernel(node.schema.name)


class BatchInfo:
    """What a step knows of the batch: its number, size, sample sources and per-sample random streams."""

    def __init__(self, iteration: int, first_sample: int, size: int, sources: list[str]):
        self.iteration, self.first_sample, self.size, self.sources = iteration, first_sample, size, sources

    def rngs(self, seed: int):
        first = self.first_sample
        return lambda i: sample_rng(seed, first + i)

    def source(self, index: int) -> str:
        return self.sources[index] if index < len(self.sources) else f"sample {index}"


def arg_value(array: Any, arg: Arg) -> Any:
    """A per-sample argument from a DataNode's sample: a list for list arguments, else one value of the
    argument's kind."""
    array = np.asarray(array)
    try:
        if arg.list_of:
            return arg.coerce(array.ravel())
        if array.size != 1:
            raise ValueError("expected one value per sample")
        return arg.coerce(array.reshape(-1)[0].item())
    except (TypeError, ValueError) as exc:
        raise ValueError(f"argument '{arg.name}' (from a DataNode, shape {array.shape}, {array.dtype}): {exc}") \
            from None


_VECTOR_KINDS = {"int": "iu", "float": "iuf", "bool": "b"}


def arg_values(samples, arg: Arg, size: int) -> list:
    """`arg_value` of the first `size` samples; numeric scalars of one type are converted for the whole batch at
    once (the same Python values), anything else sample by sample."""
    kinds = _VECTOR_KINDS.get(arg.kind) if not arg.list_of and arg.choices is None else None
    dense = getattr(samples, "dense", None)  # a Column: the samples are the rows of one array
    if kinds is not None and dense is not None and len(dense) == size == dense.size and dense.dtype.kind in kinds:
        flat = dense.reshape(-1)
        return flat.astype(np.float64).tolist() if arg.kind == "float" else flat.tolist()
    if kinds is not None and size:
        arrays = samples[:size] if isinstance(samples, list) else [samples[i] for i in range(size)]
        first = arrays[0]
        if isinstance(first, np.ndarray) and first.size == 1 and first.dtype.kind in kinds:
            try:  # one C call for the batch; samples of other sizes or types fall through to the per-sample rule
                stacked = np.array(arrays)
            except ValueError:
                stacked = None
            # a sample of another type widens the stacked type (or makes it object) and falls through too; one of a
            # narrower type of the same kind converts to the same Python value either way
            if stacked is not None and stacked.dtype == first.dtype and stacked.size == size:
                flat = stacked.reshape(-1)
                return flat.astype(np.float64).tolist() if arg.kind == "float" else flat.tolist()
    return [arg_value(samples[i], arg) for i in range(size)]


class Collector:
    """Copies one output's samples straight into a pooled (N, ...) buffer while they are made, so the batch is
    dense without a second pass; falls back to a list when shapes differ. A kernel may also write its sample into
    the buffer itself (SampleContext.output): nothing is copied then."""

    def __init__(self, pool: BufferPool, size: int, capacity: int):
        self.pool, self.size, self.capacity = pool, size, max(size, capacity)
        self.buffer: np.ndarray | None = None
        self.ragged = False
        self.lock = threading.Lock()
        self.rows: list[np.ndarray | None] = [None] * size  # rows handed to kernels, by slot

    def _buffer_for(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        if self.buffer is None:
            with self.lock:
                if self.buffer is None:
                    # pooled at full batch size, so batches smaller than batch_size (fed by a server) reuse
                    # the same buffers instead of pooling one set per size
                    self.buffer = self.pool.get((self.capacity, *shape), dtype)[:self.size]
        return self.buffer

    def row(self, index: int, shape: tuple[int, ...], dtype) -> np.ndarray | None:
        """The buffer's row `index` for a sample of `shape` and `dtype`, or None where it does not fit."""
        if self.ragged:
            return None
        buffer = self._buffer_for(tuple(shape), np.dtype(dtype))
        if buffer.shape[1:] != tuple(shape) or buffer.dtype != dtype:
            return None
        row = self.rows[index] = buffer[index]
        return row

    def put(self, index: int, sample: np.ndarray) -> None:
        if self.ragged:
            return
        if sample is self.rows[index]:
            return  # written in place
        buffer = self._buffer_for(sample.shape, sample.dtype)
        if sample.shape != buffer.shape[1:] or sample.dtype != buffer.dtype:
            self.ragged = True
            return
        buffer[index] = sample
