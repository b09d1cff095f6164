"""CPU kernels of the user-function ops: python_function, dl_tensor_python_function, experimental.numba_function.
They see the whole batch, so that a function called once per batch gets it; per-sample calls loop here."""

from __future__ import annotations

import atexit
import threading
import traceback
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import SampleFailureError, cpu_kernel

_OURS = ("/headrace_kernels/", "/headrace/", "/numba/")


def user_frame(exc: BaseException) -> str:
    """Where the user's code raised: 'file:line in name: source' of the innermost frame outside headrace."""
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if not any(part in f.filename.replace("\\", "/") for part in _OURS)]
    if not (theirs or frames):
        return ""
    f = (theirs or frames)[-1]
    return f" (at {f.filename}:{f.lineno} in {f.name}: {f.line})" if f.line else f" (at {f.filename}:{f.lineno})"


def call_user(function: Callable, arguments: Sequence[Any], sample: int | None) -> Any:
    """`function(*arguments)`; a raise becomes a SampleFailureError that names the sample (None: the batch) and the
    user's line."""
    try:
        return function(*arguments)
    except Exception as exc:
        message = (f"the function {getattr(function, '__qualname__', function)!s} raised: {type(exc).__name__}: "
                   f"{exc}{user_frame(exc)}")
        if sample is None:  # a call for the whole batch: no one sample to name
            raise ValueError(message) from exc
        raise SampleFailureError(sample, message) from exc


def checked_array(value: Any, to_array: Callable[[Any], Any], output: int, sample: int) -> Any:
    """One returned output as an array of numbers, or a SampleFailureError naming the output and the sample."""
    try:
        array = to_array(value)
    except Exception as exc:  # noqa: BLE001  (whatever the user's object does: one error naming the sample)
        raise SampleFailureError(sample, f"output {output} of sample {sample} is a {type(value).__name__}, not an "
                                 f"array ({exc})") from None
    if array.dtype.kind not in "biufc":
        raise SampleFailureError(sample, f"output {output} of sample {sample} has element type {array.dtype}; "
                                 "expected numbers or bools")
    return array


def split_outputs(result: Any, count: int, sample: int | None) -> tuple:
    """A function's result as `count` outputs: the value itself for one, a tuple or list of `count` for more
    (`sample`: the sample it was called for; None: the whole batch)."""
    if count == 1:
        return (result,)
    if not isinstance(result, tuple | list) or len(result) != count:
        got = f"{len(result)} values" if isinstance(result, tuple | list) else f"a {type(result).__name__}"
        if sample is None:
            raise ValueError(f"num_outputs is {count}, and the function returned {got} for the batch")
        raise SampleFailureError(sample, f"num_outputs is {count}, and the function returned {got} for sample "
                                 f"{sample}")
    return tuple(result)


def run_function(function: Callable, batch_inputs: list[list], count: int, per_batch: bool,
                 to_arrays: Callable[[list], list], to_array: Callable[[Any], Any]) -> list:
    """The outputs of a python function over a batch: one tuple (or array, with one output) per sample.
    `to_arrays` turns one input's samples into what the function takes; `to_array` an output back."""
    size = len(batch_inputs)
    if per_batch:
        columns = [to_arrays([sample[k] for sample in batch_inputs]) for k in range(len(batch_inputs[0]))] \
            if size else []
        outputs = split_outputs(call_user(function, columns, None), count, None)
        per_sample: list[list] = [[] for _ in range(size)]
        for k, output in enumerate(outputs):
            if len(output) != size:
                raise ValueError(f"output {k} holds {len(output)} samples; the batch has {size}")
            for i, value in enumerate(output):
                per_sample[i].append(checked_array(value, to_array, k, i))
        rows = per_sample
    else:
        rows = []
        for i, sample in enumerate(batch_inputs):
            result = call_user(function, to_arrays(list(sample)), i)
            rows.append([checked_array(v, to_array, k, i) for k, v in enumerate(split_outputs(result, count, i))])
    return [row[0] if count == 1 else tuple(row) for row in rows]


def _host(value: Any) -> np.ndarray:
    return np.asarray(value)


@cpu_kernel("python_function")
def python_function(batch_inputs: list[list], batch_args: list[dict], contexts: list) -> list:
    args = batch_args[0]
    if args.get("num_workers", 0) > 0:
        return run_in_workers(args, batch_inputs)
    return run_function(args["function"], batch_inputs, args["num_outputs"], args["batch_processing"],
                        lambda arrays: arrays, _host)


_POOLS: dict[tuple, Any] = {}
_POOLS_LOCK = threading.Lock()


def worker_pool(function: Callable, workers: int, start_method: str) -> Any:
    """The worker processes running `function`: one pool per (function, count, start method), started on first use
    and stopped at exit."""
    from headrace_kernels.worker_pool import WorkerPool

    key = (function, workers, start_method)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            if not _POOLS:
                atexit.register(_close_pools)
            pool = _POOLS[key] = WorkerPool([function], workers, start_method, name="headrace-python-function")
        return pool


def _close_pools() -> None:
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()


def run_in_workers(args: dict, batch_inputs: list[list]) -> list:
    """python_function's per-sample calls on `num_workers` processes: the batch split into one contiguous run per
    worker, each run's results back in one shared-memory block."""
    from headrace_kernels.worker_pool import WorkerError

    if args["batch_processing"]:
        raise ValueError("num_workers runs per-sample calls: give batch_processing=False")
    pool = worker_pool(args["function"], args["num_workers"], args["worker_start_method"])
    share = -(-len(batch_inputs) // pool.num_workers) if batch_inputs else 1
    runs = [batch_inputs[w * share:(w + 1) * share] for w in range(pool.num_workers)]
    tasks = [(w, pool.submit(w, 0, [tuple(sample) for sample in run])) for w, run in enumerate(runs) if run]
    results: list = []
    for w, task in tasks:
        try:
            results += pool.result(task)
        except WorkerError as exc:
            first = w * share
            raise ValueError(f"the function raised in a worker process, on one of samples {first} to "
                             f"{first + len(runs[w]) - 1}: {exc}") from None
    count = args["num_outputs"]
    rows = []
    for i, result in enumerate(results):
        rows.append([checked_array(v, _host, k, i) for k, v in enumerate(split_outputs(result, count, i))])
    return [row[0] if count == 1 else tuple(row) for row in rows]


class CapsuleArray:
    """A DLPack capsule a user function returned, as an object numpy's and CuPy's `from_dlpack` take."""

    def __init__(self, capsule: Any, device: tuple[int, int]):
        self._capsule, self._device = capsule, device

    def __dlpack__(self, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


def from_dlpack_any(value: Any, from_dlpack: Callable[[Any], Any], device: tuple[int, int]) -> Any:
    """An array from a capsule or from an object with `__dlpack__` (a torch tensor, a CuPy or numpy array)."""
    if type(value).__name__ == "PyCapsule":
        value = CapsuleArray(value, device)
    return from_dlpack(value)


def _host_capsule(array: np.ndarray) -> Any:
    array = np.ascontiguousarray(array)
    if not array.flags.writeable:  # DLPack (unversioned) cannot say read-only: the function gets a copy
        array = array.copy()
    return array.__dlpack__()


@cpu_kernel("dl_tensor_python_function")
def dl_tensor_python_function(batch_inputs: list[list], batch_args: list[dict], contexts: list) -> list:
    args = batch_args[0]
    return run_function(args["function"], batch_inputs, args["num_outputs"], args["batch_processing"],
                        lambda arrays: [_host_capsule(a) for a in arrays],
                        lambda value: from_dlpack_any(value, np.from_dlpack, (1, 0)))


# numba_function: the compiled functions, per Python function (compiling takes a second; a node calls it per batch)
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPILE_LOCK = threading.Lock()


def compiled(function: Callable) -> Callable:
    """`function` compiled by numba in nopython mode, once per function."""
    import numba

    with _COMPILE_LOCK:
        found = _COMPILED.get(function)
        if found is None:
            found = _COMPILED[function] = numba.njit(function)
        return found


def typed_list(arrays: list[np.ndarray]) -> Any:
    from numba.typed import List

    out = List()
    for array in arrays:
        out.append(array)
    return out


def check_numba_inputs(batch_inputs: list[list], args: dict) -> None:
    """Each input of the types and ranks `in_types` / `ins_ndim` declare: a ValueError when the declarations do not
    fit the op, a SampleFailureError naming the sample whose input does not fit them."""
    in_types, ins_ndim = args["in_types"], args["ins_ndim"]
    count = len(batch_inputs[0]) if batch_inputs else len(in_types)
    if len(in_types) != count or len(ins_ndim) != count:
        raise ValueError(f"the op has {count} inputs; in_types gives {len(in_types)} types and ins_ndim "
                         f"{len(ins_ndim)} ranks")
    if len(args["out_types"]) != len(args["outs_ndim"]):
        raise ValueError(f"out_types gives {len(args['out_types'])} types and outs_ndim "
                         f"{len(args['outs_ndim'])} ranks")
    for i, sample in enumerate(batch_inputs):
        for k, array in enumerate(sample):
            want = numpy_dtype(in_types[k])
            if array.dtype != want or array.ndim != ins_ndim[k]:
                raise SampleFailureError(i, f"input {k} of sample {i} is {array.dtype} with {array.ndim} dimensions;"
                                         f" in_types / ins_ndim declare {want} with {ins_ndim[k]}")


def output_shapes(batch_inputs: list[list], args: dict) -> list[list[tuple[int, ...]]]:
    """Per output, per sample, its shape: what setup_fn writes, or the first input's shapes without one."""
    size, outs_ndim = len(batch_inputs), args["outs_ndim"]
    if args["setup_fn"] is None:
        first_ndim = batch_inputs[0][0].ndim if size else None
        for k, ndim in enumerate(outs_ndim):
            if first_ndim is not None and ndim != first_ndim:
                raise ValueError(f"without setup_fn every output has the first input's shape, and "
                                 f"outs_ndim[{k}] = {ndim} differs from its {first_ndim} dimensions")
        return [[tuple(sample[0].shape) for sample in batch_inputs] for _ in outs_ndim]
    outs = typed_list([np.zeros((size, ndim), np.int64) for ndim in outs_ndim])
    ins = typed_list([np.array([s[k].shape for s in batch_inputs], np.int64).reshape(size, -1)
                      for k in range(len(batch_inputs[0]))])
    call_user(compiled(args["setup_fn"]), (outs, ins), None)
    shapes = [[tuple(int(d) for d in outs[k][i]) for i in range(size)] for k in range(len(outs_ndim))]
    for k, per_sample in enumerate(shapes):
        for i, shape in enumerate(per_sample):
            if any(d < 0 for d in shape):
                raise SampleFailureError(i, f"setup_fn gave output {k} of sample {i} the shape {shape}")
    return shapes


@cpu_kernel("experimental.numba_function")
def numba_function(batch_inputs: list[list], batch_args: list[dict], contexts: list) -> list:
    args = batch_args[0]
    check_numba_inputs(batch_inputs, args)
    shapes = output_shapes(batch_inputs, args)
    out_types = [numpy_dtype(t) for t in args["out_types"]]
    outputs = [[np.zeros(shape, dtype) for shape in per_sample] for per_sample, dtype in zip(shapes, out_types,
                                                                                            strict=True)]
    run = compiled(args["run_fn"])
    inputs = [[np.ascontiguousarray(sample[k]) for sample in batch_inputs] for k in range(len(args["in_types"]))]
    if args["batch_processing"]:
        call_user(run, [typed_list(o) for o in outputs] + [typed_list(i) for i in inputs], None)
    else:
        for i in range(len(batch_inputs)):
            call_user(run, [o[i] for o in outputs] + [k[i] for k in inputs], i)
    count = len(outputs)
    return [outputs[0][i] if count == 1 else tuple(o[i] for o in outputs) for i in range(len(batch_inputs))]
