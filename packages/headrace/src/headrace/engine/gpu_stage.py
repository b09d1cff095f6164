"""The executor's GPU stage: every op with device 'gpu' or 'mixed' (and whatever reads their outputs, `.cpu()` copies
and the CPU ops after them included) runs here, batch-wise, on the pipeline's own CUDA stream, through the kernels
registered in headrace_kernels.registry (a chain of ops with a fused kernel runs as one step).

While the GPU stage of batch i runs in the caller's thread, the CPU stage of batch i+1 (readers, CPU ops, and the
host half of the preparing kernels: the decoders' header parsing and crop windows) runs on a second thread, and
kernels that can plan on a decoder's prepared records plan there too. With the executor option coalesce_batches,
consecutive batches of a reader pipeline are read one by one, then run through the GPU steps as one batch and
split again after them."""

from __future__ import annotations

import collections
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from headrace.batch import TensorListGPU
from headrace.engine.branches import run_step
from headrace.engine.context import BatchInfo, node_seed, ref_of
from headrace.engine.cpu_process import CpuStageProcess, runs_in_process
from headrace.engine.cpu_stage import CpuStage, sample_op
from headrace.engine.frames import FrameBatchView, fold_frames, frame_layouts, is_sequence_node, per_frame_arg_names
from headrace.engine.gpu_batch import PLANNED, PREPARED, GpuBatchView, Outputs, upload
from headrace.engine.options import ExecutorOptions
from headrace.engine.skips import gpu_skip_head, retry_skips, skips
from headrace.errors import DeviceError, SampleError
from headrace.graph import DataNode, OpNode
from headrace.schema import frame_arguments
from headrace_kernels.gpu import events
from headrace_kernels.gpu.affinity import keep_thread_on, pipeline_cpus
from headrace_kernels.numba_calls import start_cpu_target
from headrace_kernels.registry import (
    GpuKernelEntry,
    KernelSetup,
    SampleFailureError,
    fused_gpu_kernels,
    get_gpu_kernel,
)


def gpu_stage_nodes(nodes: list[OpNode]) -> set[str]:
    """Names of the nodes that run in the GPU stage: non-CPU ops, and every op downstream of GPU data."""
    stage: set[str] = set()
    gpu_sources: set[str] = set()
    for node in nodes:
        if node.schema.batch_op:
            if node.device != "cpu":
                gpu_sources.add(node.name)
            continue
        upstream = {d.op.name for d in node.upstream}
        if node.device != "cpu" or upstream & (stage | gpu_sources):
            stage.add(node.name)
    return stage


def gpu_fed_nodes(nodes: list[OpNode], stage: set[str]) -> set[str]:
    """Names of the nodes outside the GPU stage (`stage`, from gpu_stage_nodes) whose outputs a stage node reads."""
    return {d.op.name for node in nodes if node.name in stage for d in node.upstream} - stage


def check_device(device_id: int | None, nodes: list[OpNode]) -> None:
    """A DeviceError naming the first GPU node when no GPU can run it (raised at build time)."""
    from headrace_kernels.gpu.runtime import gpu_unavailable_reason

    reason = gpu_unavailable_reason(device_id)
    if reason is not None:
        node = next((n for n in nodes if n.device != "cpu"), nodes[0])
        raise DeviceError(f"{node.schema.name} (node '{node.name}') runs on device '{node.device}', but {reason}. "
                          "Use device='cpu' for this pipeline on this machine.")


def fused_chains(nodes: list[OpNode], outputs: list[DataNode]) -> list[tuple[GpuKernelEntry, list[OpNode]]]:
    """The chains of GPU nodes that a fused kernel replaces: each op of the chain is read by the next alone, as
    that op's first input, and is not a pipeline output (the last op may be)."""
    readers: dict[str, list[OpNode]] = {}
    for node in nodes:
        for d in node.upstream:
            readers.setdefault(d.op.name, []).append(node)
    output_ops = {o.op.name for o in outputs}
    taken: set[str] = set()
    chains = []
    for entry in fused_gpu_kernels():
        for node in nodes:
            if node.schema.name != entry.ops[0] or node.device != "gpu" or node.name in taken \
                    or is_sequence_node(node):
                continue
            chain = [node]
            for op in entry.ops[1:]:
                last = chain[-1]
                users = readers.get(last.name, [])
                user = users[0] if len(users) == 1 else None
                if last.name in output_ops or user is None or user.schema.name != op or user.device != "gpu" \
                        or user.name in taken or not user.inputs or user.inputs[0].op is not last \
                        or is_sequence_node(user):
                    break
                chain.append(user)
            if len(chain) == len(entry.ops):
                chains.append((entry, chain))
                taken.update(n.name for n in chain)
    return chains


class KernelStep:
    """One GPU kernel of the graph (one node, or a fused chain ending in `node`): its kernel object, its literal
    arguments and where its inputs and per-sample argument inputs come from."""

    def __init__(self, stage: GpuStage, chain: list[OpNode], entry: GpuKernelEntry):
        self.stage, self.chain, self.node = stage, chain, chain[-1]
        sequence = len(chain) == 1 and is_sequence_node(self.node)
        self.parts = [(n, frame_arguments(n.resolved_args()) if sequence else n.resolved_args(),
                       [(name, ref_of(d)) for name, d in n.arg_inputs.items()]) for n in chain]
        self.args = self.parts[-1][1]
        self.per_sample_args = frozenset(self.node.arg_inputs)
        self.arg_refs = [ref for _, _, refs in self.parts for _, ref in refs]
        # a fused chain reads its first op's inputs, then each later op's other inputs (the first is the op before)
        self.inputs = [ref_of(i) for i in chain[0].inputs] + [ref_of(i) for n in chain[1:] for i in n.inputs[1:]]
        self.seed = node_seed(stage.seed, self.node)
        self.kernel = entry.make(KernelSetup(
            op=self.node.schema.name, args=self.args, device=self.node.device, device_id=stage.ctx.device_id,
            num_threads=stage.num_threads, batch_size=stage.batch_size, seed=self.seed, options=stage.options,
            per_sample_args=frozenset(name for n in chain for name in n.arg_inputs),
            parts=tuple(args for _, args, _ in self.parts), chain=entry.ops))
        self.prepares = hasattr(self.kernel, "prepare")  # a host half that the CPU stage runs, ahead
        self.plans = hasattr(self.kernel, "plan")  # plans ahead: a launch on a decoder's records, a copy's upload
        self.launches_ahead = hasattr(self.kernel, "launch_ahead")  # starts its work in the look-ahead: a decode
        self.frames = sequence
        """The node runs frame by frame on sequences: its kernel sees a batch of frames (engine.frames)."""

    def batch(self, values: dict, info: BatchInfo) -> GpuBatchView | FrameBatchView:
        view = GpuBatchView(self, values, info, self.stage.ctx)
        if not self.frames:
            return view
        sequences = tuple((i.spec.layout or "").startswith("F") for i in self.node.inputs)
        return FrameBatchView(view, per_frame_arg_names(self.node), sequences, frame_layouts(self.node))

    def prepare(self, values: dict, info: BatchInfo) -> Any:
        return self.kernel.prepare(self.batch(values, info))

    def run(self, values: dict, info: BatchInfo) -> Any:
        batch = self.batch(values, info)
        if self.prepares:
            batch.ahead = values.get((PREPARED, self.node.name))
            if not self.stage.lookahead:  # fed inputs: the steps after it plan their launches while it decodes
                batch.meanwhile = lambda: self.stage.plan_ahead(values, info)
        elif self.plans:
            batch.planned = values.pop((PLANNED, self.node.name), None)
        result = self.kernel.run(batch)
        if self.node.device == "cpu":  # a `.cpu()` copy: host arrays
            return result
        wrap = self._wrap if not self.frames else lambda part: fold_frames(self._wrap(part), batch.lengths)
        if len(self.node.outputs) > 1:  # one result per output
            return Outputs(wrap(part) for part in result)
        return wrap(result)

    def _wrap(self, result) -> TensorListGPU:
        dense, listed = result if isinstance(result, tuple) else (None, result)
        return TensorListGPU(dense if dense is not None else listed, stream=self.stage.ctx.stream,
                             device_id=self.stage.ctx.device_id)


class _SwitchInterval:
    """The interpreter's GIL switch interval while GPU stages that ask for one exist, restored after the last."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: float | None = None

    def hold(self, interval: float) -> None:
        with self._lock:
            self._holders += 1
            if 0 < interval < sys.getswitchinterval():
                if self._saved is None:
                    self._saved = sys.getswitchinterval()
                sys.setswitchinterval(interval)

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._saved is not None:
                sys.setswitchinterval(self._saved)
                self._saved = None


_switch_interval = _SwitchInterval()


class GpuStage:
    """The GPU half of an executor: its steps, its device context, and the look-ahead that overlaps the CPU stage
    of the next batch with this one's GPU work."""

    def __init__(self, cpu: CpuStage, nodes: list[OpNode], stage: set[str], outputs: list, device_id: int | None,
                 options: ExecutorOptions, worker: CpuStageProcess | None = None):
        """`worker`: a worker process started for `cpu`'s nodes (CpuStageProcess), taken where this stage runs its
        CPU stage there, else closed."""
        from headrace_kernels.gpu.runtime import GpuContext

        check_device(device_id, nodes)
        _switch_interval.hold(options.switch_interval)
        self._holds_interval = True
        self.cpu, self.options = cpu, options
        self.seed, self.batch_size, self.num_threads = cpu.seed, cpu.batch_size, cpu.num_threads
        self.ctx = GpuContext(device_id, limit_bytes=options.gpu_pool_limit)
        self.gpu_sources = [n for n in nodes if n.schema.batch_op and n.device != "cpu"]
        self.steps: list[tuple[str, Any]] = []
        in_stage = [n for n in nodes if n.name in stage]
        chains = {chain[-1].name: (entry, chain) for entry, chain in fused_chains(in_stage, outputs)}
        inner = {n.name for _, chain in chains.values() for n in chain[:-1]}
        for node in in_stage:
            if node.name in inner:
                continue
            entry, chain = chains.get(node.name, (get_gpu_kernel(node.schema.name), [node]))
            if node.device == "cpu" and not (entry is not None and getattr(entry.impl, "transfer", False)):
                self.steps.append(("samples", sample_op(node, self.seed)))  # a CPU op after a `.cpu()`
                continue
            if entry is None:
                raise DeviceError(f"{node.schema.name} (node '{node.name}') has no GPU implementation")
            self.steps.append(("gpu", KernelStep(self, chain, entry)))
        # on_error="skip": the steps up to the last that skips are run again on a replaced sample, and the next
        # batch is read only after them, so that replacements come from the readers in batch order
        self.skip_until = gpu_skip_head(self.steps, stage)
        self.skipping = {step.node.name for _, step in self.steps[:self.skip_until] if skips(step.node)}
        self.lookahead = options.lookahead != "off" and not cpu.fed  # fed: nothing to read ahead
        # When the next batch's CPU stage starts: by default before this batch's GPU steps, so it overlaps the
        # decode ('after': once the last decoder has run; benchmarks/HISTORY.md has the measurements).
        preparing = [step for kind, step in self.steps if kind == "gpu" and step.prepares]
        self.lookahead_at = preparing[-1] if preparing and options.lookahead == "after" and not self.skip_until \
            else None
        self.output_refs = {ref_of(o) for o in outputs}
        self.group = options.coalesced(self.batch_size) if self._coalescible(in_stage) else 1
        """Consecutive batches run as one (executor option coalesce_batches), where the pipeline allows it."""
        self.merge_cpu_ops = self.group > 1 and cpu.ops_merge()
        """Whether a coalesced run's CPU ops run once on its merged batch too (else batch by batch)."""
        if options.runs_plan_process(self.lookahead, self.group > 1):
            for kernel in self.kernels():
                if hasattr(kernel, "start_plan_process"):
                    kernel.start_plan_process(defer=options.place_in_gpu_stage and self.lookahead)
        self._deferring = [step for kind, step in self.steps if kind == "gpu" and getattr(step.kernel, "defer", False)]
        """The steps whose plans the look-ahead only asks a helper for: the GPU stage collects and places them."""
        self.reads: CpuStage | CpuStageProcess = cpu
        """What computes the CPU stage's batches: the CPU stage itself, or its worker process (cpu_process)."""
        if worker is not None and options.runs_cpu_process(self.merge_cpu_ops) and self.lookahead \
                and runs_in_process(cpu):
            read = {ref_of(d) for n in in_stage for d in (*n.inputs, *n.arg_inputs.values(), n.guard) if d is not None}
            self.reads = worker.bind(cpu, read | self.output_refs)
        elif worker is not None:
            worker.close()
        self._done: dict[int, Any] = {}  # the later batches of a coalesced run: outputs, or the error they failed on
        near = (pipeline_cpus(options.cpu_affinity, self.ctx.device_id),)  # each thread's initargs
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="headrace-cpu-stage", initializer=keep_thread_on,
                                          initargs=near)
        self._reader_thread = ThreadPoolExecutor(1, thread_name_prefix="headrace-readers", initializer=keep_thread_on,
                                                 initargs=near)
        self._reads: dict[int, Future] = {}  # the readers' phase of batches ahead (see _read_ahead)
        self._pending: tuple[int, Future] | None = None
        self._previous = None
        self._lock = threading.Lock()
        self.timings: collections.Counter = collections.Counter()  # seconds spent per part (host side)
        # decoders that decode on threads of their own warm up there meanwhile: while the first batch is read and
        # prepared, or, fed, while the caller readies it and its headers are parsed; numba sets up its CPU target
        # beside them, for the first batch's compiled loops
        start_cpu_target()
        for kernel in self.kernels():
            if hasattr(kernel, "warm_up_in_lanes"):
                kernel.warm_up_in_lanes()

    def _coalescible(self, in_stage: list[OpNode]) -> bool:
        """Whether batches can run coalesced: full batches from readers (at least one) only, read ahead, and no step
        that sees the batch as a whole or keeps per-batch state (conditionals, skips, sequences, whole-batch ops,
        CPU ops after a `.cpu()`)."""
        return self.lookahead and self.lookahead_at is None and not self.skip_until and not self.cpu.skipping \
            and bool(self.cpu.batch_ops) and all(hasattr(op, "meta") for op in self.cpu.batch_ops.values()) \
            and all(kind == "gpu" for kind, _ in self.steps) \
            and not any(n.guard is not None or n.schema.whole_batch or is_sequence_node(n) for n in in_stage)

    def kernels(self) -> list[Any]:
        """The kernel objects of the GPU steps, in order (decoders, fused kernels, ...)."""
        return [step.kernel for kind, step in self.steps if kind == "gpu"]

    # The CPU stage, in two phases on two threads, ahead of the GPU steps: the readers and CPU ops of batch i+2
    # (file reads without the GIL) run beside the host half of the decoders of batch i+1 and the decode of batch i.
    def _readers(self, iteration: int):
        start = time.perf_counter()
        result = self.reads.run(iteration)
        self.timings["cpu stage"] += time.perf_counter() - start
        return result

    def _read_ahead(self, iteration: int) -> Future:
        """The readers' phase of batch `iteration` (of the coalesced run starting there), on the readers' thread
        (one at a time, in order)."""
        future = self._reads.get(iteration)
        if future is None:
            work = self._read_group if self.group > 1 else self._readers
            future = self._reads[iteration] = self._reader_thread.submit(work, iteration)
        return future

    def _read_group(self, first: int) -> tuple[dict | None, list]:
        """The CPU stage of the batches of the coalesced run starting at `first` (CpuStage.run_group)."""
        start = time.perf_counter()
        group = self.reads.run_group(first, self.group, self.merge_cpu_ops)
        self.timings["cpu stage"] += time.perf_counter() - start
        return group

    def _take_read(self, iteration: int):
        """The readers' phase of batch `iteration` (read ahead, or now), taken off the batches read ahead."""
        future = self._read_ahead(iteration)
        try:
            return future.result()
        finally:
            self._reads.pop(iteration, None)

    def _cpu_stage(self, iteration: int):
        if self.group > 1:
            return self._group_cpu_stage(iteration)
        start = time.perf_counter()
        if not self.lookahead and iteration not in self._reads:
            # fed inputs: nothing is read ahead, and a hand-off to the readers' thread would only add latency
            values, sources, collectors, size = self._readers(iteration)
        else:
            values, sources, collectors, size = self._take_read(iteration)
        read = time.perf_counter()
        info = BatchInfo(iteration, iteration * self.batch_size, size, sources)
        if self.skip_until:
            retry_skips(lambda: self._prepare(values, info), self.skipping, self.cpu, values, collectors, info,
                        lambda: self._forget_prepared(values))
        else:
            self._prepare(values, info)
        prepared = time.perf_counter()
        if self.lookahead:  # on the look-ahead's thread; fed batches plan while they decode (KernelStep.run)
            with self.ctx.active():
                if not self.skip_until:  # skipping: a replaced sample is prepared again
                    self.launch_ahead(values, info)  # first: the decode runs while the launches are planned
                self.plan_ahead(values, info)
        elif not self.skip_until:  # fed, or no look-ahead: `run` holds the context; the decode runs meanwhile
            self.launch_ahead(values, info, now=True)
        self._time_cpu_stage(start, read, prepared, time.perf_counter())
        return values, sources, collectors, info

    def _time_cpu_stage(self, start: float, read: float, prepared: float, end: float) -> None:
        self.timings["cpu stage + host half of decoders"] += end - start
        self.timings["  of which waiting for the readers"] += read - start
        self.timings["  of which host half of decoders"] += prepared - read
        self.timings["  of which launches and plans ahead"] += end - prepared

    def _group_cpu_stage(self, first: int):
        """The CPU stages of batches first..first+group-1 (each read as alone; one that fails keeps its error),
        merged into one batch with its host half prepared and its launches planned: (merged values, or None where
        they cannot run as one, the members, the merged BatchInfo)."""
        start = time.perf_counter()
        merged, members = self._take_read(first)
        read = time.perf_counter()
        values, info = self._merge(members, first, merged)
        if values is not None:
            try:
                self._prepare(values, info)
            except SampleError:  # run member by member: only the batch with the bad sample fails
                values = None
        prepared = time.perf_counter()
        if values is not None:
            with self.ctx.active():
                self.launch_ahead(values, info)
                self.plan_ahead(values, info)
        self._time_cpu_stage(start, read, prepared, time.perf_counter())
        return values, members, info

    def _merge(self, members: list, first: int, merged: dict | None = None) -> tuple[dict | None, BatchInfo | None]:
        """The members' values as one batch (each value's samples in member order; `merged` where the CPU stage
        made them so), or (None, None) where one failed or is not a full batch (samples are numbered by their
        place in the run: first * batch_size + i)."""
        if any(isinstance(m, BaseException) or m[3] != self.batch_size for m in members):
            return None, None
        values = dict(merged) if merged is not None else \
            {key: [sample for member in members for sample in member[0][key]] for key in members[0][0]}
        sources = [source for member in members for source in member[1]]
        return values, BatchInfo(first, first * self.batch_size, sum(member[3] for member in members), sources)

    def _prepare(self, values: dict, info: BatchInfo) -> None:
        """The host half of the preparing kernels (the decoders' headers and crop windows), ahead of the GPU steps."""
        for kind, step in self.steps:
            if kind == "gpu" and step.prepares and step.node.guard is None \
                    and all(ref in values for ref in step.inputs):  # inside a branch: prepared on its sub-batch
                try:
                    values[(PREPARED, step.node.name)] = step.prepare(values, info)
                except Exception as exc:
                    raise self._error(step.node, exc, info) from exc

    @staticmethod
    def _forget_prepared(values: dict) -> None:
        """Drop what was prepared and planned ahead of a batch whose samples changed (a replacement)."""
        for key in [key for key in values if key[0] in (PREPARED, PLANNED)]:
            del values[key]

    def plan_ahead(self, values: dict, info: BatchInfo) -> None:
        """Plan the steps that can plan ahead (call with the context active): launches on a decoder's prepared
        records, uploads of host data; in the look-ahead, or while the batch decodes."""
        for kind, step in self.steps:
            if kind != "gpu" or not step.plans or step.node.guard is not None or step.frames:
                continue
            if (PLANNED, step.node.name) in values or (step.node.name, 0) in values:  # planned, or already ran
                continue
            if not all(ref in values for ref in step.arg_refs):
                continue
            try:
                plan = step.kernel.plan(step.batch(values, info))
            except Exception:  # noqa: BLE001 - planning ahead is an optimization: the step's run plans again
                plan = None  # and reports the error there, with the decoded images at hand
            if plan is not None:
                values[(PLANNED, step.node.name)] = plan

    def launch_ahead(self, values: dict, info: BatchInfo, now: bool = False) -> None:
        """Start the steps that can start ahead (a decoder hands the batch to its decode lanes), so that they work
        on this batch while the batch before runs its later steps; `now`: a batch this thread runs next (fed
        inputs, or no look-ahead: a decoder starts even a small batch, here)."""
        for kind, step in self.steps:
            if kind != "gpu" or not step.launches_ahead or step.node.guard is not None:
                continue
            prepared = values.get((PREPARED, step.node.name))
            if prepared is None:
                continue
            batch = step.batch(values, info)
            batch.ahead = prepared
            try:
                step.kernel.launch_ahead(batch, now)
            except Exception:  # noqa: BLE001 - starting early is an optimization: the step's run decodes it and
                pass  # reports the error there

    def _next_cpu_stage(self, iteration: int):
        pending, self._pending = self._pending, None
        if pending is not None:
            future, wanted = pending[1], pending[0] == iteration
            pending = None
            try:  # `future` goes when this returns or raises: no cycle through this frame holds a failed batch
                if wanted:
                    return future.result()
                try:
                    future.result()
                except BaseException:  # noqa: BLE001 - a look-ahead nobody asked for
                    pass
            finally:
                future = None
        for ahead, future in list(self._reads.items()):
            if not iteration <= ahead < iteration + self.group:  # read ahead for another sequence of iterations
                try:
                    future.result()
                except BaseException:  # noqa: BLE001 - nobody asked for them
                    pass
                self._reads.pop(ahead, None)
        return self._cpu_stage(iteration)

    def run(self, iteration: int):
        """Batch `iteration`: its CPU stage (computed ahead when possible), then the GPU steps on the stream."""
        if self.group > 1:
            return self._run_coalesced(iteration)
        with self._lock, self.ctx.active():  # active for a CPU stage run here too (fed inputs: its allocations)
            wait = time.perf_counter()
            values, sources, collectors, info = self._next_cpu_stage(iteration)
            self.timings["gpu stage waiting for cpu stage"] += time.perf_counter() - wait
            if self.lookahead and self.lookahead_at is None and not self.skip_until:
                self._look_ahead(iteration)
            self._sync_previous()
            self._upload_sources(values)
            self._finish_plans(values)
            head = self.steps[:self.skip_until]
            if head:  # the steps a failed sample is replaced in; then the next batch may be read
                retry_skips(lambda: self._run_steps(head, values, collectors, info), self.skipping, self.cpu, values,
                            collectors, info, lambda: self._forget_prepared(values))
                if self.lookahead:
                    self._look_ahead(iteration)
            self._run_steps(self.steps[self.skip_until:], values, collectors, info)
            self._previous = (events.record(self.ctx.stream), values)
            return values, sources, collectors

    def _run_coalesced(self, iteration: int):
        """Batch `iteration` of a coalesced run: computed with the batches after it when it starts a run (or a new
        sequence of iterations), else taken from the run that computed it."""
        done = self._done.pop(iteration, None)
        if done is None:
            self._done.clear()  # batches of another sequence of iterations
            with self._lock, self.ctx.active():
                self._compute_coalesced(iteration)
            done = self._done.pop(iteration)
        if isinstance(done, BaseException):
            try:
                raise done
            finally:  # no cycle through this frame: the failed batch goes once the caller drops the error
                done = None
        return done

    def _compute_coalesced(self, first: int) -> None:
        """Batches first..first+group-1 into `_done`: as one batch where they merged and ran, else each alone."""
        wait = time.perf_counter()
        values, members, info = self._next_cpu_stage(first)
        self.timings["gpu stage waiting for cpu stage"] += time.perf_counter() - wait
        self._look_ahead(first)
        if values is not None:
            self._sync_previous()
            try:
                self._upload_sources(values)
                self._finish_plans(values)
                self._run_steps(self.steps, values, {}, info)
            except Exception:  # noqa: BLE001 - again member by member: only the batch with the bad sample fails
                values = None
            else:
                self._previous = (events.record(self.ctx.stream), values)
                for m, member in enumerate(members):
                    self._done[first + m] = self._member_outputs(member, values, m * self.batch_size)
                return
        for m, member in enumerate(members):
            self._done[first + m] = member if isinstance(member, BaseException) else \
                self._run_member(first + m, member)

    def _member_outputs(self, member: tuple, values: dict, start: int) -> tuple:
        """One member's (values, sources, collectors): its own CPU values and collected outputs, and its part of
        the merged GPU outputs (views)."""
        own, sources, collectors, size = member
        out = dict(own)
        for ref in self.output_refs:
            value = values.get(ref)
            if isinstance(value, TensorListGPU):
                out[ref] = value.part(start, start + size)
            elif ref not in own:  # a `.cpu()` copy's host samples
                out[ref] = value[start:start + size]
        return out, sources, collectors

    def _run_member(self, iteration: int, member: tuple):
        """One member of a coalesced run alone (its run could not merge): its outputs, or the error it failed on."""
        values, sources, collectors, size = member
        info = BatchInfo(iteration, iteration * self.batch_size, size, sources)
        try:
            self._prepare(values, info)
            self._sync_previous()
            self._upload_sources(values)
            self._finish_plans(values)
            self._run_steps(self.steps, values, collectors, info)
        except Exception as exc:  # noqa: BLE001 - handed to whoever asks for this batch
            return exc
        self._previous = (events.record(self.ctx.stream), values)
        return values, sources, collectors

    def _sync_previous(self) -> None:
        """What the last batch's kernels read may be freed once the stream has passed them."""
        if self._previous is not None:
            self._previous[0].synchronize()
            self._previous = None

    def _upload_sources(self, values: dict) -> None:
        """The GPU readers' host samples of the batch, uploaded."""
        for source in self.gpu_sources:
            for index in range(len(source.outputs)):
                values[(source.name, index)] = upload(values[(source.name, index)])

    def _finish_plans(self, values: dict) -> None:
        """Collect and place the plans the look-ahead left to a helper (executor option place_in_gpu_stage), before
        the steps wait for the batch's decode."""
        for step in self._deferring:
            key = (PLANNED, step.node.name)
            planned = values.get(key)
            if planned is None:
                continue
            try:
                plan = step.kernel.finish_plan(planned)
            except Exception:  # noqa: BLE001 - planning ahead is an optimization: the step's run plans again and
                plan = None  # reports the error there
            if plan is None:
                values.pop(key, None)
            else:
                values[key] = plan

    def _run_steps(self, steps: list, values: dict, collectors: dict, info: BatchInfo) -> None:
        for kind, step in steps:
            if kind == "samples":
                self.cpu.run_ops([step], values, collectors, info.iteration, info.size, info.sources)
                continue
            try:
                start = time.perf_counter()
                result = run_step(step, values, info)
                self.timings[f"gpu step {step.node.schema.name}"] += time.perf_counter() - start
            except SampleError:
                raise
            except Exception as exc:
                raise self._error(step.node, exc, info) from exc
            for index, part in enumerate(result if isinstance(result, Outputs) else (result,)):
                values[(step.node.name, index)] = part
            if step is self.lookahead_at and self.lookahead:
                self._look_ahead(info.iteration)

    def _look_ahead(self, iteration: int) -> None:
        if self.group > 1:  # the next run's batches and the one after's, read ahead; the next run's CPU stage
            self._read_ahead(iteration + self.group)
            self._read_ahead(iteration + 2 * self.group)
            self._pending = (iteration + self.group, self._thread.submit(self._cpu_stage, iteration + self.group))
            return
        self._read_ahead(iteration + 1)
        if not self.skip_until:  # skipping: the readers give batch i+1's replacements before batch i+2
            self._read_ahead(iteration + 2)
        self._pending = (iteration + 1, self._thread.submit(self._cpu_stage, iteration + 1))

    def _error(self, node: OpNode, exc: Exception, info: BatchInfo) -> SampleError:
        op = node.schema.name
        if isinstance(exc, SampleFailureError):
            i = exc.index
            source = info.source(i)
            return SampleError(f"{op} (node '{node.name}', GPU) failed on sample {i} of batch {info.iteration} "
                               f"[{source}]: {exc}", node=node.name, op=op, sample=i, source=source)
        return SampleError(f"{op} (node '{node.name}', GPU) failed on batch {info.iteration}: "
                           f"{type(exc).__name__}: {exc}", node=node.name, op=op)

    def warm_up(self) -> None:
        """Do what the kernels would do at their first batch (the decoders: create, decode a warm-up batch)."""
        with self._lock, self.ctx.active():
            for kernel in self.kernels():
                if hasattr(kernel, "warm_up"):
                    kernel.warm_up(self.ctx.stream)
            self.ctx.stream.synchronize()

    # Memory
    def release_memory(self) -> None:
        """Free every pooled device block nothing refers to, and the kernels' own buffers and kept plans."""
        pending = self._pending
        if pending is not None:  # the look-ahead allocates too: let it finish (its batch keeps its memory)
            try:
                pending[1].result()
            except BaseException:  # noqa: BLE001 - reported when that batch is asked for
                pass
        with self._lock:
            if self._previous is not None:
                self._previous[0].synchronize()
                self._previous = None
            self._release_kernels()
            self.ctx.release()

    def _release_kernels(self) -> None:
        for kernel in self.kernels():
            if hasattr(kernel, "release"):
                kernel.release()

    def __del__(self) -> None:
        # A stage dropped without close() (a pipeline nobody closed, collected in a reference cycle) must still
        # tear down in order: left to the collector, the stream could go before the images decoded on it.
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown, or close() already done
            pass

    def close(self) -> None:
        if getattr(self, "_holds_interval", False):
            self._holds_interval = False
            _switch_interval.release()
        if not hasattr(self, "_thread"):
            return  # __init__ failed (no GPU): nothing was made
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                pending[1].result()
            except BaseException:  # noqa: BLE001 - closing
                pass
        self._thread.shutdown(wait=False, cancel_futures=True)
        self._reader_thread.shutdown(wait=True, cancel_futures=True)  # a read in progress finishes first
        if self.reads is not self.cpu:
            self.reads.close()
        self._reads.clear()
        self._done.clear()
        # Tear down in order, not at the garbage collector's whim: nvImageCodec's images and decoders were made on
        # this stream and use it when they go, so they go first, while it still exists.
        with self._lock:
            self.ctx.stream.synchronize()
            self._previous = None
            self._release_kernels()
            for kernel in self.kernels():
                if hasattr(kernel, "close"):  # processes and threads of its own
                    kernel.close()
            self.steps = []
            self.ctx.release()  # the pools' unused blocks go back to the device now, not when the stage is collected
