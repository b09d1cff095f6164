"""GPU reductions (kernels/reduce.cu: one segmented reduction over the whole batch, samples of any shape) and the
memory-movement ops stack, cat, reshape, transpose, pad and one_hot (CuPy array operations, one launch per batch
where the samples share a shape). Same checks, output types and error messages as the CPU kernels."""

from __future__ import annotations

import math
import threading

import numpy as np

from headrace_kernels.cpu.axes import resolve_axes
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.reduction_ops import sum_type
from headrace_kernels.cpu.tensor_ops import infer_shape, join_axis, one_hot_axis, pad_extents, transpose_perm
from headrace_kernels.dtypes import CTYPES, numpy_dtype
from headrace_kernels.gpu.runtime import cupy, kernel_source
from headrace_kernels.registry import SampleFailureError, get_cpu_kernel, gpu_kernel

MAX_DIMS = 6
CHUNK = 2048  # reduced elements per warp work item (kernels/reduce.cu)
SHORT = 64  # at most this many reduced elements per output: one thread per output instead of one warp

# min / max accumulate in a type __shfl_down_sync moves (32 or 64 bits) that holds the data's values exactly
_MINMAX_ACC = {"uint8": "unsigned int", "uint16": "unsigned int", "uint32": "unsigned int", "int8": "int",
               "int16": "int", "int32": "int", "uint64": "unsigned long long", "int64": "long long",
               "float32": "float", "float64": "double"}
_NP_OF_C = {c: np.dtype(name) for name, c in CTYPES.items()}  # C type name -> numpy dtype

# reduction -> (kernel op, final step); ops of kernels/reduce.cu: 0 sum, 1 sum of squares, 2 min, 3 max, 4 squared
# deviations from the mean; final steps: 0 none, 1 divide by the count (less ddof), 2 root of that
_PLAN = {"reductions.sum": (0, 0), "reductions.mean": (0, 1), "reductions.mean_square": (1, 1),
         "reductions.rms": (1, 2), "reductions.min": (2, 0), "reductions.max": (3, 0),
         "reductions.variance": (4, 1), "reductions.std_dev": (4, 2)}

# One ReduceSample record (kernels/reduce.cu) is 32 int64 words: data, mean, out_offset, outputs, count, chunks,
# work_offset, kept_ndim | red_ndim << 32, then kept_shape, kept_stride, red_shape, red_stride (MAX_DIMS each).
_DATA, _MEAN, _OUT_OFFSET, _OUTPUTS, _COUNT, _CHUNKS, _WORK_OFFSET, _NDIMS = range(8)
WORDS = 8 + 4 * MAX_DIMS

_lock = threading.Lock()
_modules: dict[tuple, object] = {}


def _kernels(ctype: str, acc: str, out: str, op: int, finish: int):
    """(warp kernel, thread kernel, finish kernel) of one instantiation, compiled on first use."""
    cp = cupy()
    names = (f"reduce_warps<{ctype}, {acc}, {op}>", f"reduce_threads<{ctype}, {acc}, {op}>",
             f"reduce_finish<{acc}, {out}, {op}, {finish}>")
    key = (cp.cuda.Device().id, names)
    with _lock:
        mod = _modules.get(key)
        if mod is None:
            mod = cp.RawModule(code=kernel_source("reduce.cu"), options=("--fmad=false",),
                               name_expressions=names)
            _modules[key] = mod
    return tuple(mod.get_function(n) for n in names)


def _collapse(extents: list[int], strides: list[int]) -> tuple[list[int], list[int]]:
    """Drop unit axes and merge neighbours that are contiguous in memory (fewer index divisions per element)."""
    shape: list[int] = []
    stride: list[int] = []
    for n, s in zip(extents, strides, strict=True):
        if n == 1:
            continue
        if shape and stride[-1] == n * s:
            shape[-1] *= n
            stride[-1] = s
        else:
            shape.append(n)
            stride.append(s)
    return (shape, stride) if shape else ([1], [0])


def _output_dtype(name: str, source: np.dtype, args: dict) -> np.dtype:
    if name in ("reductions.min", "reductions.max"):
        return source
    if args.get("dtype") is not None:
        return numpy_dtype(args["dtype"])
    return sum_type(source) if name == "reductions.sum" else np.dtype(np.float32)


def _describe(name: str, sample, args: dict, mean) -> tuple[list[int], tuple, object]:
    """One sample's record (as 32 int64 words), its output shape, and its means as float64 (variance / std)."""
    cp = cupy()
    axes = sorted(set(resolve_axes(args["axes"], args["axis_names"], sample.ndim)))
    shape = tuple(sample.shape)
    if any(shape[a] == 0 for a in axes):
        raise ValueError(f"cannot reduce an empty axis (shape {shape}, axes {tuple(axes)})")
    strides = [s // sample.itemsize for s in sample.strides]
    kept = [a for a in range(sample.ndim) if a not in axes]
    kept_shape, kept_stride = _collapse([shape[a] for a in kept], [strides[a] for a in kept])
    red_shape, red_stride = _collapse([shape[a] for a in axes], [strides[a] for a in axes])
    if len(kept_shape) > MAX_DIMS or len(red_shape) > MAX_DIMS:
        raise ValueError(f"{name} on the GPU handles at most {MAX_DIMS} non-contiguous axes (shape {shape})")
    outputs = math.prod(shape[a] for a in kept)
    count = math.prod(shape[a] for a in axes)
    out_shape = tuple(1 if a in axes else n for a, n in enumerate(shape)) if args["keep_dims"] else \
        tuple(shape[a] for a in kept)
    mean_ptr = 0
    if mean is not None:
        mean = cp.ascontiguousarray(mean, dtype=cp.float64)
        if mean.size != outputs:
            raise ValueError(f"the mean has shape {tuple(mean.shape)}; reducing shape {shape} over axes "
                             f"{tuple(axes)} needs {outputs} values")
        if count - args["ddof"] <= 0:
            raise ValueError(f"ddof={args['ddof']} leaves no degrees of freedom")
        mean_ptr = mean.data.ptr
    pad = [0] * MAX_DIMS
    row = [sample.data.ptr, mean_ptr, 0, outputs, count, 0, 0, len(kept_shape) | (len(red_shape) << 32),
           *(kept_shape + pad)[:MAX_DIMS], *(kept_stride + pad)[:MAX_DIMS], *(red_shape + pad)[:MAX_DIMS],
           *(red_stride + pad)[:MAX_DIMS]]
    return row, out_shape, mean


def reduce(name: str, samples: list, args: dict, means: list | None = None):
    """`name` (a reductions.* op) of every sample: (dense (N, ...) array or None, list of per-sample arrays)."""
    cp = cupy()
    op, finish = _PLAN[name]
    if not samples:
        return None, []
    dtypes = {np.dtype(s.dtype) for s in samples}
    if len(dtypes) > 1:  # e.g. merged from branches that gave different types: one reduction per type
        out: list = [None] * len(samples)
        for dtype in dtypes:
            indices = [i for i, s in enumerate(samples) if np.dtype(s.dtype) == dtype]
            dense, listed = reduce(name, [samples[i] for i in indices], args,
                                   None if means is None else [means[i] for i in indices])
            for j, i in enumerate(indices):
                out[i] = dense[j] if dense is not None else listed[j]
        return None, out
    source = dtypes.pop()
    data = list(samples)
    if source == np.float16:  # exact in float32; min / max are cast back below
        data = [s.astype(cp.float32) for s in data]
    elif source == np.bool_:
        data = [s.view(cp.uint8) for s in data]
    work = np.dtype(data[0].dtype).name
    rows, shapes, keep_alive = [], [], []
    for i, sample in enumerate(data):
        try:
            row, shape, mean = _describe(name, sample, args, None if means is None else means[i])
        except ValueError as exc:
            raise SampleFailureError(i, str(exc)) from None
        rows.append(row)
        shapes.append(shape)
        keep_alive.append(mean)
    records = np.array(rows, dtype=np.int64).reshape(len(rows), WORDS)
    counts, outputs = records[:, _COUNT], records[:, _OUTPUTS]
    warps = int(counts.max()) > SHORT
    chunks = -(-counts // CHUNK) if warps else np.ones_like(counts)
    records[:, _CHUNKS] = chunks
    per_sample_items = outputs * chunks
    records[:, _WORK_OFFSET] = np.cumsum(per_sample_items) - per_sample_items
    records[:, _OUT_OFFSET] = np.cumsum(outputs) - outputs
    items, total = int(per_sample_items.sum()), int(outputs.sum())

    if op in (2, 3):
        acc = _MINMAX_ACC[work]
        out_c = CTYPES[work]
    else:
        acc = "double" if np.dtype(work).kind == "f" or op != 0 else (
            "unsigned long long" if np.dtype(work).kind == "u" else "long long")
        out_c = acc if finish == 0 else "double"
    out_np = np.dtype(work) if op in (2, 3) else np.dtype(_NP_OF_C[out_c])
    result = cp.empty(total, dtype=out_np)
    if total:
        warp_kernel, thread_kernel, finish_kernel = _kernels(CTYPES[work], acc, out_c, op, finish)
        table = cp.asarray(records)
        partials = cp.empty(items, dtype=_NP_OF_C[acc])
        n = np.int32(len(data))
        if warps:
            blocks = int(min(-(-items * 32 // 256), 8192))
            warp_kernel((blocks,), (256,), (table, n, np.int64(items), partials))
        else:
            blocks = int(min(-(-items // 256), 8192))
            thread_kernel((blocks,), (256,), (table, n, np.int64(items), partials))
        blocks = int(min(-(-total // 256), 8192))
        ddof = args.get("ddof", 0) if op == 4 else 0
        finish_kernel((blocks,), (256,), (table, n, np.int64(total), partials, result, np.int64(ddof)))
        keep_alive.extend((table, partials, data))
    wanted = _output_dtype(name, source, args)
    if source == np.bool_ and op in (2, 3):
        result = result.view(cp.bool_)
    elif result.dtype != wanted:
        result = result.astype(wanted)
    if len(set(shapes)) == 1:
        return result.reshape(len(data), *shapes[0]), None
    out, start = [], 0
    for shape, count in zip(shapes, outputs.tolist(), strict=True):
        out.append(result[start:start + int(count)].reshape(shape))
        start += int(count)
    return None, out


# Memory-movement ops

def _check_same_type(arrays: list, op: str) -> None:
    types = {np.dtype(a.dtype) for a in arrays}
    if len(types) > 1:
        raise ValueError(f"{op}: inputs have different types {sorted(str(t) for t in types)}")


def stack(inputs: list, axis: int):
    """One sample's inputs stacked along a new axis `axis` (checked by join_axis; the CPU kernel's other checks)."""
    cp = cupy()
    _check_same_type(inputs, "stack")
    shapes = {tuple(a.shape) for a in inputs}
    if len(shapes) > 1:
        raise ValueError(f"stack: inputs have different shapes {sorted(shapes)}")
    return cp.stack(inputs, axis=axis)


def stack_dense(batches: list, axis: int):
    """Dense (N, ...) batches of equal shape stacked per sample along `axis` (checked by join_axis), in one launch."""
    cp = cupy()
    _check_same_type(batches, "stack")
    return cp.stack(batches, axis=axis + 1 if axis >= 0 else axis)


def cat(inputs: list, axis: int):
    cp = cupy()
    _check_same_type(inputs, "cat")
    ndim = inputs[0].ndim
    if any(a.ndim != ndim for a in inputs) or not -ndim <= axis < ndim:
        raise ValueError(f"cat: axis {axis} with input shapes {[tuple(a.shape) for a in inputs]}")
    a = axis % ndim
    rest = {tuple(x.shape[:a]) + tuple(x.shape[a + 1:]) for x in inputs}
    if len(rest) > 1:
        raise ValueError(f"cat: extents other than axis {axis} differ: {[tuple(x.shape) for x in inputs]}")
    return cp.concatenate(inputs, axis=axis)


def cat_dense(batches: list, axis: int):
    cp = cupy()
    _check_same_type(batches, "cat")
    ndim = batches[0].ndim - 1
    if not -ndim <= axis < ndim:
        raise ValueError(f"cat: axis {axis} with input shapes {[tuple(b.shape[1:]) for b in batches]}")
    a = axis % ndim + 1
    rest = {tuple(x.shape[:a]) + tuple(x.shape[a + 1:]) for x in batches}
    if len(rest) > 1:
        raise ValueError(f"cat: extents other than axis {axis} differ: {[tuple(x.shape[1:]) for x in batches]}")
    return cp.concatenate(batches, axis=a)


def reshape_shape(shape: tuple, args: dict) -> tuple[int, ...]:
    """The output shape of reshape for an input of `shape` (the CPU kernel's rules)."""
    size = int(np.prod(shape, dtype=np.int64))
    given = [args[k] is not None for k in ("shape", "rel_shape", "src_dims")]
    if sum(given) > 1:
        raise ValueError("give only one of shape, rel_shape and src_dims")
    if args["src_dims"] is not None:
        dims = args["src_dims"]
        kept = [d for d in dims if d != -1]
        if any(not 0 <= d < len(shape) for d in kept) or len(set(kept)) != len(kept):
            raise ValueError(f"src_dims {dims} for a {len(shape)}-dimensional input")
        if any(shape[d] != 1 for d in range(len(shape)) if d not in kept):
            raise ValueError(f"src_dims {dims} drops axes of extent > 1 (input shape {shape})")
        return tuple(1 if d == -1 else shape[d] for d in dims)
    if args["rel_shape"] is not None:
        rel = args["rel_shape"]
        if len(rel) != len(shape):
            raise ValueError(f"rel_shape {rel} needs one value per input axis ({len(shape)})")
        wanted = [-1 if r == -1 else int(round(r * n)) for r, n in zip(rel, shape, strict=True)]
        return infer_shape(wanted, size, shape)
    if args["shape"] is None:  # only a layout (DALI relabels the data): the shape kept
        return tuple(shape)
    return infer_shape(list(args["shape"]), size, shape)


def transpose(array, perm: list[int], dense: bool):
    cp = cupy()
    shape = tuple(array.shape[1:] if dense else array.shape)
    perm = transpose_perm(len(shape), perm, shape)
    order = [0, *(p + 1 for p in perm)] if dense else perm
    return cp.ascontiguousarray(array.transpose(order))


def one_hot(labels, args: dict, dense: bool, layout: str = ""):
    """One-hot codes of a sample's labels (or of a dense batch's, `dense`), values saturated to `dtype`; `layout` is
    the input's ('' if none)."""
    cp = cupy()
    if labels.dtype.kind == "f":  # truncated toward zero, as DALI casts them; NaN and infinities match no class
        labels = cp.where(cp.isfinite(labels), cp.trunc(labels), -1).astype(cp.int64)
    elif labels.dtype.kind not in "iub":
        raise ValueError(f"one_hot needs numeric class labels, got {labels.dtype}")
    classes = args["num_classes"]
    if classes < 0:
        raise ValueError(f"num_classes must be 0 or more, got {classes}")
    sample_shape = tuple(labels.shape[1:] if dense else labels.shape)
    if len(sample_shape) == 1 and sample_shape[0] == 1:  # a one-element label is a scalar, as in DALI
        labels = labels.reshape(labels.shape[:1] if dense else ())
        sample_shape = ()
    axis = one_hot_axis(len(sample_shape), args, layout)
    on, off = saturate_cast(np.array([args["on_value"], args["off_value"]], dtype=np.float64),
                            numpy_dtype(args["dtype"]))
    hot = labels[..., None] == cp.arange(classes)
    values = cp.where(hot, cp.asarray(on), cp.asarray(off))
    target = axis + (1 if dense else 0)
    return cp.ascontiguousarray(cp.moveaxis(values, -1, target))


def pad(samples: list, batch_args: list[dict], layout: str = ""):
    """The batch padded (the CPU kernel's rules; `layout` is the input's, '' if none); a dense (N, ...) array when
    every output has one shape."""
    cp = cupy()
    if not samples:
        return None, []
    args = batch_args[0]
    extents_all = pad_extents([tuple(s.shape) for s in samples], batch_args, layout)
    dtypes = {np.dtype(s.dtype) for s in samples}
    if len(set(extents_all)) == 1 and len(dtypes) == 1:
        dtype = dtypes.pop()
        fill = saturate_cast(np.array([args["fill_value"]], dtype=np.float64), dtype)[0]
        out = cp.full((len(samples), *extents_all[0]), fill, dtype=dtype)
        for i, sample in enumerate(samples):
            out[(i, *(slice(0, n) for n in sample.shape))] = sample
        return out, None
    outs = []
    for sample, extents in zip(samples, extents_all, strict=True):
        fill = saturate_cast(np.array([args["fill_value"]], dtype=np.float64), np.dtype(sample.dtype))[0]
        out = cp.full(extents, fill, dtype=sample.dtype)
        out[tuple(slice(0, n) for n in sample.shape)] = sample
        outs.append(out)
    return None, outs


# The registered kernels: one launch when every input is a dense batch, else per sample.
def each(items, func) -> list:
    """func(*item) for every sample; a ValueError names the sample (SampleFailureError)."""
    out = []
    for index, item in enumerate(items):
        try:
            out.append(func(*item))
        except ValueError as exc:
            raise SampleFailureError(index, str(exc)) from None
    return out


@gpu_kernel(*(f"reductions.{name}" for name in ("sum", "mean", "mean_square", "rms", "min", "max", "std_dev",
                                                  "variance")))
class ReduceKernel:
    """reductions.*: one segmented reduction over the batch (variance / std_dev also read the mean)."""

    def __init__(self, setup):
        self.op = setup.op

    def run(self, batch):
        means = batch.samples(1) if batch.num_inputs() > 1 else None
        return reduce(self.op, batch.samples(0), batch.args, means)


@gpu_kernel("stack", "cat")
class JoinKernel:
    """stack and cat."""

    def __init__(self, setup):
        self.stack = setup.op == "stack"

    def run(self, batch):
        op, layouts = ("stack" if self.stack else "cat"), tuple(batch.input_layouts)
        inputs = [batch.input(k) for k in range(batch.num_inputs())]
        dense = [b.dense for b in inputs]
        if all(d is not None for d in dense) and len({tuple(d.shape) for d in dense}) == 1:
            try:
                axis = join_axis(op, dense[0].ndim - 1, batch.args, layouts)
            except ValueError as exc:
                raise SampleFailureError(0, str(exc)) from None
            return (stack_dense if self.stack else cat_dense)(dense, axis), None
        join = stack if self.stack else cat
        columns = [b.samples() for b in inputs]
        return each(zip(*columns, strict=True),
                    lambda *parts: join(list(parts), join_axis(op, parts[0].ndim, batch.args, layouts)))


@gpu_kernel("reshape")
def reshape_kernel(batch):
    first = batch.input(0)
    if first.dense is not None and not batch.per_sample_args:
        shape = reshape_shape(tuple(first.dense.shape[1:]), batch.args)
        return first.dense.reshape(len(first.dense), *shape), None
    return each(zip(first.samples(), batch.sample_args(), strict=True),
                lambda s, a: s.reshape(reshape_shape(tuple(s.shape), a)))


@gpu_kernel("transpose")
def transpose_kernel(batch):
    first = batch.input(0)
    perm = batch.args["perm"]
    if first.dense is not None:
        return transpose(first.dense, perm, True), None
    return each(((s,) for s in first.samples()), lambda s: transpose(s, perm, False))


@gpu_kernel("one_hot")
def one_hot_kernel(batch):
    first, layout = batch.input(0), _first_layout(batch)
    if first.dense is not None:
        return one_hot(first.dense, batch.args, True, layout), None
    return each(((s,) for s in first.samples()), lambda s: one_hot(s, batch.args, False, layout))


@gpu_kernel("pad")
def pad_kernel(batch):
    return pad(batch.samples(0), batch.sample_args(), _first_layout(batch))


def _first_layout(batch) -> str:
    """The layout of the batch's first input, '' where it has none."""
    layouts = tuple(batch.input_layouts)
    return layouts[0] if layouts else ""


@gpu_kernel("constant")
class ConstantKernel:
    """The CPU kernel's value, broadcast over the batch on the device once per batch size."""

    def __init__(self, setup):
        self.args = setup.args
        self._cache: dict[int, object] = {}

    def run(self, batch):
        cp = cupy()
        dense = self._cache.get(batch.size)
        if dense is None:
            value = np.asarray(get_cpu_kernel("constant")([], self.args, None))
            dense = cp.ascontiguousarray(cp.broadcast_to(cp.asarray(value), (batch.size, *value.shape)))
            self._cache = {batch.size: dense}
        return dense.copy(), None

