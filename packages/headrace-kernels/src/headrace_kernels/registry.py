"""Kernels register here against an op's schema name, per device; the executor looks them up.

Kernel modules are found, not listed: every module of `headrace_kernels.cpu` and `headrace_kernels.gpu` is imported
on the first lookup of its device, and its decorators fill the tables. Nothing here names an op."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from headrace_kernels.columns import BatchColumns


class SampleContext(Protocol):
    """What a per-sample kernel may ask of the executor."""

    @property
    def rng(self) -> np.random.Generator: ...  # this sample's random stream, keyed by (seed, node, sample)

    source: str
    """Where the sample came from (its source_info: a file path, ...); '' when unknown."""
    input_layouts: tuple[str, ...]
    """The layout of each of the node's inputs, as the graph knows it ('' where unknown)."""

    def output(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialized array for the first output, to fill and return as it is: the sample's row of the batch
        when the executor collects that output densely (no copy after the kernel), else a new array."""


def output_array(ctx: SampleContext | None, shape: tuple[int, ...], dtype) -> np.ndarray:
    """`ctx.output(shape, dtype)`, or a new array where a kernel runs outside the executor (ctx None)."""
    return np.empty(shape, dtype) if ctx is None else ctx.output(shape, dtype)


class GpuBatch(Protocol):
    """What a GPU kernel sees of the batch it runs on (the engine's view; see headrace.engine.gpu_batch)."""

    size: int
    iteration: int
    first_sample: int
    stream: Any
    """The pipeline's CUDA stream (CuPy's current stream while a kernel runs)."""
    device_id: int
    args: dict[str, Any]
    """The node's literal arguments, defaults filled in (for a fused kernel: its last op's)."""
    per_sample_args: frozenset[str]
    """Names of the node's arguments that come from a DataNode, one value per sample (for a fused kernel: its last
    op's; KernelSetup.per_sample_args has the whole chain's)."""
    ahead: Any
    """What this kernel's own `prepare` hook made of this batch ahead, or None."""
    planned: Any
    """What this kernel's own `plan` hook planned for this batch ahead, or None."""
    meanwhile: Any
    """Host work a decoding kernel may run while the decode is under way (planning the steps after it), or None."""
    sources: list[str]
    """Where each sample came from (source_info), '' where unknown."""
    input_layouts: tuple[str, ...]
    """The layout of each input ('' where unknown)."""

    def active(self) -> Any: ...  # a context: CuPy allocates from the pipeline's memory, on its device and stream
    def num_inputs(self) -> int: ...
    def input(self, k: int = 0) -> Any: ...  # input k on the GPU: `.dense` (N, ...) array or None, `.samples()`
    def samples(self, k: int = 0, raw: bool = False) -> list: ...  # input k's samples (raw: decoder records)
    def value(self, k: int = 0) -> Any: ...  # input k as it is (a GPU batch or a list of host arrays)
    def has_value(self, k: int = 0) -> bool: ...  # whether input k is there yet (a plan hook may run before it is)
    def sample_args(self, part: int = -1) -> list[dict]: ...  # per-sample arguments of the chain's op `part`
    def rng(self, index: int) -> np.random.Generator: ...  # sample `index`'s random stream
    def prepared(self, k: int = 0) -> Any: ...  # the host half a preparing kernel made of input k, or None


class SampleFailureError(Exception):
    """A kernel could not handle sample `index`; the executor turns it into an error naming the file and the op."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


SampleKernel = Callable[[list[Any], dict[str, Any], SampleContext], Any]
BatchDrawKernel = Callable[[dict[str, Any], int, int, int], list[Any]]
BatchKernel = Callable[[list[list[Any]], dict[str, Any], int, int, int], BatchColumns | None]


@dataclasses.dataclass(frozen=True)
class KernelSetup:
    """What a GPU kernel object is made with, once per node: its arguments and where it runs."""

    op: str
    args: dict[str, Any]
    device: str
    """The node's device: 'gpu' or 'mixed', or 'cpu' for a `.cpu()` copy that reads GPU data."""
    device_id: int
    num_threads: int
    batch_size: int
    seed: int
    options: Any
    """The pipeline's executor options (headrace.ExecutorOptions): plan_cache, nvimgcodec_capi, ..."""
    per_sample_args: frozenset[str] = frozenset()
    parts: tuple[dict[str, Any], ...] = ()
    """For a fused kernel: the literal arguments of each op it replaces, in order."""
    chain: tuple[str, ...] = ()
    """For a fused kernel: the ops it replaces, in order (one kernel may be registered for several chains)."""


@dataclasses.dataclass(frozen=True)
class GpuKernelEntry:
    """A registered GPU kernel: a function of the batch, or a class made per node (with optional hooks
    `prepare(batch)` (host half, run ahead in the CPU stage), `plan(batch)` (launch plan on a decoder's prepared
    records, ahead), `warm_up(stream)` and `release()`)."""

    ops: tuple[str, ...]
    """The op it runs, or for a fused kernel the chain of ops it replaces (each reads the one before it)."""
    impl: Any

    @property
    def fused(self) -> bool:
        return len(self.ops) > 1

    def make(self, setup: KernelSetup) -> Any:
        """The kernel object of one node (or fused chain)."""
        if isinstance(self.impl, type):
            return self.impl(setup)
        return _FunctionKernel(self.impl)


class _FunctionKernel:
    """A stateless GPU kernel function as a kernel object."""

    __slots__ = ("run",)

    def __init__(self, fn: Callable[[GpuBatch], Any]):
        self.run = fn


_CPU: dict[str, SampleKernel] = {}
_CPU_BATCH: dict[str, BatchDrawKernel] = {}
_CPU_BATCH_TWIN: dict[str, BatchKernel] = {}
_GPU: dict[str, GpuKernelEntry] = {}
_FUSED: dict[tuple[str, ...], GpuKernelEntry] = {}
_READERS: dict[str, type] = {}
_loaded: set[str] = set()
_load_lock = threading.RLock()


def _register(table: dict, names: Sequence[str], value: Any, what: str) -> None:
    for name in names:
        if name in table and table[name] is not value:
            raise AssertionError(f"{what} of op {name} registered twice")
        table[name] = value


def cpu_kernel(*op_names: str) -> Callable[[SampleKernel], SampleKernel]:
    """Register the per-sample CPU implementation of `op_names` (for a schema with whole_batch=True, the kernel
    takes lists of inputs, arguments and contexts for the whole batch and returns one result per sample)."""

    def decorate(fn: SampleKernel) -> SampleKernel:
        _register(_CPU, op_names, fn, "CPU kernel")
        return fn

    return decorate


def cpu_batch_draw_kernel(op_name: str) -> Callable[[BatchDrawKernel], BatchDrawKernel]:
    """Register a whole-batch twin of an input-less random op's CPU kernel: (args, seed, first_sample, size) ->
    one result per sample (a list, or a Column over the batch's array: headrace_kernels.columns), equal to what the
    per-sample kernel gives sample first_sample + i (so the executor may use either, with any number of threads)."""

    def decorate(fn: BatchDrawKernel) -> BatchDrawKernel:
        _register(_CPU_BATCH, (op_name,), fn, "batch draw kernel")
        return fn

    return decorate


def cpu_batch_kernel(op_name: str) -> Callable[[BatchKernel], BatchKernel]:
    """Register a whole-batch twin of a per-sample CPU kernel that takes inputs: (inputs, each a list of the batch's
    samples, args, seed, first_sample, size) -> the outputs as BatchColumns (one column per output:
    headrace_kernels.columns), sample i of each equal to what the per-sample kernel gives sample first_sample + i;
    or None to leave the batch to the per-sample kernel (which then reports any bad sample with its own error).
    The executor uses it for a whole batch of a node with literal arguments only."""

    def decorate(fn: BatchKernel) -> BatchKernel:
        _register(_CPU_BATCH_TWIN, (op_name,), fn, "batch kernel")
        return fn

    return decorate


def gpu_kernel(*op_names: str, fuses: Sequence[str] | None = None) -> Callable[[Any], Any]:
    """Register the GPU implementation of `op_names`: a function `fn(batch) -> result` or a class made per node
    with a `KernelSetup` and a `run(batch)` method. The result is `(dense (N, ...) array or None, list of samples)`,
    or a list of samples. With `fuses=(op_a, op_b, ...)` it replaces that chain of ops wherever each op's output is
    read by the next one alone, as its first input; the batch's inputs are then the first op's, followed by each
    later op's other inputs, and `sample_args(part)` gives each op's arguments."""
    if fuses is not None and op_names:
        raise AssertionError("gpu_kernel: give op names or fuses=, not both")

    def decorate(impl: Any) -> Any:
        if fuses is not None:
            key = tuple(fuses)
            if len(key) < 2:
                raise AssertionError("gpu_kernel: a fused kernel replaces two ops or more")
            _register(_FUSED, (key,), GpuKernelEntry(key, impl), "fused GPU kernel")
        else:
            for name in op_names:
                _register(_GPU, (name,), GpuKernelEntry((name,), impl), "GPU kernel")
        return impl

    return decorate


def reader(op_name: str) -> Callable[[type], type]:
    """Register a batch op (a reader or external source): a class made per node with
    (name, args, batch_size, seed, pool) and a `next_batch(iteration)` method."""

    def decorate(cls: type) -> type:
        _register(_READERS, (op_name,), cls, "reader")
        return cls

    return decorate


def _load(device: str) -> None:
    """Import every kernel module of `device` ('cpu' or 'gpu') once; their decorators fill the tables."""
    if device in _loaded:
        return
    with _load_lock:
        if device in _loaded:
            return
        package = importlib.import_module(f"headrace_kernels.{device}")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"headrace_kernels.{device}.{module.name}")
        _loaded.add(device)


def get_cpu_kernel(op_name: str) -> SampleKernel | None:
    """The CPU kernel of `op_name`, importing the kernel modules on first use."""
    _load("cpu")
    return _CPU.get(op_name)


def get_cpu_batch_draw_kernel(op_name: str) -> BatchDrawKernel | None:
    _load("cpu")
    return _CPU_BATCH.get(op_name)


def get_cpu_batch_kernel(op_name: str) -> BatchKernel | None:
    _load("cpu")
    return _CPU_BATCH_TWIN.get(op_name)


def get_gpu_kernel(op_name: str) -> GpuKernelEntry | None:
    """The GPU kernel of `op_name` (importing the GPU kernel modules needs no GPU and no CuPy)."""
    _load("cpu")
    _load("gpu")
    return _GPU.get(op_name)


def fused_gpu_kernels() -> list[GpuKernelEntry]:
    """Every registered fused kernel, longest chain first."""
    _load("cpu")
    _load("gpu")
    return sorted(_FUSED.values(), key=lambda entry: -len(entry.ops))


def get_reader(op_name: str) -> type | None:
    """The batch op class of `op_name` (headrace's readers register themselves when headrace.readers imports)."""
    return _READERS.get(op_name)


def registered_ops() -> dict[str, set[str]]:
    """Op name -> the devices it has kernels for ('cpu', 'gpu', 'reader'), after loading every kernel module."""
    _load("cpu")
    _load("gpu")
    out: dict[str, set[str]] = {}
    for device, table in (("cpu", _CPU), ("gpu", _GPU), ("reader", _READERS)):
        for name in table:
            out.setdefault(name, set()).add(device)
    return out
