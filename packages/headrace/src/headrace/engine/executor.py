"""The executor: runs one batch of a graph through its CPU stage and, where the graph has GPU ops, its GPU stage."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

from headrace.batch import BufferPool, TensorListCPU, TensorListGPU
from headrace.engine.cpu_process import CpuStageProcess, may_run_in_process
from headrace.engine.cpu_stage import CpuStage, user_code
from headrace.engine.gpu_stage import GpuStage, check_device, gpu_fed_nodes, gpu_stage_nodes
from headrace.engine.options import ExecutorOptions
from headrace.engine.read_ahead import ReadAhead
from headrace.engine.skips import SkipLog, Skipped, check_replaceable
from headrace.engine.workers import WorkerOptions
from headrace.errors import SchemaError
from headrace.graph import DataNode, OpNode, needed_nodes
from headrace_kernels.gpu.affinity import keep_thread_on, pipeline_cpus


@contextlib.contextmanager
def _closed_on_error(worker: CpuStageProcess | None):
    """Close `worker` if the block fails (once the GPU stage has it, closing it is that stage's)."""
    try:
        yield
    except BaseException:
        if worker is not None:
            worker.close()
        raise


class Executor:
    """Runs batches of a validated graph; `run(iteration)` must be called with consecutive iterations."""

    def __init__(self, nodes: list[OpNode], outputs: list[DataNode], batch_size: int, num_threads: int, seed: int,
                 device_id: int | None, prefetch_queue_depth: int, options: ExecutorOptions | None = None,
                 workers: WorkerOptions | None = None):
        self.options = options or ExecutorOptions()
        self.nodes = needed_nodes(nodes, outputs)
        self.outputs = outputs
        self.batch_size, self.seed = batch_size, seed
        self.num_threads = max(1, num_threads)
        self.buffers = BufferPool(per_key=prefetch_queue_depth + 2)
        gpu_nodes = gpu_stage_nodes(self.nodes)
        has_gpu = bool(gpu_nodes) or any(n.device != "cpu" for n in self.nodes)
        if has_gpu:  # no GPU is the first thing to say, before readers scan their folders
            check_device(device_id, self.nodes)
        self.cpus = pipeline_cpus(self.options.cpu_affinity, device_id or 0) if has_gpu else None
        self.pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="headrace-cpu", initializer=keep_thread_on,
                                       initargs=(self.cpus,))
        # Readers read in the thread that runs the CPU stage, as DALI's read in their loader's thread: a pool's GIL
        # hand-offs around every record's system calls and parsing cost more than reading cached files one by one
        # (benchmarks/HISTORY.md). parallel_reads gives them the pool, for storage whose latency a pool hides.
        reader_pool = self.pool if self.options.parallel_reads else None
        cpu_nodes = [n for n in self.nodes if n.name not in gpu_nodes]
        # a worker process for the CPU stage (executor option cpu_process) starts first, so that it builds its stage
        # while this process builds its own; the GPU stage takes it or closes it
        worker = CpuStageProcess(cpu_nodes, batch_size, self.num_threads, seed, self.options.parallel_reads,
                                 self.options.cpu_process_ahead) \
            if has_gpu and may_run_in_process(cpu_nodes, self.options, batch_size) else None
        with _closed_on_error(worker):
            self.cpu = CpuStage(cpu_nodes, outputs, batch_size, self.num_threads, seed, self.buffers, reader_pool,
                                self.pool)
            for name in gpu_fed_nodes(self.nodes, gpu_nodes):  # readers the GPU stage reads copy rather than map files
                if hasattr(self.cpu.batch_ops.get(name), "feeds_gpu"):
                    self.cpu.batch_ops[name].feeds_gpu = True
            self.cpu.start_workers(workers or WorkerOptions())
            self.cpu.skipping = check_replaceable(self.nodes, self.cpu.batch_ops)
            self.skip_log = SkipLog() if self.cpu.skipping else None
            self.gpu: GpuStage | None = None  # GPU ops and whatever reads their outputs
            if has_gpu:
                self.gpu = GpuStage(self.cpu, self.nodes, gpu_nodes, outputs, device_id, self.options, worker)
            # a CPU pipeline reads batch i+1 while batch i's ops run, unless a source is fed per batch, an op skips
            # failed samples (replacements come from the readers in batch order) or the option turns it off
            # and, with more than one thread, starts batch i+1's ops as threads run out of batch i's samples (only
            # where there are ops besides the readers, and no user code that may count on seeing batches in turn)
            overlap = self.num_threads > 1 and len(self.cpu.steps) > len(self.cpu.batch_ops) \
                and not any(map(user_code, self.nodes))
            self.ahead = ReadAhead(self.cpu, overlap) if self.gpu is None and self.options.lookahead != "off" \
                and not self.cpu.skipping and not self.cpu.fed else None

    def keep_thread_near_gpu(self) -> None:
        """Keep the calling thread (the prefetcher's) where the option cpu_affinity puts the GPU stage's threads."""
        keep_thread_on(self.cpus)

    @property
    def batch_ops(self) -> dict:
        """The readers and external sources, by node name."""
        return self.cpu.batch_ops

    @property
    def batches_per_run(self) -> int:
        """How many batches the GPU stage computes together (executor option coalesce_batches); 1 without one."""
        return self.gpu.group if self.gpu is not None else 1

    @property
    def record_states(self) -> bool:
        return self.cpu.record_states

    @record_states.setter
    def record_states(self, value: bool) -> None:
        self.cpu.record_states = value

    def run(self, iteration: int) -> tuple[list, list[str]]:
        """Compute batch `iteration`: the outputs, and the source of every sample (for error messages)."""
        if self.gpu is not None:
            values, sources, collectors = self.gpu.run(iteration)
        elif self.ahead is not None:
            values, sources, collectors, _ = self.ahead.run(iteration)
        else:
            values, sources, collectors, _ = self.cpu.run(iteration)
        if self.skip_log is not None:
            self.skip_log.add(iteration, values)
        return self._gather(values, sources, collectors), sources

    @property
    def skipped(self) -> Skipped:
        """The samples skipped so far (on_error="skip"), and the batches' fill slots."""
        return self.skip_log.snapshot() if self.skip_log is not None else Skipped()

    def _gather(self, values, sources, collectors) -> list:
        batches = []
        for out in self.outputs:
            key = (out.op.name, out.index)
            collector = collectors.get(key)
            layout = output_layout(out)
            if isinstance(values.get(key), TensorListGPU):
                batches.append(values[key].with_metadata(layout, sources))
            elif collector is not None and not collector.ragged and collector.buffer is not None:
                batches.append(TensorListCPU(collector.buffer, layout, sources))
            else:
                batches.append(TensorListCPU(values[key], layout, sources))
        return batches

    def states(self) -> dict[str, tuple[str, dict]]:
        """The state of every stateful batch op: node name -> (op, state)."""
        return {name: (self.cpu.batch_op_kinds[name], op.get_state()) for name, op in self.cpu.batch_ops.items()}

    def take_states_after(self, iteration: int) -> dict[str, tuple[str, dict]]:
        """The stateful ops' state right after they made batch `iteration` (recorded when record_states is on)."""
        return self.cpu.states_after.pop(iteration, {})

    def set_states(self, states: dict[str, dict]) -> None:
        for name, op in self.cpu.batch_ops.items():
            op.set_state(states[name])

    def readers(self) -> dict:
        """The readers (batch ops with metadata), by node name."""
        return {k: v for k, v in self.cpu.batch_ops.items() if hasattr(v, "meta")}

    def reader(self, name: str | None):
        readers = self.readers()
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
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None
        if self.gpu is not None:
            self.gpu.close()
            self.gpu = None  # now, in this thread: the CUDA stream and memory pool go with it
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.cpu.close()
        self.buffers.release()


def output_layout(out: DataNode) -> str:
    """The layout a returned batch carries, as DALI's `layout()`: the output's known layout (its spec, or the op's
    `output_layout`), '' when none is known."""
    spec_layout = out.spec.layout
    if spec_layout:
        return spec_layout
    return (out.op.arg("output_layout") or "") if "output_layout" in out.op.schema.all_args else ""
