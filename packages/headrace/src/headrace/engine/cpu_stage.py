"""The CPU stage of a batch: readers first, then the per-sample CPU ops on a thread pool of `num_threads`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import headrace.readers  # noqa: F401 - registers the readers
from headrace.batch import BufferPool
from headrace.engine.context import Collector, SampleOp, node_seed
from headrace.engine.frames import FrameKernel, frame_layouts, is_sequence_node, per_frame_arg_names
from headrace.engine.samples import run_samples
from headrace.engine.skips import SKIPPED, batch_skips, read_failures
from headrace.engine.workers import WorkerOptions
from headrace.errors import SchemaError
from headrace.graph import DataNode, OpNode
from headrace.schema import frame_arguments
from headrace_kernels.registry import get_cpu_kernel, get_reader

Values = dict[tuple[str, int], Any]


def sample_op(node: OpNode, pipeline_seed: int) -> SampleOp:
    """The per-sample record of a CPU node, or a SchemaError when no CPU kernel is registered for its op."""
    kernel = get_cpu_kernel(node.schema.name)
    if kernel is None:
        raise SchemaError(f"{node.schema.name} (node '{node.name}') has no CPU implementation")
    if is_sequence_node(node):  # the kernel runs on every frame of each sequence
        sequences = tuple((i.spec.layout or "").startswith("F") for i in node.inputs)
        kernel = FrameKernel(kernel, sequences, frame_layouts(node), len(node.outputs))
        op = SampleOp(node, kernel, node_seed(pipeline_seed, node), per_frame_arg_names(node))
        op.static_args = frame_arguments(op.static_args)
        op.batch_kernel = None  # the twin takes samples, not frames
        return op
    return SampleOp(node, kernel, node_seed(pipeline_seed, node))


def user_code(node: OpNode) -> bool:
    """Whether a node runs the user's code (python_function and its kin, plugin ops), which may keep state from
    sample to sample: its batches are not computed two at a time."""
    return node.schema.family == "custom" or bool(node.schema.plugin_module)


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
        # the readers first (they take no inputs): a replacement is taken from all of them at once
        for node in sorted(nodes, key=lambda n: not n.schema.batch_op):
            if node.schema.batch_op:
                reader_cls = get_reader(node.schema.name)
                if reader_cls is None:
                    raise SchemaError(f"{node.schema.name} (node '{node.name}') has no reader implementation")
                # a reader whose per-sample work runs without the GIL (audio decoding, large arrays) gets the pool
                own_pool = pool if getattr(reader_cls, "gil_free_work", False) else reader_pool
                args = {**node.args, **{a: node.arg(a) for a in node.schema.all_args}, "device": node.device}
                self.batch_ops[node.name] = reader_cls(node.name, args, batch_size, node_seed(seed, node), own_pool)
                self.batch_op_kinds[node.name] = node.schema.name
                self.steps.append(("batch", node))
                continue
            op = sample_op(node, seed)
            if (self.steps and self.steps[-1][0] == "samples" and not node.schema.whole_batch
                    and not self.steps[-1][1][0].node.schema.whole_batch):  # a whole-batch op is a step alone
                self.steps[-1][1].append(op)
            else:
                self.steps.append(("samples", [op]))
        self.skipping = False  # set by the executor: whether any op of the pipeline skips failed samples

    @property
    def fed(self) -> bool:
        """Whether a source takes its data per batch from the caller (external_source without `source`): then
        nothing can be read ahead of the batch asked for."""
        return any(getattr(op, "needs_feed", False) for op in self.batch_ops.values())

    def start_workers(self, options: WorkerOptions) -> None:
        """Start the worker processes of the batch ops that run Python in them (a parallel external_source)."""
        for op in self.batch_ops.values():
            if hasattr(op, "use_workers"):
                op.use_workers(options)

    def close(self) -> None:
        """Release what the batch ops hold outside this process (worker processes)."""
        for op in self.batch_ops.values():
            if hasattr(op, "close"):
                op.close()

    def ops_merge(self) -> bool:
        """Whether the CPU ops of consecutive batches may run as one batch and give each sample the same values:
        per-sample ops only (each draws from its sample's own stream), outside branches, no user code, and none of
        their outputs returned by the pipeline (those are collected per batch)."""
        ops = [op for kind, step in self.steps if kind == "samples" for op in step]
        return not self.skipping and not any(
            op.node.schema.whole_batch or op.guard is not None or user_code(op.node)
            or any((op.node.name, k) in self.wanted for k in range(op.num_outputs)) for op in ops)

    def run(self, iteration: int) -> tuple[Values, list[str], dict, int]:
        """Readers and CPU ops of batch `iteration`: (values, sources, collectors, batch size)."""
        if not self.skipping:
            return self.finish(iteration, self.read(iteration))
        values: Values = {}
        sources: list[str] = []
        collectors: dict[tuple[str, int], Collector] = {}
        size = self.batch_size
        failures: dict = {}
        for number, (kind, step) in enumerate(self.steps):  # skipping: replacements after each step
            if kind == "batch":
                outs, step_sources = self._read_step(step, iteration, values)
                if not sources:
                    sources, size = list(step_sources), len(step_sources)
                failures.update(read_failures(step.name, self.batch_op_kinds[step.name], iteration,
                                              zip(range(size), outs[0], step_sources, strict=True)))
            else:
                failures = self.run_ops(step, values, collectors, iteration, size, sources)
            if number + 1 >= len(self.batch_ops):
                if number + 1 == len(self.batch_ops):  # every reader has read
                    self.mark(iteration, values)
                self.replace(values, collectors, iteration, size, sources, failures, upto=number + 1)
                failures = {}
        return values, sources, collectors, size

    def read(self, iteration: int) -> tuple[Values, list[str], int]:
        """The readers' (and sources') part of batch `iteration`, without replacements (no op skips samples):
        (values, sources, batch size). `finish` runs the CPU ops on it; a read may run ahead on another thread."""
        values: Values = {}
        sources: list[str] = []
        size = self.batch_size
        for _, step in self.steps[:len(self.batch_ops)]:  # the batch ops' steps come first
            _, step_sources = self._read_step(step, iteration, values)
            if not sources:
                sources, size = list(step_sources), len(step_sources)
        return values, sources, size

    def finish(self, iteration: int, read: tuple[Values, list[str], int]) -> tuple[Values, list[str], dict, int]:
        """The CPU ops of batch `iteration` on what `read` gave: (values, sources, collectors, batch size)."""
        values, sources, size = read
        collectors: dict[tuple[str, int], Collector] = {}
        for _, step in self.steps[len(self.batch_ops):]:
            self.run_ops(step, values, collectors, iteration, size, sources)
        return values, sources, collectors, size

    def run_group(self, first: int, count: int, merge_ops: bool) -> tuple[Values | None, list]:
        """`run` of batches first..first+count-1, each read as alone (one that fails keeps its error): (the merged
        values, or None, and one (values, sources, collectors, size) or exception per batch). With `merge_ops`
        (where `ops_merge()` allows it), the CPU ops run once on the merged batches, whose values come back as
        they are, and give each batch its part of every output."""
        reads: list = []
        for iteration in range(first, first + count):
            try:
                reads.append(self.read(iteration))
            except Exception as exc:  # noqa: BLE001 - this batch fails alone, the others run without it
                reads.append(exc)
        merged = self._finish_merged(reads, first) if merge_ops else None
        if merged is not None:
            return merged
        return None, [read if isinstance(read, BaseException) else self._finish_alone(first + m, read)
                      for m, read in enumerate(reads)]

    def _finish_merged(self, reads: list, first: int) -> tuple[Values, list] | None:
        """The CPU ops of full batches `reads` run once on them merged (samples keep their numbers, so their
        random streams): (the merged values, each batch given its part of every output); None where a batch
        failed or is not full, or the merged ops failed: then each batch runs alone, and an error names its own
        batch and sample."""
        if any(isinstance(read, BaseException) or read[2] != self.batch_size for read in reads):
            return None
        merged = {key: [sample for read in reads for sample in read[0][key]] for key in reads[0][0]}
        sources = [source for read in reads for source in read[1]]
        try:
            values = self.finish(first, (merged, sources, sum(read[2] for read in reads)))[0]
        except Exception:  # noqa: BLE001 - batch by batch instead
            return None
        members = []
        for m, (own, own_sources, size) in enumerate(reads):
            start = m * self.batch_size
            parts = {key: column[start:start + size] for key, column in values.items() if key not in own}
            members.append(({**own, **parts}, own_sources, {}, size))
        return values, members

    def _finish_alone(self, iteration: int, read: tuple):
        try:
            return self.finish(iteration, read)
        except Exception as exc:  # noqa: BLE001 - this batch fails alone, the others run without it
            return exc

    def _read_step(self, step: OpNode, iteration: int, values: Values) -> tuple[list, list[str]]:
        """One batch op's outputs of batch `iteration` into `values`; its state recorded when checkpointing."""
        outs, step_sources = self.batch_ops[step.name].next_batch(iteration)
        if self.record_states:  # taken here, in whichever thread runs this batch's readers
            self.states_after.setdefault(iteration, {})[step.name] = (
                self.batch_op_kinds[step.name], self.batch_ops[step.name].get_state())
        for index, samples in enumerate(outs):
            values[(step.name, index)] = samples
        return outs, step_sources

    def mark(self, iteration: int, values: Values) -> None:
        """Note where the readers stand after this batch's samples and replacements: their state (checkpoints)
        and the batch's fill slots."""
        if self.record_states:
            self.states_after[iteration] = {name: (self.batch_op_kinds[name], op.get_state())
                                            for name, op in self.batch_ops.items()}
        values[(SKIPPED, 1)] = sorted({slot for op in self.batch_ops.values() for slot in op.fill_slots()})

    def replace(self, values: Values, collectors: dict, iteration: int, size: int, sources: list[str],
                failures: dict, upto: int | None = None) -> None:
        """Give the failed slots the readers' next samples and run steps [0, upto) on them again, until no slot
        fails; the failures are recorded in the batch's values (skips.SKIPPED)."""
        upto = len(self.steps) if upto is None else upto
        while failures:
            batch_skips(values, self.batch_size).add(iteration, failures)
            slots = sorted(failures)
            failures = {}
            for name, op in self.batch_ops.items():
                outs, step_sources = op.replacements(slots)
                for index, samples in enumerate(outs):
                    column = values[(name, index)]
                    for slot, sample in zip(slots, samples, strict=True):
                        column[slot] = sample
                if name == next(iter(self.batch_ops)):
                    for slot, source in zip(slots, step_sources, strict=True):
                        sources[slot] = source
                failures.update(read_failures(name, self.batch_op_kinds[name], iteration,
                                              zip(slots, outs[0], step_sources, strict=True)))
            self.mark(iteration, values)
            redo: list[int] | None = [slot for slot in slots if slot not in failures]
            for kind, step in self.steps[:upto]:
                if redo == []:
                    break
                if kind != "samples":
                    continue
                if step[0].node.schema.whole_batch:
                    redo = None  # its output depends on every sample: it and the steps after it run on them all
                failed = run_samples(step, values, collectors, iteration, iteration * self.batch_size, size,
                                     sources, self.pool, self.num_threads, redo)
                failures.update(failed)
                if redo is not None:
                    redo = [slot for slot in redo if slot not in failed]
                elif failed:
                    redo = [slot for slot in range(size) if slot not in failures]

    def run_ops(self, ops: list[SampleOp], values: Values, collectors: dict, iteration: int, size: int,
                sources: list[str]) -> dict:
        """Per-sample ops of one step on batch `iteration`, their outputs collected where the pipeline returns them
        (the GPU stage calls this for CPU ops after a `.cpu()`). Returns the failures of ops that skip, by slot."""
        for op in ops:
            for index in range(op.num_outputs):
                values[(op.node.name, index)] = [None] * size
                if (op.node.name, index) in self.wanted:
                    collectors[(op.node.name, index)] = Collector(self.buffers, size, self.batch_size)
        return run_samples(ops, values, collectors, iteration, iteration * self.batch_size, size, sources,
                           self.pool, self.num_threads)
