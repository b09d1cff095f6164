"""`Pipeline` and `pipeline_def`: define a graph, build it, run it batch by batch, save it to a pipeline file."""

from __future__ import annotations

import atexit
import difflib
import functools
import os
import queue
import random
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from headrace import checkpoint as checkpoints
from headrace import pipeline_file
from headrace.batch import TensorListCPU
from headrace.engine.executor import Executor
from headrace.engine.options import ExecutorOptions
from headrace.engine.workers import WorkerOptions
from headrace.enums import to_numpy_dtype
from headrace.errors import SchemaError
from headrace.graph import DataNode, Graph, as_node, building

_CPU_ONLY_DEVICE_ID = -99999
_PIPELINE_ARGS = ("batch_size", "num_threads", "device_id", "seed", "exec_pipelined", "prefetch_queue_depth",
                  "exec_async", "bytes_per_sample", "set_affinity", "max_streams", "default_cuda_stream_priority",
                  "enable_checkpointing", "enable_conditionals", "checkpoint", "executor_options")
_DALI_ONLY = ("exec_dynamic", "experimental_exec_dynamic", "py_num_workers", "py_start_method", "py_callback_pickler",
              "enable_memory_stats", "output_dtype", "output_ndim", "output_layout", "stream_policy", "concurrency")
_CURRENT = threading.local()  # the pipelines being defined in this thread, innermost last (Pipeline.current)


def _current_stack() -> list:
    if not hasattr(_CURRENT, "stack"):
        _CURRENT.stack = []
    return _CURRENT.stack


class Pipeline:
    """A graph plus its executor, as DALI's Pipeline: `with pipe:` defines it, `run()` returns batches."""

    def __init__(self, batch_size: int = -1, num_threads: int = -1, device_id: int | None = 0, seed: int = -1,
                 exec_pipelined: bool = True, prefetch_queue_depth: int | dict = 2, exec_async: bool = True,
                 bytes_per_sample: int = 0, set_affinity: bool = False, max_streams: int | None = -1,
                 default_cuda_stream_priority: int | None = 0, *, enable_checkpointing: bool = False,
                 enable_conditionals: bool = False, checkpoint: dict | str | os.PathLike | None = None,
                 executor_options: ExecutorOptions | dict | None = None, **dali_options: Any):
        """DALI's arguments, in DALI's positional order (`Pipeline(batch_size, num_threads, device_id, seed,
        exec_pipelined, prefetch_queue_depth, ...)`); the executor options among them are accepted and reported
        back, and `executor_options` sets headrace's own."""
        unknown = set(dali_options) - set(_DALI_ONLY)
        if unknown:
            close = difflib.get_close_matches(sorted(unknown)[0], [*_PIPELINE_ARGS, *_DALI_ONLY], n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise SchemaError(f"Pipeline: unknown arguments {sorted(unknown)}.{hint}")
        self.py_num_workers = int(dali_options.get("py_num_workers", 1))
        self.py_start_method = str(dali_options.get("py_start_method", "fork"))
        if self.py_num_workers < 1 or self.py_start_method not in ("fork", "spawn", "forkserver"):
            raise SchemaError(f"Pipeline: py_num_workers must be >= 1 and py_start_method 'fork', 'spawn' or "
                              f"'forkserver', got {self.py_num_workers} and {self.py_start_method!r}")
        # DALI's executor options, reported back as given (DALI's defaults otherwise); headrace runs its own executor
        self.exec_pipelined, self.exec_async, self.set_affinity = exec_pipelined, exec_async, set_affinity
        self.max_streams = -1 if max_streams is None else max_streams
        self.default_cuda_stream_priority = default_cuda_stream_priority or 0
        self.exec_dynamic = dali_options.get("exec_dynamic", True)
        self.enable_memory_stats = dali_options.get("enable_memory_stats", False)
        self._expected_dtypes = dali_options.get("output_dtype")
        self._expected_ndims = dali_options.get("output_ndim")
        self._expected_layouts = dali_options.get("output_layout")
        self._queue_sizes = dict(prefetch_queue_depth) if isinstance(prefetch_queue_depth, dict) else None
        if isinstance(prefetch_queue_depth, dict):  # DALI's {"cpu_size": .., "gpu_size": ..}
            prefetch_queue_depth = max(prefetch_queue_depth.values())
        self.batch_size = batch_size
        self.num_threads = num_threads if num_threads > 0 else min(4, os.cpu_count() or 1)
        self.device_id = None if device_id == _CPU_ONLY_DEVICE_ID else device_id  # DALI's types.CPU_ONLY_DEVICE_ID
        self.seed = seed if seed != -1 else random.getrandbits(31)
        self._seed_given = seed != -1
        self.prefetch_queue_depth = max(1, int(prefetch_queue_depth))
        self.enable_checkpointing = enable_checkpointing
        self.enable_conditionals = enable_conditionals
        self.executor_options = ExecutorOptions.of(executor_options)  # how it runs, not what: not in the file
        self.graph = Graph()
        self.outputs: list[DataNode] = OutputNodes([], self)
        self._executor: Executor | None = None
        self._prefetcher: _Prefetcher | None = None
        self._iteration = 0
        self._context: building | None = None
        # checkpointing: the state of the stateful ops after the last batch the user consumed
        self._pending_checkpoint = checkpoint
        self._consumed_states: dict[str, tuple[str, dict]] | None = None
        self._fingerprint: str | None = None
        self.is_restored_from_checkpoint = False
        self._ran = False
        self.restored_iterator_data: Any = None

    # Definition
    def __enter__(self) -> Pipeline:
        self._context = building(self.graph)
        self._context.__enter__()
        Pipeline.push_current(self)
        return self

    def __exit__(self, *exc) -> None:
        Pipeline.pop_current()
        self._context.__exit__(*exc)

    @staticmethod
    def current() -> Pipeline | None:
        """The pipeline being defined in this thread (inside `with pipe:`, a @pipeline_def function or
        define_graph), as DALI's; None outside a definition."""
        stack = _current_stack()
        return stack[-1] if stack else None

    @staticmethod
    def push_current(pipeline: Pipeline) -> None:
        """Make `pipeline` the current one (DALI's), until the matching `pop_current`."""
        _current_stack().append(pipeline)

    @staticmethod
    def pop_current() -> Pipeline | None:
        """Restore the pipeline that was current before the last `push_current`."""
        stack = _current_stack()
        return stack.pop() if stack else None

    def define_graph(self) -> Any:
        """DALI's legacy definition: a subclass returns its outputs from here; `build()` calls it once."""
        raise NotImplementedError

    def _defines_graph(self) -> bool:
        return type(self).define_graph is not Pipeline.define_graph

    def set_outputs(self, *outputs: DataNode) -> None:
        with building(self.graph):  # numbers and constants become nodes of this pipeline, as in DALI
            outputs = tuple(as_node(out) for out in outputs)
        for i, out in enumerate(outputs):
            if hasattr(out, "undefined_message"):
                raise SchemaError(f"pipeline output {i}: {out.undefined_message}")
            if not isinstance(out, DataNode):
                raise SchemaError(f"pipeline output {i} is a {type(out).__name__}, not a DataNode")
            if out.op.guard is not None:
                raise SchemaError(f"pipeline output {i} ({out.name}) is computed inside a branch of an `if` on "
                                  "data; assign it in both branches so that it is merged after the `if`")
        self.outputs = OutputNodes(outputs, self)

    @property
    def max_batch_size(self) -> int:
        """DALI's name of the batch size (the most samples a batch holds)."""
        return self.batch_size

    @property
    def num_outputs(self) -> int:
        """How many outputs the pipeline returns (once defined)."""
        return len(self.outputs)

    def output_dtype(self) -> list:
        """The element type each output was declared to have (the `output_dtype` argument), None where none was:
        DALI's. `run` checks the outputs against it."""
        return self._expected("output_dtype", self._expected_dtypes)

    def output_ndim(self) -> list:
        """The number of dimensions each output was declared to have (`output_ndim`), None where none was."""
        return self._expected("output_ndim", self._expected_ndims)

    def _expected(self, what: str, declared) -> list:
        if not isinstance(declared, list | tuple):
            return [declared] * len(self.outputs)
        if len(declared) != len(self.outputs):
            raise SchemaError(f"Pipeline: {what} lists {len(declared)} values for {len(self.outputs)} outputs")
        return list(declared)

    def _check_outputs(self, outputs: Sequence) -> None:
        """Each output against its declared element type, number of dimensions and layout (DALI's output_dtype,
        output_ndim and output_layout), as DALI checks them after every run."""
        if self._expected_dtypes is None and self._expected_ndims is None and self._expected_layouts is None:
            return
        layouts = self._expected("output_layout", self._expected_layouts)
        for i, (batch, dtype, ndim, layout) in enumerate(zip(outputs, self.output_dtype(), self.output_ndim(),
                                                              layouts, strict=True)):
            if layout and batch.layout() != layout:
                raise SchemaError(f"pipeline output {i} has layout {batch.layout()!r}, the pipeline declares "
                                  f"{layout!r} (output_layout)")
            if not len(batch):
                continue
            if dtype is not None and batch.dtype != to_numpy_dtype(dtype):
                raise SchemaError(f"pipeline output {i} has element type {batch.dtype}, the pipeline declares "
                                  f"{to_numpy_dtype(dtype)} (output_dtype)")
            got = batch.ndim()
            if ndim is not None and got != ndim:
                raise SchemaError(f"pipeline output {i} has {got} dimensions, the pipeline declares {ndim} "
                                  "(output_ndim)")

    @property
    def exec_separated(self) -> bool:
        """Whether separate CPU and GPU queue depths were given (DALI's prefetch_queue_depth dict)."""
        return self._queue_sizes is not None

    @property
    def cpu_queue_size(self) -> int:
        return int(self._queue_sizes["cpu_size"]) if self._queue_sizes else self.prefetch_queue_depth

    @property
    def gpu_queue_size(self) -> int:
        return int(self._queue_sizes["gpu_size"]) if self._queue_sizes else self.prefetch_queue_depth

    def save_graph_to_dot_file(self, filename: str | os.PathLike, *, show_tensors: bool = False,
                               show_ids: bool | None = None, use_colors: bool = False) -> None:
        """Write the graph as Graphviz DOT text (DALI's): an edge from each op to every op reading its outputs;
        `show_tensors` adds a box per output, `use_colors` colours the ops by device (`show_ids`: accepted, no effect,
        as in DALI)."""
        from headrace.graph_dot import dot_text

        self.build()
        Path(filename).write_text(dot_text(self._executor.nodes, show_tensors, use_colors))

    def start_py_workers(self) -> None:
        """Start the worker processes of the parallel external sources now (DALI's: before anything makes a CUDA
        context, when they are forked); headrace starts them when it builds, before its GPU stage."""
        self.build()

    @property
    def params(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "num_threads": self.num_threads, "device_id": self.device_id,
                "seed": self.seed, "prefetch_queue_depth": self.prefetch_queue_depth,
                "enable_checkpointing": self.enable_checkpointing, "enable_conditionals": self.enable_conditionals}

    # Building and running
    def build(self) -> None:
        if self._executor is not None:
            return
        if not self.outputs and self._defines_graph():
            with self:
                outputs = self.define_graph()
            self.set_outputs(*(outputs if isinstance(outputs, tuple | list) else (outputs,)))
        if not self.outputs:
            raise SchemaError("the pipeline has no outputs: return them from the @pipeline_def function or call "
                              "set_outputs()")
        if self.batch_size < 1:
            raise SchemaError(f"batch_size must be set to a positive number, got {self.batch_size}")
        pending, self._pending_checkpoint = self._pending_checkpoint, None
        if pending is not None:
            pending = checkpoints.read(pending)
            if not self._seed_given:  # a pipeline left to pick its seed takes the checkpoint's
                self.seed = pending["seed"]
        self._executor = Executor(self.graph.nodes, self.outputs, self.batch_size, self.num_threads, self.seed,
                                  self.device_id, self.prefetch_queue_depth, self.executor_options,
                                  workers=WorkerOptions(self.py_num_workers, self.py_start_method))
        _LIVE.add(self)
        # registered (again) after the executor imported its libraries (CuPy registers exit handlers of its own):
        # exit handlers run last-registered first, so the pipelines close while those libraries still work
        atexit.unregister(_close_live_pipelines)
        atexit.register(_close_live_pipelines)
        self._executor.record_states = self.enable_checkpointing
        self._consumed_states = self._executor.states()
        if pending is not None:
            self.restore(pending)

    def warm_up(self, **inputs) -> list[str]:
        """Build, and do now what the first batch would otherwise wait for: the GPU decoders are created and decode a
        warm-up batch, and one batch is run on `inputs` (for the external sources, as in `run`) and forgotten, which
        loads the kernels and compiled loops too. Without `inputs`, fed sources that only decoders read get the
        pipeline's own sample (a tiny JPEG each). The next batch is still batch 0, with the same outputs as without
        the warm-up. A served model calls this when it loads, so that its first request is not slow. Returns the
        names of the inputs it ran a batch on."""
        self.build()
        if self._executor.gpu is not None:
            self._executor.gpu.warm_up()
        inputs = inputs or self._sample_inputs()
        if not inputs:
            return []
        saved = self._iteration, self._consumed_states, self._ran
        try:
            for out in self._run(**inputs):
                getattr(out, "synchronize", lambda: None)()
        finally:
            self.clear_fed_inputs()
            self._iteration, self._consumed_states, self._ran = saved
        return sorted(inputs)

    def _sample_inputs(self) -> dict[str, list]:
        """One tiny JPEG for each fed source, where every fed source is read by decoders only; else nothing."""
        fed = [name for name in self.fed_inputs if name in self._executor.batch_ops]
        readers = {name: [n for n in self._executor.nodes if any(d.op.name == name for d in n.upstream)]
                   for name in fed}
        if not fed or not all(nodes and all(n.schema.family == "decoders" for n in nodes)
                              for nodes in readers.values()):
            return {}
        from headrace_kernels.cpu.decode import tiny_jpeg

        return {name: [tiny_jpeg()] for name in fed}

    @property
    def gpu_timings(self) -> dict[str, float]:
        """Host seconds spent so far in each part of the GPU stage (empty for a CPU pipeline or before build)."""
        gpu = self._executor.gpu if self._executor is not None else None
        return dict(gpu.timings) if gpu is not None else {}

    @property
    def skipped(self) -> list:
        """The samples dropped by on_error="skip" since the pipeline was built (or restored), oldest first: records
        (batch, sample, file, op, message); `.fills` maps a batch to its slots holding fills (repeats that keep an
        epoch's length, at its end). Batches computed ahead count as soon as they are computed."""
        from headrace.engine.skips import Skipped

        return self._executor.skipped if self._executor is not None else Skipped()

    def last_fill_slots(self) -> list[int]:
        """The slots of the batch `run()` returned last that hold fills (on_error="skip"): an iterator with the
        PARTIAL policy leaves them out, so that an epoch holds every good sample once."""
        if self._executor is None or self._iteration == 0:
            return []
        return list(self._executor.skipped.fills.get(self._iteration - 1, []))

    @property
    def fed_inputs(self) -> list[str]:
        """Names of the external sources with no `source`: they take data from `run(name=...)`."""
        return [n.name for n in self.graph.nodes if n.schema.name == "external_source" and n.arg("source") is None]

    def feed_input(self, name: str | DataNode | None = None, data=None, layout: str | None = None,
                   data_node: str | DataNode | None = None, **dali_options: Any) -> None:
        """Queue a batch for the external source `name` (or its DataNode, as DALI's legacy `iter_setup` passes; DALI
        calls the argument `data_node`). `layout` and DALI's copy options are accepted; the layout is the source's
        own."""
        if data_node is not None:
            if name is not None:
                raise SchemaError("feed_input: give the external source as `name` or as `data_node`, not both")
            name = data_node
        if name is None:
            raise SchemaError("feed_input: name the external source to feed")
        if isinstance(name, DataNode):
            name = name.op.name
        self.build()
        if name not in self.fed_inputs:
            raise SchemaError(f"no external_source named '{name}' (fed inputs: {', '.join(self.fed_inputs)})")
        if name in self._executor.batch_ops:  # an input no output depends on is pruned: its data is not needed
            self._executor.batch_ops[name].feed(data)

    def clear_fed_inputs(self) -> None:
        """Drop batches fed but not consumed (after a failed run), so the next run starts clean."""
        if self._executor is not None:
            for op in self._executor.batch_ops.values():
                if getattr(op, "needs_feed", False):
                    op.fed.clear()

    def iter_setup(self) -> None:
        """DALI's legacy hook, called before every `run()`: a subclass feeds its external sources here."""

    def run(self, **inputs) -> tuple[TensorListCPU, ...]:
        """The next batch of every output. Keyword arguments feed external sources by name for this batch."""
        self.build()
        self.iter_setup()
        return self._run(**inputs)

    def _run(self, **inputs) -> tuple[TensorListCPU, ...]:
        self.build()
        self._ran = True
        for name, data in inputs.items():
            self.feed_input(name, data)
        if self.fed_inputs:
            outputs, _ = self._executor.run(self._iteration)
            if self.enable_checkpointing:
                self._consumed_states = {**self._consumed_states, **self._executor.take_states_after(self._iteration)}
            self._iteration += 1
            self._check_outputs(outputs)
            return tuple(outputs)
        if self._prefetcher is None:
            # a coalesced run's batches come out together: room for them all, so that the next run starts while
            # this one's are taken (they are in memory together anyway)
            depth = self.prefetch_queue_depth + self._executor.batches_per_run - 1
            self._prefetcher = _Prefetcher(self._executor, self._iteration, depth, self.enable_checkpointing,
                                           self.executor_options.prefetch_beyond_queue)
        outputs, states, error = self._prefetcher.next()
        # a failed batch is consumed too (its readers moved on, the prefetcher computes the next one): count it, so
        # that the iteration counter and a checkpoint stay aligned with the readers after the user continues
        self._iteration += 1
        if states:
            self._consumed_states = {**self._consumed_states, **states}
        if error is not None:
            try:
                raise error
            finally:  # no cycle through this frame: the failed batch goes as soon as the caller drops the error
                error = None
        self._check_outputs(outputs)
        return tuple(outputs)

    def schedule_run(self) -> None:
        """DALI compatibility: batches are always computed ahead; this only builds the pipeline."""
        self.build()

    def outputs_ready(self) -> tuple[TensorListCPU, ...]:
        return self.run()

    share_outputs = outputs_ready

    def release_outputs(self) -> None:
        """DALI compatibility: buffers are reused when the user drops them."""

    def reset(self) -> None:
        """Start over after an external source ended an epoch with StopIteration."""
        self._stop_prefetch()

    def release_memory(self) -> None:
        """Drop pooled batch buffers and return the GPU stage's unused device memory to the device."""
        if self._executor is not None:
            self._executor.release_memory()

    def _stop_prefetch(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.stop()
            self._prefetcher = None

    def close(self) -> None:
        self._stop_prefetch()
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # Readers
    def reader_meta(self, name: str | None = None) -> dict[str, Any]:
        """The reader `name`'s metadata (epoch_size, epoch_size_padded, number_of_shards, shard_id, ...); with no
        name, every reader's, by reader name, as DALI's."""
        self.build()
        if name is None:
            return {reader: op.meta() for reader, op in self._executor.readers().items()}
        return self._executor.reader(name).meta()

    def epoch_size(self, name: str | None = None) -> int | dict[str, int]:
        """The number of samples in an epoch of the reader `name`; with no name, every reader's, by reader name,
        as DALI's."""
        if name is None:
            return {reader: meta["epoch_size"] for reader, meta in self.reader_meta().items()}
        return self.reader_meta(name)["epoch_size"]

    # Checkpoints
    def checkpoint(self, path: str | os.PathLike | None = None, iterator_data: Any = None,
                   filename: str | os.PathLike | None = None) -> dict:
        """The pipeline's state after the last batch consumed (prefetched batches do not count), as a small
        JSON-able dict; also written to `path` (atomically) when given (DALI names it `filename`; DALI returns the
        checkpoint serialized, headrace as a dict, which `checkpoint=` takes as DALI's takes its bytes).
        `iterator_data`: what an iterator stores of itself alongside (headrace-torch's iterators do)."""
        if filename is not None:
            if path is not None:
                raise checkpoints.CheckpointError("checkpoint: give `path` or DALI's `filename`, not both")
            path = filename
        if not self.enable_checkpointing:
            raise checkpoints.CheckpointError("checkpointing is off for this pipeline: create it with "
                                              "enable_checkpointing=True")
        self.build()
        self._check_checkpoint_rules()
        state = checkpoints.make(self._graph_fingerprint(), self.seed, self._iteration, self._consumed_states,
                                 iterator_data)
        if path is not None:
            checkpoints.write(state, path)
        return state

    def restore(self, checkpoint: dict | str | os.PathLike) -> None:
        """Continue from `checkpoint` (a dict, its JSON or a file): the next batch is the one that followed the
        checkpoint. Batches computed ahead are dropped and recomputed. A checkpoint of another pipeline, or made
        with another seed than this pipeline's explicit one, is refused."""
        state = checkpoints.read(checkpoint)
        if not self.enable_checkpointing:
            raise checkpoints.CheckpointError("restoring a checkpoint needs enable_checkpointing=True")
        self._check_checkpoint_rules()
        if state["seed"] != self.seed:
            if self._seed_given:
                raise checkpoints.CheckpointError(
                    f"the checkpoint was made with seed {state['seed']}, this pipeline has seed {self.seed}: its "
                    f"random ops would differ. Create it with seed={state['seed']} or leave the seed unset.")
            self.seed = state["seed"]
            self.close()  # node seeds change: a new executor
        if self._ran:  # a fresh executor: nothing computed ahead (prefetched batches, a look-ahead stage) survives
            self.close()
        self.build()
        stateful = {name: kind for name, (kind, _) in self._executor.states().items()}
        checkpoints.check_matches(state, self._graph_fingerprint(), stateful)
        if set(state["nodes"]) != set(stateful):
            raise checkpoints.CheckpointError(f"the checkpoint holds the nodes {sorted(state['nodes'])}, this "
                                              f"pipeline's stateful nodes are {sorted(stateful)}")
        try:
            self._executor.set_states({name: entry["state"] for name, entry in state["nodes"].items()})
        except (KeyError, TypeError, ValueError) as exc:
            raise checkpoints.CheckpointError(f"the checkpoint's node state is malformed: {exc!r}") from None
        self._iteration = state["iteration"]
        self._consumed_states = self._executor.states()
        self._ran = False
        self.restored_iterator_data = state.get("iterator")
        self.is_restored_from_checkpoint = True

    def _graph_fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = checkpoints.fingerprint(
                pipeline_file.graph_to_dict(self.params, self.graph.nodes, self.outputs, for_file=False))
        return self._fingerprint

    def _check_checkpoint_rules(self) -> None:
        for node in self.graph.nodes:
            if node.schema.state is None:
                raise checkpoints.CheckpointError(
                    f"{node.schema.name} (node '{node.name}') declares no checkpoint rule (OpSchema.state), so a "
                    "pipeline using it cannot be checkpointed")

    # The pipeline file
    def serialize(self, define_graph: Callable | str | os.PathLike | None = None,
                  filename: str | os.PathLike | None = None) -> PipelineBytes:
        """The pipeline file (UTF-8 JSON bytes, as DALI's serialize returns bytes); also written to `filename` when
        given. The first argument is DALI's deprecated `define_graph`, or the file name (headrace's older form)."""
        if isinstance(define_graph, str | os.PathLike):
            define_graph, filename = None, define_graph
        if define_graph is not None:
            if self.outputs:
                raise SchemaError("serialize(define_graph): this pipeline's outputs are set already")
            with self:
                outputs = define_graph()
            self.set_outputs(*(outputs if isinstance(outputs, tuple | list) else (outputs,)))
        elif not self.outputs and self._defines_graph():
            self.build()
        data = PipelineBytes(
            pipeline_file.dumps(pipeline_file.graph_to_dict(self.params, self.graph.nodes, self.outputs)).encode())
        if filename is not None:
            Path(filename).write_bytes(data)
        return data

    @classmethod
    def load(cls, source: str | os.PathLike, allowed_modules: Sequence[str] = (), **overrides: Any) -> Pipeline:
        """A pipeline from a pipeline file (a path, or the text itself). User code it names (python_function's
        function, a user op's module) is imported only from `allowed_modules` (modules or packages). `overrides`
        replace pipeline parameters (batch_size, num_threads, device_id, seed, prefetch_queue_depth) or add
        `checkpoint=` to continue from or `executor_options=` (how it runs; not in the file)."""
        text = source.decode() if isinstance(source, bytes | bytearray) else str(source)
        if not text.lstrip().startswith("{"):
            text = pipeline_file.read_file(source)
        params, graph, outputs = pipeline_file.parse(text, allowed_modules)
        pipe = cls(**{**params, **overrides})
        pipe.graph, pipe.outputs = graph, OutputNodes(outputs, pipe)
        return pipe

    @classmethod
    def deserialize(cls, serialized_pipeline: bytes | str | None = None, filename: str | os.PathLike | None = None,
                    **kwargs: Any) -> Pipeline:
        """DALI's: a built pipeline from `serialize()`'s bytes or from `filename` (exactly one); `kwargs` replace
        pipeline parameters."""
        if (serialized_pipeline is None) == (filename is None):
            raise SchemaError("Pipeline.deserialize: give exactly one of serialized_pipeline and filename")
        pipe = cls.load(serialized_pipeline if serialized_pipeline is not None else filename, **kwargs)
        pipe.build()
        return pipe


_PREFETCHERS: weakref.WeakSet[_Prefetcher] = weakref.WeakSet()
_EXIT_GUARD: list[threading.Thread] = []
_EXIT_GUARD_LOCK = threading.Lock()
EXIT_WAIT_S = 30.0
"""How long the interpreter's exit waits for the batches being computed ahead."""


def _watch_at_exit(prefetcher: _Prefetcher) -> None:
    """Have `prefetcher` stopped when the main thread ends. At interpreter exit a daemon thread is frozen wherever it
    stands, inside native code too, which can abort the process ("terminate called without an active exception");
    the interpreter waits for non-daemon threads first, and one such thread (for all pipelines) stops the
    prefetchers and waits for their batches (bounded, so that a source blocked for good cannot hang the exit)."""
    _PREFETCHERS.add(prefetcher)
    with _EXIT_GUARD_LOCK:
        if not any(t.is_alive() for t in _EXIT_GUARD):
            _EXIT_GUARD[:] = [threading.Thread(target=_stop_prefetchers_at_exit, daemon=False,
                                               name="headrace-exit-guard")]
            _EXIT_GUARD[0].start()


def _stop_prefetchers_at_exit() -> None:
    threading.main_thread().join()
    prefetchers = list(_PREFETCHERS)
    for prefetcher in prefetchers:
        prefetcher.stopping.set()
    deadline = time.monotonic() + EXIT_WAIT_S
    for prefetcher in prefetchers:
        prefetcher.thread.join(timeout=max(0.0, deadline - time.monotonic()))


class OutputNodes(list):
    """The pipeline's output DataNodes; calling it is DALI's `pipe.outputs()` (after `schedule_run()`): the next
    batch of every output."""

    def __init__(self, nodes, pipe: Pipeline):
        super().__init__(nodes)
        self._pipe = weakref.ref(pipe)

    def __call__(self) -> tuple[TensorListCPU, ...]:
        pipe = self._pipe()
        if pipe is None:
            raise SchemaError("the pipeline of these outputs is gone")
        return pipe.outputs_ready()


class PipelineBytes(bytes):
    """What `serialize()` returns: the pipeline file's UTF-8 bytes, as DALI's serialize returns bytes. It also
    compares equal to, and searches, the file's text (a str), which headrace's serialize returned before."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.decode() == other
        return bytes.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = bytes.__hash__

    def __contains__(self, item: object) -> bool:
        return bytes.__contains__(self, item.encode() if isinstance(item, str) else item)


class _Prefetcher:
    """Computes batches ahead on its own thread, up to `depth` of them waiting, and one more being computed while
    they wait unless `beyond_queue` is False (executor option prefetch_beyond_queue)."""

    _END = object()

    def __init__(self, executor: Executor, first_iteration: int, depth: int, snapshots: bool, beyond_queue: bool):
        self.executor, self.snapshots = executor, snapshots
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        # a place in the queue, taken before a batch is computed and given back when the consumer takes one
        self.room = None if beyond_queue else threading.Semaphore(depth)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(first_iteration,), daemon=True,
                                       name="headrace-prefetch")
        self.thread.start()
        _watch_at_exit(self)

    def _running(self) -> bool:
        """Whether to go on: not stopped (by `stop()`, or at interpreter exit by `_stop_prefetchers_at_exit`)."""
        return not self.stopping.is_set()

    def _loop(self, iteration: int) -> None:
        try:
            self.executor.keep_thread_near_gpu()
            self._compute(iteration)
        finally:
            self._drain_after_stop()

    def _wait_for_room(self) -> bool:
        """Take a place in the queue before computing (when places are counted); False once stopped."""
        while self._running():
            if self.room is None or self.room.acquire(timeout=0.1):
                return True
        return False

    def _compute(self, iteration: int) -> None:
        while self._wait_for_room():
            outputs, error = None, None
            try:
                outputs = self.executor.run(iteration)[0]
            except StopIteration:
                outputs = self._END
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                error = exc
            # the stateful ops' state right after this batch (failed or not): what a checkpoint saves once it is
            # consumed
            states = self.executor.take_states_after(iteration) if self.snapshots else None
            item: Any = self._END if outputs is self._END else (outputs, states, error)
            ended = item is self._END
            iteration += 1
            while self._running():
                try:
                    self.queue.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            # a failed batch's error must not stay in this frame's locals: its traceback holds this frame (a cycle)
            outputs = error = item = None
            if ended:
                return

    def next(self) -> tuple[list[TensorListCPU] | None, dict | None, BaseException | None]:
        """The next batch's outputs, the stateful ops' state after it, and the error it failed with (or None)."""
        while True:
            try:
                item = self.queue.get(timeout=0.5)
                break
            except queue.Empty:
                if not self.thread.is_alive():
                    raise StopIteration from None
        if self.room is not None:
            self.room.release()
        if item is self._END:
            raise StopIteration
        return item

    def stop(self) -> None:
        self.stopping.set()
        self._drain()  # room in the queue, so a waiting put() returns at once (restore() and close() stop it)
        self.thread.join(timeout=10)

    def _drain_after_stop(self) -> None:
        """Once stopped, drop what the loop's last put() queued: a failed batch's error holds, through its
        traceback, the loop's frames, which hold this prefetcher and so the queue (a cycle left to the collector)."""
        if not self._running():
            self._drain()

    def _drain(self) -> None:
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break


def pipeline_def(fn: Callable | None = None, **pipeline_kwargs: Any):
    """Turn a graph-building function into a pipeline factory, as DALI's `pipeline_def`.

    Calling the result with the function's arguments (and optionally pipeline parameters such as batch_size)
    returns a `Pipeline` whose graph the function built.
    """

    def decorate(func: Callable) -> Callable[..., Pipeline]:
        import inspect

        own_params = set(inspect.signature(func).parameters)
        pipe_params = set(inspect.signature(Pipeline.__init__).parameters) | set(_DALI_ONLY)

        @functools.wraps(func)
        def create(*args: Any, **kwargs: Any) -> Pipeline:
            overrides = {k: kwargs.pop(k) for k in list(kwargs) if k in pipe_params and k not in own_params}
            pipe = Pipeline(**{**pipeline_kwargs, **overrides})
            body = func
            if pipe.enable_conditionals:
                from headrace.conditionals import convert

                body = convert(func)
            with pipe:
                outputs = body(*args, **kwargs)
            outputs = outputs if isinstance(outputs, tuple | list) else (outputs,)
            pipe.set_outputs(*outputs)
            return pipe

        return create

    return decorate(fn) if fn is not None else decorate


_LIVE: weakref.WeakSet[Pipeline] = weakref.WeakSet()
"""Built pipelines, closed at interpreter exit: DALI scripts never call close()."""


def _close_live_pipelines() -> None:
    for pipe in list(_LIVE):
        try:
            pipe.close()
        except Exception:  # noqa: BLE001 - at exit, one pipeline's failure must not keep the others open
            pass
