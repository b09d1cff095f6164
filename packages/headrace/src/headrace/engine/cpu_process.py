"""A GPU pipeline's readers and CPU ops in a process of their own (executor option `cpu_process`), so that their
Python does not hold the interpreter lock the GPU stage's threads need: the same CpuStage, built from the same
nodes in a worker (`cpu_worker`), computes the batches; their arrays come back in shared memory (`column_wire`).

The worker builds its stage when the pipeline is built; its readers are the ones that advance: they start from
the pipeline's readers' state when the first batch is asked for (a restored checkpoint's), and the state after
every batch comes back with it when checkpointing. A worker that cannot start leaves the stage in the pipeline's
process, with a warning."""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from collections import Counter, deque

import numpy as np

from headrace.engine.column_wire import BlockReader, remove_blocks, unpack_column
from headrace.engine.cpu_stage import CpuStage, user_code
from headrace.engine.options import ExecutorOptions
from headrace.graph import OpNode
from headrace_kernels.interpreter_process import start_interpreter, stop_interpreter
from headrace_kernels.worker_pool import WorkerError

_START = "from headrace.engine.cpu_worker import main; main()"


def _nodes_allow(cpu_nodes: list[OpNode]) -> bool:
    """The rules a CPU stage's nodes must meet to go to a worker: an interpreter to start (an embedding one, as
    Triton's stub, may not name one); readers only as sources (no fed or parallel external sources), each reading
    into host memory (a reader with device "gpu" puts its samples in this process's device memory); no user code
    (it may keep state in this process)."""
    sources = [n for n in cpu_nodes if n.schema.batch_op]
    return bool(sys.executable) and bool(sources) \
        and all(n.schema.name.startswith("readers.") and n.device == "cpu" for n in sources) \
        and not any(map(user_code, cpu_nodes))


def runs_in_process(cpu: CpuStage) -> bool:
    """Whether a built CPU stage can move to a worker: its nodes allow it (`_nodes_allow`), its readers have
    metadata, nothing is skipped (replacements come from the readers in batch order, beside the GPU steps), and no
    CPU op output is returned (those are collected into this process's buffers)."""
    ops = [op for kind, step in cpu.steps if kind == "samples" for op in step]
    nodes = [step for kind, step in cpu.steps if kind == "batch"] + [op.node for op in ops]
    return _nodes_allow(nodes) and not cpu.skipping and not cpu.fed \
        and all(hasattr(op, "meta") for op in cpu.batch_ops.values()) \
        and not any((op.node.name, k) in cpu.wanted for op in ops for k in range(op.num_outputs))


def may_run_in_process(cpu_nodes: list[OpNode], options: ExecutorOptions, batch_size: int) -> bool:
    """Whether the CPU stage of `cpu_nodes` may go to a worker, before it is built (`runs_in_process` decides
    then): the option asks for it, or leaves it to the GPU stage and batches this small coalesce; the nodes allow
    it."""
    return options.runs_cpu_process(options.coalesced(batch_size) > 1) and _nodes_allow(cpu_nodes)


class CpuStageProcess:
    """`run` and `run_group` of a CpuStage, computed in a worker process."""

    def __init__(self, nodes: list[OpNode], batch_size: int, num_threads: int, seed: int, parallel_reads: bool,
                 ahead: int = 1):
        """Start the worker and have it build the CPU stage of `nodes` at once: before the pipeline's own stage is
        built, so the two build side by side (a COCO reader parses its annotations in each). `bind` gives it the
        stage it stands for; `close` it if none comes. `ahead`: the runs asked for beyond the one being answered
        (executor option cpu_process_ahead)."""
        self.cpu: CpuStage | None = None
        self._owner = os.getpid()  # a forked copy of this process must not stop the worker
        self._home = False  # the worker could not start: the stage runs in this process
        self._lock = threading.Lock()
        self._started = False
        self._keys: list = []
        self.ahead = ahead
        self._asked: deque[tuple] = deque()  # the requests sent whose answers are still to come, in order
        self._last_end: float | None = None  # when the worker ended its last answer (its idle time between runs)
        self._freed: deque[int] = deque()  # blocks whose last view went (any thread): handed back with the next ask
        self._blocks = BlockReader(self._freed.append)
        self.timings: Counter = Counter()  # seconds waiting for the worker's answers, their parts, unpacking them
        self._process, self._requests, self._replies = start_interpreter(_START)
        setup = {"nodes": nodes, "batch_size": batch_size, "num_threads": num_threads, "seed": seed,
                 "parallel_reads": parallel_reads}
        try:
            self._requests.send(("setup", setup))
        except OSError:
            pass  # the worker is gone already: the first ask finds it so and leaves the stage at home

    def bind(self, cpu: CpuStage, keys: set) -> CpuStageProcess:
        """Stand for `cpu` (the pipeline's own stage of the same nodes), sending back the values of `keys` only (what
        the GPU stage reads, and the outputs)."""
        self.cpu, self._keys = cpu, sorted(keys)
        return self

    @property
    def pid(self) -> int | None:
        """The worker's process id (None once closed, or where the stage runs in this process)."""
        process = self._process
        return process.pid if process is not None else None

    def _died(self) -> WorkerError:
        process = self._process
        if process is None:
            return WorkerError("the CPU stage's worker process was stopped (the pipeline is closed)")
        code = process.poll()
        return WorkerError(f"the CPU stage's worker process (pid {process.pid}) ended"
                           + (f" with exit code {code}" if code is not None else ""))

    def _ask(self, first: int, count: int, merge: bool) -> tuple | None:
        """The worker's answer for these batches, or None where the worker could not start (then the stage runs in
        this process: no batch was computed there yet, so the readers here stand where they should). The next
        `ahead` runs are asked for as soon as this one is answered, so the worker computes them while this process
        uses this one; if a different run is asked for next, their answers are dropped (its readers moved on, as a
        read ahead of the stage at home does)."""
        request = (first, count, merge, self.cpu.record_states)
        with self._lock:
            first_request = not self._started
            asked = self._asked
            try:
                if first_request:  # now, not at build: a checkpoint is restored into the readers in between
                    states = {name: op.get_state() for name, op in self.cpu.batch_ops.items()}
                    attributes = {name: {"feeds_gpu": op.feeds_gpu} for name, op in self.cpu.batch_ops.items()
                                  if hasattr(op, "feeds_gpu")}
                    self._requests.send(("start", states, attributes, self._keys))
                    self._started = True
                if asked and asked[0] != request:
                    while asked:
                        asked.popleft()
                        self._drop(self._replies.recv())
                if not asked:
                    self._send(request)
                    asked.append(request)
                waited = time.perf_counter()
                reply = self._replies.recv()
                asked.popleft()
                self.timings["waiting for the worker's answer"] += time.perf_counter() - waited
                if reply[0] == "ok":  # (its compute, from its answer to here: the pipe, the GIL, unpickling)
                    self._time_answer(reply[6], reply[7])
            except (EOFError, OSError):  # BrokenPipeError among them
                if first_request:
                    return self._go_home(self._died())
                raise self._died() from None
            if first_request and reply[0] == "setup-error":
                return self._go_home(reply[1])
            try:
                while len(asked) < self.ahead:
                    last = asked[-1] if asked else request
                    following = (last[0] + count, count, merge, request[3])
                    self._send(following)
                    asked.append(following)
            except OSError:
                pass  # the worker is gone: the next ask says so
            return reply

    def _time_answer(self, started: float, ended: float) -> None:
        """Add an answer's times (the worker's time.monotonic(), the clock this process reads too) to `timings`."""
        self.timings["the worker's compute"] += ended - started
        self.timings["from its answer to here"] += time.monotonic() - ended
        if self._last_end is not None and started > self._last_end:
            self.timings["the worker idle between answers"] += started - self._last_end
        self._last_end = ended

    def _go_home(self, reason: BaseException) -> None:
        """The worker could not start: say so, stop it, and compute the CPU stage in this process from now on."""
        warnings.warn(f"headrace: the CPU stage's worker process could not start ({reason}); the CPU stage runs in "
                      f"the pipeline's process (executor option cpu_process)", RuntimeWarning, stacklevel=4)
        self._home = True
        self.close()

    def _send(self, request: tuple) -> None:
        freed = [self._freed.popleft() for _ in range(len(self._freed))]
        if freed:
            self._requests.send(("free", freed))
        self._requests.send(("group", *request))

    def _drop(self, reply: tuple) -> None:
        """An answer nobody asked for: its block goes back."""
        if reply[0] == "ok":
            self._blocks.drop(reply[5])
            if reply[4] is not None:
                self._freed.append(reply[4][0])

    def run_group(self, first: int, count: int, merge: bool) -> tuple[dict | None, list]:
        """As CpuStage.run_group."""
        reply = None if self._home else self._ask(first, count, merge)
        if reply is None:
            return self.cpu.run_group(first, count, merge)
        if reply[0] == "error":
            raise reply[1]
        unpacking = time.perf_counter()
        try:
            return self._unpack(reply)
        finally:
            self.timings["unpacking its answer"] += time.perf_counter() - unpacking
            self.timings["blocks mapped"] = len(self._blocks.maps)

    def _unpack(self, reply: tuple) -> tuple[dict | None, list]:
        """The run's values from the worker's "ok" answer, as views of its shared block."""
        _, merged_records, member_records, states, where, dropped = reply[:6]
        self._blocks.drop(dropped)
        block = self._blocks.batch(*where) if where is not None else np.zeros(0, np.uint8)
        self.cpu.states_after.update(states)
        if merged_records is not None:
            merged = {key: unpack_column(record, block) for key, record in merged_records.items()}
            members, start = [], 0
            for _, sources, size in member_records:
                members.append(({key: column[start:start + size] for key, column in merged.items()}, sources, {},
                                size))
                start += size
            return merged, members
        members = []
        for record in member_records:
            if record[0] == "error":
                members.append(record[1])
                continue
            _, values, sources, size = record
            members.append(({key: unpack_column(r, block) for key, r in values.items()}, sources, {}, size))
        return None, members

    def run(self, iteration: int) -> tuple[dict, list[str], dict, int]:
        """As CpuStage.run."""
        member = self.run_group(iteration, 1, False)[1][0]
        if isinstance(member, BaseException):
            raise member
        return member

    def close(self) -> None:
        """Stop the worker (asked first, then killed), and remove any block it wrote that nobody took."""
        process = getattr(self, "_process", None)
        if process is None:
            return
        self._process = None
        if os.getpid() != self._owner:  # a fork of the pipeline's process: the worker is not this copy's to stop
            return
        if not self._started:  # never asked for a batch (maybe still building its stage): nothing to finish
            process.kill()
        stop_interpreter(process, self._requests, self._replies)
        remove_blocks(process.pid)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
