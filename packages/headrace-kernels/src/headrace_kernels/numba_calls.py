"""Calling a numba loop that takes C functions (ctypes function objects) as arguments without numba's per-call
typing. Numba's C dispatch cannot type a ctypes function, so every call of such a loop would go through Python
typing and signature lookup (a large share of a small served batch: benchmarks/HISTORY.md). `bind` types the
functions once and calls the compiled overload directly after the first call."""

from __future__ import annotations

import ctypes
import functools
import threading

import numba
import numpy as np


def _key(value) -> object:
    """What picks a numba overload for an argument, cheaply: arrays by dtype, dimensions, layout and writability."""
    if isinstance(value, np.ndarray):
        flags = value.flags
        return value.dtype.num, value.ndim, flags.c_contiguous, flags.f_contiguous, flags.writeable
    return type(value)


def bind(dispatcher, *functions):
    """`dispatcher` with `functions` (ctypes functions, and any constants after them) as its leading arguments:
    call(*args). The first call with given argument kinds goes through numba (which compiles, or loads from its
    disk cache); later ones call the compiled overload for those kinds directly."""
    function_types = tuple(numba.typeof(f) for f in functions)
    entries: dict[tuple, object] = {}
    lock = threading.Lock()

    def call(*args):
        key = tuple(_key(a) for a in args)
        entry = entries.get(key)
        if entry is not None:
            return entry(*functions, *args)
        result = dispatcher(*functions, *args)
        signature = function_types + tuple(numba.typeof(a) for a in args)
        compiled = dispatcher.overloads.get(signature)
        if compiled is not None:  # else numba ran a compatible overload: keep going through the dispatcher
            with lock:
                entries[key] = compiled.entry_point
        return result

    call.entries = entries  # for tests: which argument kinds have a direct entry
    return call


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def libc_function(name: str, argtypes: list, restype):
    """A ctypes function object of libc's `name` with these argument and result types: a new object per call, so
    two loops may declare the same function differently (pointers as 64-bit integers, say)."""
    function = _libc()[name]
    function.argtypes, function.restype = argtypes, restype
    return function


_target = {"started": False, "lock": threading.Lock()}


def start_cpu_target() -> None:
    """Start numba's one-time set-up of its CPU target (its typing and lowering registries, most of a second) on a
    thread of its own, once per process: a GPU pipeline's first batch then does not pay it after the decoder's
    set-up, which it can overlap (that one runs in native code). Only a head start: a compiled loop called meanwhile
    waits for it under numba's compiler lock."""
    with _target["lock"]:
        if _target["started"]:
            return
        _target["started"] = True

    def set_up() -> None:
        try:
            from numba.core.compiler_lock import global_compiler_lock
            from numba.core.registry import cpu_target

            with global_compiler_lock:
                cpu_target.target_context.refresh()
        except Exception:  # noqa: BLE001 - numba's internals moved: the first compiled call sets it up instead
            pass

    threading.Thread(target=set_up, name="headrace-numba-target", daemon=True).start()
