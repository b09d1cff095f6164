"""The CPU stage of a batch: readers first, then the per-sample CPU ops on a thread pool of `num_threads`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import headrace.readers  # noqa: F401 - registers the readers
from headrace.batch import BufferPool
from headrace.engine.context import Collector, SampleOp, node_seed
from headrace.engine.samples import run_samples
from headrace.errors import SchemaError
from headrace.graph import DataNode, OpNode
from headrace_kernels.registry import get_cpu_kernel, get_reader

Values = dict[tuple[str, int], Any]


def sample_op(node: OpNode, pipeline_seed: int) -> SampleOp:
    """The per-sample record of a CPU node, or a SchemaError when no CPU kernel is registered for its op."""
    kernel = get_cpu_kernel(node.schema.name)
    if kernel is None:
        raise SchemaError(f"{node.schema.name} (node '{node.name}') has no CPU implementation")
    return SampleOp(node, kernel, node_seed(pipeline_seed, node))


class CpuStage:
    """Readers and per-sample CPU ops of the nodes not in the GPU stage; `run(iteration)` computes their values."""

    def __init__(self, nodes: list[OpNode], outputs: list[DataNode], batch_size: int, num_threads: int, seed: int,
                 buffers: BufferPool, reader_pool: ThreadPoolExecutor | None, pool: ThreadPoolExecutor):
        self.batch_size, self.seed, self.buffers = batch_size, seed, buffers
        self.pool, self.num_threads = pool, num_threads
        self.wanted = {(o.op.name, o.index) for o in outputs}
        self.batch_ops: dict[str, Any] = {}
        self.batch_op_kinds: dict[str, str] = {}
        self.record_states = False  # checkpointing: the readers' state after each batch, until it is consumed
        self.states_after: dict[int, dict[str, tuple[str, dict]]] = {}
        self.steps: list[tuple[str, Any]] = []  # ("batch", node) or ("samples", [SampleOp, ...])
        for node in nodes:
            if node.schema.batch_op:
                reader_cls = get_reader(node.schema.name)
                if reader_cls is None:
                    raise SchemaError(f"{node.schema.name} (node '{node.name}') has no reader implementation")
                self.batch_ops[node.name] = reader_cls(node.name, dict(node.args, **{
                    a: node.arg(a) for a in node.schema.all_args}), batch_size, node_seed(seed, node), reader_pool)
                self.batch_op_kinds[node.name] = node.schema.name
                self.steps.append(("batch", node))
                continue
            op = sample_op(node, seed)
            if (self.steps and self.steps[-1][0] == "samples" and not node.schema.whole_batch
                    and not self.steps[-1][1][0].node.schema.whole_batch):  # a whole-batch op is a step alone
                self.steps[-1][1].append(op)
            else:
                self.steps.append(("samples", [op]))

    def run(self, iteration: int) -> tuple[Values, list[str], dict, int]:
        """Readers and CPU ops of batch `iteration`: (values, sources, collectors, batch size)."""
        values: Values = {}
        sources: list[str] = []
        collectors: dict[tuple[str, int], Collector] = {}
        size = self.batch_size
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
            self.run_ops(step, values, collectors, iteration, size, sources)
        return values, sources, collectors, size

    def run_ops(self, ops: list[SampleOp], values: Values, collectors: dict, iteration: int, size: int,
                sources: list[str]) -> None:
        """Per-sample ops of one step on batch `iteration`, their outputs collected where the pipeline returns them
        (the GPU stage calls this for CPU ops after a `.cpu()`)."""
        for op in ops:
            for index in range(op.num_outputs):
                values[(op.node.name, index)] = [None] * size
                if (op.node.name, index) in self.wanted:
                    collectors[(op.node.name, index)] = Collector(self.buffers, size, self.batch_size)
        run_samples(ops, values, collectors, iteration, iteration * self.batch_size, size, sources, self.pool,
                    self.num_threads)
