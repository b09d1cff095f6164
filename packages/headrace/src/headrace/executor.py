"""The executor: runs one batch of a graph, batch ops (readers) first, then per-sample ops on a thread pool."""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from headrace.batch import BufferPool, TensorListCPU, TensorListGPU
from headrace.errors import SampleError, SchemaError
from headrace.graph import DataNode, OpNode
from headrace.readers import BATCH_OPS
from headrace.schema import Arg
from headrace_kernels.rng import sample_rng


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
        if self._rng is None:  # Generator(Philox(key=[seed, index])), re-keyed in place: ~15x cheaper to make
            self._rng = sample_rng(self.seed, self.index)
        return self._rng


class _SampleOp:
    """A per-sample op ready to run: its kernel, its arguments with defaults filled in, and where inputs come from."""

    def __init__(self, node: OpNode, kernel, seed: int):
        self.node, self.kernel, self.seed = node, kernel, seed
        self.static_args = node.resolved_args()
        self.inputs = [(i.op.name, i.index) for i in node.inputs]
        self.arg_inputs = [(node.schema.all_args[name], (d.op.name, d.index)) for name, d in node.arg_inputs.items()]
        self.num_outputs = len(node.outputs)
        self.guard = (node.guard.op.name, node.guard.index) if node.guard is not None else None
        # an input-less random op with a whole-batch twin draws the batch in one call (same values)
        self.batch_draw = None
        if not self.inputs and not self.arg_inputs and self.guard is None and self.num_outputs == 1 \
                and not node.schema.whole_batch:
            from headrace_kernels.registry import get_cpu_batch_draw_kernel

            self.batch_draw = get_cpu_batch_draw_kernel(node.schema.name)


def _arg_value(array: np.ndarray, arg: Arg) -> Any:
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


def _arg_values(samples, arg: Arg, size: int) -> list:
    """`_arg_value` of the first `size` samples; numeric scalars of one type are converted for the whole batch at
    once (the same Python values), anything else sample by sample."""
    kinds = _VECTOR_KINDS.get(arg.kind) if not arg.list_of and arg.choices is None else None
    if kinds is not None and size:
        arrays = [samples[i] for i in range(size)]
        first = arrays[0]
        if isinstance(first, np.ndarray) and first.dtype.kind in kinds and \
                all(isinstance(a, np.ndarray) and a.size == 1 and a.dtype == first.dtype for a in arrays):
            flat = np.concatenate([a.reshape(1) for a in arrays]).tolist()
            return [float(v) for v in flat] if arg.kind == "float" else flat
    return [_arg_value(samples[i], arg) for i in range(size)]


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
        self.batch_op_kinds: dict[str, str] = {}
        # checkpointing: the state of the stateful ops right after they made batch i, until batch i is consumed
        self.record_states = False
        self.states_after: dict[int, dict[str, tuple[str, dict]]] = {}
        self.steps: list[tuple[str, Any]] = []  # ("batch", node) or ("samples", [_SampleOp, ...])
        self.gpu = None  # the GPU stage (headrace.gpu_stage): GPU ops and whatever reads their outputs
        gpu_nodes = _gpu_stage_nodes(self.nodes)
        if gpu_nodes or any(n.device != "cpu" for n in self.nodes):
            from headrace.gpu_stage import GpuStage

            self.gpu = GpuStage(self, self.nodes, gpu_nodes, outputs, device_id)
        # A GPU pipeline's readers read in the thread that runs its CPU stage: the stage overlaps the GPU work, and
        # a pool's GIL hand-offs around every file's system calls cost more than reading cached files one by one
        # (benchmarks/gpu_stage_profile.py). HEADRACE_GPU_PARALLEL_READS=1 gives them the pool (slow storage).
        reader_pool = self.pool if self.gpu is None or os.environ.get("HEADRACE_GPU_PARALLEL_READS") == "1" \
            else None
        for node in self.nodes:
            if node.name in gpu_nodes:
                continue
            if node.schema.batch_op:
                reader_cls = BATCH_OPS[node.schema.name]
                self.batch_ops[node.name] = reader_cls(node.name, dict(node.args, **{
                    a: node.arg(a) for a in node.schema.all_args}), batch_size, node_seed(seed, node), reader_pool)
                self.batch_op_kinds[node.name] = node.schema.name
                self.steps.append(("batch", node))
                continue
            kernel = get_cpu_kernel(node.schema.name)
            if kernel is None:
                raise SchemaError(f"{node.schema.name} (node '{node.name}') has no CPU implementation")
            op = _SampleOp(node, kernel, node_seed(seed, node))
            if (self.steps and self.steps[-1][0] == "samples" and not node.schema.whole_batch
                    and not self.steps[-1][1][0].node.schema.whole_batch):  # a whole-batch op is a step alone
                self.steps[-1][1].append(op)
            else:
                self.steps.append(("samples", [op]))

    def run(self, iteration: int) -> tuple[list[TensorListCPU], list[str]]:
        """Compute batch `iteration`: the outputs, and the source of every sample (for error messages)."""
        if self.gpu is not None:
            values, sources, collectors = self.gpu.run(iteration)
        else:
            values, sources, collectors, _ = self.run_cpu_stage(iteration)
        return self._gather(values, sources, collectors)

    def run_cpu_stage(self, iteration: int):
        """Readers and CPU ops of batch `iteration`: (values, sources, collectors, batch size)."""
        values: dict[tuple[str, int], list] = {}
        sources: list[str] = []
        collectors: dict[tuple[str, int], _Collector] = {}
        size = self.batch_size
        wanted = {(o.op.name, o.index) for o in self.outputs}
        for kind, step in self.steps:
            if kind == "batch":
                outs, step_sources = self.batch_ops[step.name].next_batch(iteration)
                if self.record_states:  # taken here, in whichever thread runs this batch's readers
                    self.states_after.setdefault(iteration, {})[step.name] = (
                        self.batch_op_kinds[step.name], self.batch_ops[step.name].get_state())
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
        return values, sources, collectors, size

    def _gather(self, values, sources, collectors) -> tuple[list, list[str]]:
        batches = []
        for out in self.outputs:
            key = (out.op.name, out.index)
            collector = collectors.get(key)
            layout = out.op.arg("output_layout") or "" if "output_layout" in out.op.schema.all_args else ""
            if isinstance(values.get(key), TensorListGPU):
                values[key]._layout, values[key]._source_info = layout, list(sources)
                batches.append(values[key])
            elif collector is not None and not collector.ragged and collector.buffer is not None:
                batches.append(TensorListCPU(collector.buffer, layout, sources))
            else:
                batches.append(TensorListCPU(values[key], layout, sources))
        return batches, sources

    def _run_samples(self, ops: list[_SampleOp], values, collectors, iteration: int, size: int,
                     sources: list[str]) -> None:
        first_sample = iteration * self.batch_size
        if ops[0].node.schema.whole_batch:
            from headrace.whole_batch import run_whole_batch

            return run_whole_batch(ops[0], values, collectors, first_sample, size, sources)
        if any(op.batch_draw is not None for op in ops):
            for op in ops:  # they take no inputs: drawn first, ahead of the ops of this step that may read them
                if op.batch_draw is not None:
                    _run_batch_draw(op, values, collectors, iteration, first_sample, size)
            ops = [op for op in ops if op.batch_draw is None]
            if not ops:
                return

        def work(indices) -> None:
            for i in indices:
                for op in ops:
                    if op.guard is not None and values[op.guard][i] is None:
                        continue  # inside a conditional branch this sample does not take
                    inputs = [values[ref][i] for ref in op.inputs]
                    args = op.static_args
                    try:
                        if op.arg_inputs:
                            args = dict(args)
                            for arg, ref in op.arg_inputs:
                                args[arg.name] = _arg_value(values[ref][i], arg)
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
                        if collector is not None and value is not None:
                            collector.put(i, value)

        if self.num_threads == 1 or size == 1:
            work(range(size))
            return
        # Each worker takes the next sample as it becomes free (a C iterator over itertools.count: atomic under the
        # GIL), so no thread idles at the end of a batch while another finishes a chunk; results do not depend on
        # which thread takes which sample.
        samples = iter(itertools.count().__next__, size)
        for future in [self.pool.submit(work, samples) for _ in range(min(self.num_threads, size))]:
            future.result()

    def states(self) -> dict[str, tuple[str, dict]]:
        """The state of every stateful batch op: node name -> (op, state)."""
        return {name: (self.batch_op_kinds[name], op.get_state()) for name, op in self.batch_ops.items()}

    def take_states_after(self, iteration: int) -> dict[str, tuple[str, dict]]:
        """The stateful ops' state right after they made batch `iteration` (recorded when record_states is on)."""
        return self.states_after.pop(iteration, {})

    def set_states(self, states: dict[str, dict]) -> None:
        for name, op in self.batch_ops.items():
            op.set_state(states[name])

    def reader(self, name: str | None):
        readers = {k: v for k, v in self.batch_ops.items() if hasattr(v, "meta")}
        if name is None:
            if len(readers) != 1:
                raise SchemaError(f"name a reader: this pipeline has {len(readers)} ({', '.join(readers)})")
            return next(iter(readers.values()))
        if name not in readers:
            raise SchemaError(f"no reader named '{name}' (readers: {', '.join(readers) or 'none'})")
        return readers[name]

    def release_memory(self) -> None:
        """Drop pooled host buffers and free the GPU stage's unused device memory."""
        self.buffers.release()
        if self.gpu is not None:
            self.gpu.release_memory()

    def close(self) -> None:
        if self.gpu is not None:
            self.gpu.close()
            # the stage points back here: without this cycle it goes (CUDA stream, memory pool and all) right now,
            # in this thread, not whenever and wherever the garbage collector next runs
            self.gpu.executor = None
            self.gpu = None
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.buffers.release()


def _run_batch_draw(op: _SampleOp, values, collectors, iteration: int, first_sample: int, size: int) -> None:
    try:
        results = op.batch_draw(op.static_args, op.seed, first_sample, size)
    except Exception as exc:
        raise SampleError(f"{op.node.schema.name} (node '{op.node.name}') failed on batch {iteration}: {exc}",
                          node=op.node.name, op=op.node.schema.name) from exc
    out = values[(op.node.name, 0)]
    collector = collectors.get((op.node.name, 0))
    for i, value in enumerate(results):
        out[i] = value
        if collector is not None:
            collector.put(i, value)


def _gpu_stage_nodes(nodes: list[OpNode]) -> set[str]:
    from headrace.gpu_stage import gpu_stage_nodes

    return gpu_stage_nodes(nodes)


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
