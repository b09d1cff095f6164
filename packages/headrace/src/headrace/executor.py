"""The executor: runs one batch of a graph, batch ops (readers) first, then per-sample ops on a thread pool."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from headrace.batch import BufferPool, TensorListCPU
from headrace.errors import DeviceError, SampleError, SchemaError
from headrace.graph import DataNode, OpNode
from headrace.readers import BATCH_OPS


def node_seed(pipeline_seed: int, node: OpNode) -> int:
    """The seed of a node's random stream: its own `seed` argument, else a hash of (pipeline seed, node name)."""
    own = node.args.get("seed", -1)
    if own != -1:
        return own & (2**63 - 1)
    digest = hashlib.blake2b(f"{pipeline_seed}/{node.name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class SampleContext:
    """What a kernel sees of the sample it works on: a random stream keyed by (node seed, sample number)."""

    __slots__ = ("_rng", "index", "seed")

    def __init__(self, seed: int, index: int):
        self.seed, self.index, self._rng = seed, index, None

    @property
    def rng(self) -> np.random.Generator:
        if self._rng is None:
            self._rng = np.random.Generator(np.random.Philox(key=[self.seed, self.index]))
        return self._rng


class _SampleOp:
    """A per-sample op ready to run: its kernel, its arguments with defaults filled in, and where inputs come from."""

    def __init__(self, node: OpNode, kernel, seed: int):
        self.node, self.kernel, self.seed = node, kernel, seed
        self.static_args = {name: node.arg(name) for name in node.schema.all_args}
        self.inputs = [(i.op.name, i.index) for i in node.inputs]
        self.arg_inputs = [(name, (d.op.name, d.index)) for name, d in node.arg_inputs.items()]
        self.num_outputs = len(node.outputs)


def _arg_value(array: np.ndarray, list_of: bool) -> Any:
    array = np.asarray(array)
    if list_of:
        return array.ravel().tolist()
    return array.reshape(-1)[0].item() if array.size == 1 else array


class _Collector:
    """Copies one output's samples straight into a pooled (N, ...) buffer while they are made, so the batch is
    dense without a second pass; falls back to a list when shapes differ."""

    def __init__(self, pool: BufferPool, size: int, capacity: int):
        self.pool, self.size, self.capacity = pool, size, max(size, capacity)
        self.buffer: np.ndarray | None = None
        self.ragged = False
        self.lock = threading.Lock()

    def put(self, index: int, sample: np.ndarray) -> None:
        if self.ragged:
            return
        if self.buffer is None:
            with self.lock:
                if self.buffer is None:
                    # pooled at full batch size, so batches smaller than batch_size (fed by a server) reuse
                    # the same buffers instead of pooling one set per size
                    self.buffer = self.pool.get((self.capacity, *sample.shape), sample.dtype)[:self.size]
        if sample.shape != self.buffer.shape[1:] or sample.dtype != self.buffer.dtype:
            self.ragged = True
            return
        self.buffer[index] = sample


class Executor:
    """Runs batches of a validated graph; `run(iteration)` must be called with consecutive iterations."""

    def __init__(self, nodes: list[OpNode], outputs: list[DataNode], batch_size: int, num_threads: int, seed: int,
                 device_id: int | None, prefetch_queue_depth: int):
        from headrace_kernels.registry import get_cpu_kernel

        self.nodes = _needed(nodes, outputs)
        self.outputs = outputs
        self.batch_size, self.seed = batch_size, seed
        self.pool = ThreadPoolExecutor(max(1, num_threads), thread_name_prefix="headrace-cpu")
        self.num_threads = max(1, num_threads)
        self.buffers = BufferPool(per_key=prefetch_queue_depth + 2)
        self.batch_ops: dict[str, Any] = {}
        self.steps: list[tuple[str, Any]] = []  # ("batch", node) or ("samples", [_SampleOp, ...])
        for node in self.nodes:
            if node.device != "cpu":
                raise DeviceError(f"{node.schema.name} (node '{node.name}') runs on device '{node.device}', but "
                                  "this build of headrace runs CPU ops only")
            if node.schema.batch_op:
                reader_cls = BATCH_OPS[node.schema.name]
                self.batch_ops[node.name] = reader_cls(node.name, dict(node.args, **{
                    a: node.arg(a) for a in node.schema.all_args}), batch_size, node_seed(seed, node), self.pool)
                self.steps.append(("batch", node))
                continue
            kernel = get_cpu_kernel(node.schema.name)
            if kernel is None:
                raise SchemaError(f"{node.schema.name} (node '{node.name}') has no CPU implementation")
            op = _SampleOp(node, kernel, node_seed(seed, node))
            if self.steps and self.steps[-1][0] == "samples":
                self.steps[-1][1].append(op)
            else:
                self.steps.append(("samples", [op]))

    def run(self, iteration: int) -> tuple[list[TensorListCPU], list[str]]:
        """Compute batch `iteration`: the outputs, and the source of every sample (for error messages)."""
        values: dict[tuple[str, int], list] = {}
        sources: list[str] = []
        collectors: dict[tuple[str, int], _Collector] = {}
        size = self.batch_size
        wanted = {(o.op.name, o.index) for o in self.outputs}
        for kind, step in self.steps:
            if kind == "batch":
                outs, step_sources = self.batch_ops[step.name].next_batch(iteration)
                if not sources:
                    sources, size = step_sources, len(step_sources)
                for index, samples in enumerate(outs):
                    values[(step.name, index)] = samples
                continue
            for op in step:
                for index in range(op.num_outputs):
                    values[(op.node.name, index)] = [None] * size
                    if (op.node.name, index) in wanted:
                        collectors[(op.node.name, index)] = _Collector(self.buffers, size, self.batch_size)
            self._run_samples(step, values, collectors, iteration, size, sources)
        batches = []
        for out in self.outputs:
            key = (out.op.name, out.index)
            collector = collectors.get(key)
            layout = out.op.arg("output_layout") or "" if "output_layout" in out.op.schema.all_args else ""
            if collector is not None and not collector.ragged and collector.buffer is not None:
                batches.append(TensorListCPU(collector.buffer, layout, sources))
            else:
                batches.append(TensorListCPU(values[key], layout, sources))
        return batches, sources

    def _run_samples(self, ops: list[_SampleOp], values, collectors, iteration: int, size: int,
                     sources: list[str]) -> None:
        first_sample = iteration * self.batch_size

        def work(indices: range) -> None:
            for i in indices:
                for op in ops:
                    inputs = [values[ref][i] for ref in op.inputs]
                    args = op.static_args
                    if op.arg_inputs:
                        args = dict(args)
                        for name, ref in op.arg_inputs:
                            args[name] = _arg_value(values[ref][i], op.node.schema.all_args[name].list_of)
                    try:
                        result = op.kernel(inputs, args, SampleContext(op.seed, first_sample + i))
                    except Exception as exc:
                        source = sources[i] if i < len(sources) else f"sample {i}"
                        raise SampleError(
                            f"{op.node.schema.name} (node '{op.node.name}') failed on sample {i} of batch {iteration}"
                            f" [{source}]: {exc}", node=op.node.name, op=op.node.schema.name, sample=i,
                            source=source) from exc
                    results = result if op.num_outputs > 1 else (result,)
                    for index, value in enumerate(results):
                        values[(op.node.name, index)][i] = value
                        collector = collectors.get((op.node.name, index))
                        if collector is not None:
                            collector.put(i, value)

        chunk = max(1, size // (self.num_threads * 4))
        chunks = [range(start, min(start + chunk, size)) for start in range(0, size, chunk)]
        if self.num_threads == 1 or len(chunks) == 1:
            for indices in chunks:
                work(indices)
            return
        for future in [self.pool.submit(work, indices) for indices in chunks]:
            future.result()

    def reader(self, name: str | None):
        readers = {k: v for k, v in self.batch_ops.items() if hasattr(v, "meta")}
        if name is None:
            if len(readers) != 1:
                raise SchemaError(f"name a reader: this pipeline has {len(readers)} ({', '.join(readers)})")
            return next(iter(readers.values()))
        if name not in readers:
            raise SchemaError(f"no reader named '{name}' (readers: {', '.join(readers) or 'none'})")
        return readers[name]

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.buffers.release()


def _needed(nodes: list[OpNode], outputs: list[DataNode]) -> list[OpNode]:
    """The nodes the outputs depend on (plus those marked `preserve`), in the graph's topological order."""
    keep: set[str] = set()
    stack = [o.op for o in outputs] + [n for n in nodes if n.args.get("preserve")]
    while stack:
        node = stack.pop()
        if node.name not in keep:
            keep.add(node.name)
            stack += [d.op for d in node.upstream]
    return [n for n in nodes if n.name in keep]
