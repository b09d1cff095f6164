"""The GPU runtime: whether a GPU can be used, the CUDA sources, their NVRTC modules, and a pipeline's device context
(its own CUDA stream and a bounded memory pool that `release()` really empties)."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from importlib import resources
from pathlib import Path

from headrace_kernels.gpu.cupy_module import cupy

_module_lock = threading.Lock()
_modules: dict[tuple[str, int], object] = {}
_functions: dict[tuple[str, str, int], object] = {}
_active = threading.local()  # the GpuContext active in this thread (GpuContext.active)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*$', re.MULTILINE)  # #include "common.cuh"


@functools.lru_cache(maxsize=8)
def gpu_unavailable_reason(device_id: int | None = 0) -> str | None:
    """None when device `device_id` can run headrace's GPU ops, else why not (in words, for the error message)."""
    try:
        import cupy as cp
    except ImportError as exc:
        return (f"CuPy is not installed ({exc}); install headrace-kernels with the cuda12 or cuda13 extra, "
                "e.g. pip install 'headrace-kernels[cuda13]'")
    except Exception as exc:  # noqa: BLE001 - a broken CUDA installation raises anything
        return f"CuPy could not be imported ({type(exc).__name__}: {exc})"
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - no driver: CUDARuntimeError
        return f"no usable NVIDIA GPU: the CUDA driver reports {type(exc).__name__}: {exc}"
    if count == 0:
        return "no NVIDIA GPU is visible (cudaGetDeviceCount returned 0)"
    device = 0 if device_id is None else device_id
    if not 0 <= device < count:
        return f"device_id={device_id} but only {count} GPU(s) are visible"
    return None


def gpu_available(device_id: int | None = 0) -> bool:
    return gpu_unavailable_reason(device_id) is None


def kernel_source(name: str) -> str:
    """The text of `kernels/<name>` as NVRTC compiles it: each `#include "<file>"` of kernels/ replaced by that file's
    text (once per file; #line keeps error positions), so NVRTC needs no include path and CuPy's cache key, the
    source text, changes when a header does."""
    return _expanded(name, set())


def _expanded(name: str, included: set[str]) -> str:
    text = _kernel_file(name)

    def expand(match: re.Match) -> str:
        header, after = match.group(1), text.count("\n", 0, match.start()) + 2
        if header in included:
            return f"// {header}: included above"
        included.add(header)
        return f'#line 1 "{header}"\n{_expanded(header, included)}\n#line {after} "{name}"'

    return _INCLUDE.sub(expand, text)


def _kernel_file(name: str) -> str:
    """The text of `kernels/<name>`: the copy shipped inside the package, else the repository's (editable installs
    whose package data is not linked)."""
    try:
        shipped = resources.files("headrace_kernels").joinpath("cuda").joinpath(name)
        if shipped.is_file():
            return shipped.read_text()
    except (FileNotFoundError, NotADirectoryError):
        pass
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "kernels" / name
        if candidate.is_file():
            return candidate.read_text()
    raise FileNotFoundError(f"CUDA source kernels/{name} is neither in the headrace-kernels package nor in a "
                            "repository checkout above it")


def module(name: str, name_expressions: tuple[str, ...] = ()):
    """The compiled `kernels/<name>` for the current device: built by NVRTC on first use, then from CuPy's disk
    cache (~/.cupy/kernel_cache) in later processes. --fmad=false keeps float rounding identical to the CPU."""
    cp = cupy()
    key = (name, cp.cuda.Device().id)
    with _module_lock:
        mod = _modules.get(key)
        if mod is None:
            mod = cp.RawModule(code=kernel_source(name), options=("--fmad=false",),
                               name_expressions=name_expressions or None)
            _modules[key] = mod
    return mod


def function(source: str, name: str, name_expressions: tuple[str, ...] = ()):
    """Kernel `name` of `kernels/<source>` for the current device, looked up once (CuPy's lookup takes 3 us)."""
    key = (source, name, cupy().cuda.runtime.getDevice())
    found = _functions.get(key)
    if found is None:
        found = _functions[key] = module(source, name_expressions).get_function(name)
    return found


class GpuContext:
    """One pipeline's GPU resources: its device, its own non-blocking CUDA stream, the memory every array of the GPU
    stage comes from (gpu/memory.py; bounded by `limit_bytes` when given), and the pinned staging pool."""

    def __init__(self, device_id: int | None, limit_bytes: int = 0):
        from headrace_kernels.gpu.memory import PipelineMemory

        cp = cupy()
        self.device_id = 0 if device_id is None else device_id
        with cp.cuda.Device(self.device_id):
            self.stream = cp.cuda.Stream(non_blocking=True)
            self.memory = PipelineMemory(limit_bytes)

    @contextlib.contextmanager
    def active(self):
        """Make this context's device, stream and memory current for CuPy (and the decoder) in this thread; inside
        a block of its own it changes nothing (entering all four takes 10 us)."""
        from headrace_kernels.gpu.memory import using

        if getattr(_active, "context", None) is self:
            yield self
            return
        cp = cupy()
        outer, _active.context = getattr(_active, "context", None), self
        try:
            with using(self.memory), cp.cuda.Device(self.device_id), cp.cuda.using_allocator(self.memory.malloc), \
                    self.stream:
                yield self
        finally:
            _active.context = outer

    @property
    def used_bytes(self) -> int:
        return self.memory.used_bytes()

    @property
    def held_bytes(self) -> int:
        return self.memory.held_bytes()

    def release(self) -> None:
        """Return every unused block to the device (arrays still referenced stay)."""
        cp = cupy()
        with cp.cuda.Device(self.device_id):
            self.stream.synchronize()
            self.memory.release_scratch()
            self.memory.free_all_blocks()
            cp.get_default_pinned_memory_pool().free_all_blocks()
