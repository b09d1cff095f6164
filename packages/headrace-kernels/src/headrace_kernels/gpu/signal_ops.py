"""GPU preemphasis_filter, slice and normalize (kernels/signal.cu: one launch per batch over samples of any
sizes, the CPU kernels' windows, plans and arithmetic), normalize's statistics through the segmented reductions of
kernels/reduce.cu, nonsilent_region on the host (as DALI's GPU operator: its sequential float32 running sum decides
the result), and shapes."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.signal_ops import (
    SampleValueError,
    check_preemphasis_input,
    given_inverse_stddev,
    inverse_stddev,
    nonsilent_region_of,
    normalize_plan,
    preemphasis_work_type,
    slice_output_type,
    slice_window,
)
from headrace_kernels.dtypes import dali_number, numpy_dtype
from headrace_kernels.gpu.math_ops import cast_array
from headrace_kernels.gpu.packing import Outputs, blocks, per_sample, upload
from headrace_kernels.gpu.runtime import cupy, module
from headrace_kernels.gpu.tensor_ops import reduce
from headrace_kernels.registry import SampleFailureError, gpu_kernel

MAXD = 8
PREEMPHASIS = np.dtype([("in", "<u8"), ("out", "<u8"), ("size", "<i8"), ("coeff", "<f4"), ("border", "<i4")],
                       align=True)
SLICE = np.dtype([("in", "<u8"), ("out", "<u8"), ("size", "<i8"), ("ndim", "<i4"), ("policy", "<i4"),
                  ("in_type", "<i4"), ("out_type", "<i4"), ("channel_axis", "<i4"), ("fill_first", "<i4"),
                  ("in_shape", "<i8", (MAXD,)), ("out_shape", "<i8", (MAXD,)), ("anchor", "<i8", (MAXD,))],
                 align=True)
NORMALIZE = np.dtype([("in", "<u8"), ("out", "<u8"), ("mean", "<u8"), ("inv", "<u8"), ("size", "<i8"),
                      ("ndim", "<i4"), ("pad", "<i4"), ("shape", "<i8", (MAXD,)), ("mean_stride", "<i8", (MAXD,)),
                      ("inv_stride", "<i8", (MAXD,))], align=True)
assert (PREEMPHASIS.itemsize, SLICE.itemsize, NORMALIZE.itemsize) == (32, 240, 240), \
    (PREEMPHASIS.itemsize, SLICE.itemsize, NORMALIZE.itemsize)  # laid out as the C structs
_EXPRESSIONS = ("preemphasis<float>", "preemphasis<double>", "slice_any", "normalize_apply<float>",
                "normalize_apply<double>")
_BORDERS = {"zero": 0, "clamp": 1, "reflect": 2}
_POLICIES = {"inside": 0, "pad": 1, "edge": 2, "reflect": 3, "reflect_101": 4, "wrap": 5}
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_MEAN, _SUM, _VARIANCE = "reductions.mean", "reductions.sum", "reductions.variance"


def _grid(sizes, count: int) -> tuple[int, int]:
    """(blocks per sample, samples) of a grid-stride launch of 256 threads a block."""
    return min(blocks(int(max(sizes, default=0)), 256), 4096), count


def _one_type(samples: list, op: str) -> np.dtype:
    types = {np.dtype(s.dtype) for s in samples}
    if len(types) > 1:
        raise SampleFailureError(0, f"{op} on the GPU needs one element type per batch, got "
                                    f"{sorted(t.name for t in types)}")
    return types.pop() if types else np.dtype(np.float32)


def _converted(result, dtype: np.dtype):
    """A kernel's (dense, list) result cast to `dtype` as the CPU's saturate_cast (kernels/cast.cu)."""
    dense, listed = result
    if dense is not None:
        return (dense if dense.dtype == dtype else cast_array(dense, dtype)), None
    return None, [s if s.dtype == dtype else cast_array(s, dtype) for s in listed]


# preemphasis_filter

def preemphasis(samples: list, args_list: list[dict]):
    """preemphasis_filter of every sample, with its own coefficient; returns (dense or None, list)."""
    cp = cupy()
    if not samples:
        return None, []
    source = _one_type(samples, "preemphasis_filter")
    per_sample(0, check_preemphasis_input, source)
    work = preemphasis_work_type(source)
    out_dtype = numpy_dtype(args_list[0]["dtype"])
    data = [cp.ascontiguousarray(s).astype(work, copy=False) for s in samples]
    rec = np.zeros(len(data), PREEMPHASIS)
    rec["size"] = [s.size for s in data]
    rec["coeff"] = [np.float32(a["preemph_coeff"]) for a in args_list]
    rec["border"] = [_BORDERS[a["border"]] for a in args_list]
    outputs = Outputs([s.shape for s in data], work)
    rec["in"] = [s.data.ptr for s in data]
    rec["out"] = outputs.pointers
    if rec["size"].max() > 0:
        kernel = module("signal.cu", _EXPRESSIONS).get_function(f"preemphasis<{_CTYPE[work]}>")
        kernel(_grid(rec["size"], len(data)), (256,), (upload(rec),))
    dense, listed = _converted(outputs.result(), out_dtype)
    copies = [i for i, c in enumerate(rec["coeff"]) if c == 0]
    if copies:  # DALI converts the input as it is where the coefficient is 0
        listed = list(dense) if listed is None else list(listed)
        for i in copies:
            listed[i] = cast_array(cp.ascontiguousarray(samples[i]), out_dtype)
        dense = None
    return dense, listed


@gpu_kernel("preemphasis_filter")
def preemphasis_kernel(batch):
    return preemphasis(batch.samples(), batch.sample_args())


# nonsilent_region

def _host_samples(batch, k: int) -> list[np.ndarray]:
    """Input k's samples on the host (a CPU input as it is, a GPU one copied)."""
    value = batch.value(k)
    if isinstance(value, list | tuple):
        return [np.asarray(v) for v in value]
    cp = cupy()
    return [cp.asnumpy(s) for s in value.samples()]


@gpu_kernel("nonsilent_region")
def nonsilent_region_kernel(batch):
    """Both outputs, (begin, length) per sample, as int32 GPU scalars: one result per output."""
    cp = cupy()
    regions = [per_sample(i, nonsilent_region_of, signal, args)
               for i, (signal, args) in enumerate(zip(_host_samples(batch, 0), batch.sample_args(), strict=True))]
    found = np.array(regions, dtype=np.int32).reshape(len(regions), 2)
    return (cp.asarray(found[:, 0]), None), (cp.asarray(found[:, 1]), None)


# slice

def slice_batch(samples: list, args_list: list[dict], anchors: list | None, extents: list | None):
    """slice of every sample (the CPU kernel's windows and conversions); returns (dense or None, list)."""
    cp = cupy()
    if not samples:
        return None, []
    source = _one_type(samples, "slice")
    out_dtype = slice_output_type(source, args_list[0])
    data = [cp.ascontiguousarray(s) for s in samples]
    n = len(data)
    rec = np.zeros(n, SLICE)
    fills: list[np.ndarray] = []
    fill_count = 0
    shapes = []
    for i, (sample, args) in enumerate(zip(data, args_list, strict=True)):
        if sample.ndim > MAXD:
            raise SampleFailureError(i, f"slice on the GPU takes samples of up to {MAXD} dimensions, got shape "
                                        f"{tuple(sample.shape)}")
        anchor, extent = (anchors[i], extents[i]) if anchors is not None else (None, None)
        window = per_sample(i, slice_window, tuple(sample.shape), args, anchor, extent, out_dtype)
        rec["ndim"][i], rec["policy"][i] = sample.ndim, _POLICIES[window.policy]
        rec["in_shape"][i, :sample.ndim] = sample.shape
        rec["out_shape"][i, :sample.ndim] = window.shape
        rec["anchor"][i, :sample.ndim] = window.anchor
        rec["size"][i] = math.prod(window.shape)
        rec["channel_axis"][i], rec["fill_first"][i] = window.channel_axis, fill_count
        fills.append(window.fill)
        fill_count += window.fill.size
        shapes.append(window.shape)
    rec["in_type"] = dali_number(source)
    rec["out_type"] = -1 if out_dtype == source else dali_number(out_dtype)
    outputs = Outputs(shapes, out_dtype)
    rec["in"] = [s.data.ptr for s in data]
    rec["out"] = outputs.pointers
    if rec["size"].max() > 0:
        fill_bytes = cp.asarray(np.ascontiguousarray(np.concatenate(fills).astype(out_dtype)).view(np.uint8))
        kernel = module("signal.cu", _EXPRESSIONS).get_function("slice_any")
        kernel(_grid(rec["size"], n), (256,), (upload(rec), fill_bytes))
    return outputs.result()


@gpu_kernel("slice")
def slice_kernel(batch):
    if batch.num_inputs() == 2:
        raise SampleFailureError(0, "give both positional inputs, anchor and shape, or neither")
    anchors = extents = None
    if batch.num_inputs() == 3:  # the window's inputs are read on the host, as DALI prefers them
        anchors, extents = _host_samples(batch, 1), _host_samples(batch, 2)
    return slice_batch(batch.samples(0), batch.sample_args(), anchors, extents)


# normalize

def _reduce_args(axes: tuple[int, ...]) -> dict:
    return {"axes": list(axes), "axis_names": None, "keep_dims": True, "ddof": 0, "dtype": dali_number(np.float64)}


def _each(result) -> list:
    dense, listed = result
    return list(dense) if dense is not None else listed


def _strides(param, shape: tuple[int, ...]) -> list[int]:
    """Element strides of a contiguous parameter over a sample of `shape`: 0 where it broadcasts."""
    if param.size == 1:
        return [0] * len(shape)
    strides = [s // param.itemsize for s in param.strides]
    return [0 if p == 1 else s for p, s in zip(param.shape, strides, strict=True)]


def normalize(samples: list, batch_args: list[dict]):
    """normalize of the batch (the CPU kernel's plan; statistics summed in float64 by kernels/reduce.cu)."""
    cp = cupy()
    if not samples:
        return None, []
    source = _one_type(samples, "normalize")
    if source.kind not in "iuf":
        raise SampleFailureError(0, f"normalize takes numeric samples, got {source}")
    work = np.dtype(np.float64) if source == np.float64 else np.dtype(np.float32)
    data = [cp.ascontiguousarray(s).astype(work, copy=False) for s in samples]
    try:
        plan = normalize_plan([tuple(s.shape) for s in data], batch_args)
    except SampleValueError as exc:
        raise SampleFailureError(exc.index, str(exc)) from None
    except ValueError as exc:
        raise SampleFailureError(0, str(exc)) from None
    args, axes, n = batch_args[0], plan.axes, len(data)
    counts = [math.prod(s.shape[a] for a in axes) for s in data]
    full = [i for i in range(n) if data[i].size]  # empty samples give empty outputs, with no statistics
    reduce_args = _reduce_args(axes)
    if _stacks(plan, full, n):
        means, invs = _stacked_statistics(cp, data, counts, reduce_args, args, work)
        return _apply(cp, data, means, invs, args, work)
    means: list = [None if m is None else cp.asarray(m, dtype=np.float32) for m in plan.means]
    if means[0] is None:
        if plan.batch:
            total = sum(_each(reduce(_SUM, [data[i] for i in full], reduce_args)), cp.zeros(plan.param_shapes[0]))
            means = [(total / max(sum(counts), 1)).astype(np.float32)] * n
        else:
            computed = dict(zip(full, _each(reduce(_MEAN, [data[i] for i in full], reduce_args)), strict=True))
            means = [computed[i].astype(np.float32) if i in computed else
                     cp.zeros(plan.param_shapes[i], dtype=np.float32) for i in range(n)]
    if plan.stddevs[0] is not None:
        invs = [cp.asarray(given_inverse_stddev(s, args)) for s in plan.stddevs]
    else:
        centred = [cp.ascontiguousarray(cp.broadcast_to(means[i].astype(np.float64), plan.param_shapes[i]))
                   for i in full]  # one mean per output of the reduction, as reduce() takes them
        variances = dict(zip(full, _each(reduce(_VARIANCE, [data[i] for i in full], reduce_args, centred)),
                             strict=True))
        squares = [variances[i] * counts[i] if i in variances else cp.zeros(plan.param_shapes[i]) for i in range(n)]
        if plan.batch:
            invs = [inverse_stddev(cp, sum(squares), sum(counts), args).astype(np.float32)] * n
        else:
            invs = [inverse_stddev(cp, q, c, args).astype(np.float32) for q, c in zip(squares, counts, strict=True)]
    means = [cp.ascontiguousarray(m.astype(work, copy=False)) for m in means]
    invs = [cp.ascontiguousarray(v.astype(work, copy=False)) for v in invs]
    return _apply(cp, data, means, invs, args, work)


def _stacks(plan, full: list[int], n: int) -> bool:
    """Whether each sample's statistics are computed from it alone and have one shape, so the batch's can be
    stacked and derived in a few whole-batch operations (the ASR features: every sample (64, frames_i), axes [1])."""
    return (not plan.batch and len(full) == n and plan.means[0] is None and plan.stddevs[0] is None
            and len(set(plan.param_shapes)) == 1)


def _stacked(cp, result) -> object:
    dense, listed = result
    return dense if dense is not None else cp.stack(listed)


def _stacked_statistics(cp, data: list, counts: list[int], reduce_args: dict, args: dict, work: np.dtype):
    """Each sample's mean and inverse standard deviation as views of two (N, ...) arrays: the same float64 steps as
    the per-sample path (`inverse_stddev`), elementwise over the batch, so the results are the same bits."""
    means = _stacked(cp, reduce(_MEAN, data, reduce_args)).astype(np.float32)
    centred = cp.ascontiguousarray(means.astype(np.float64))
    variances = _stacked(cp, reduce(_VARIANCE, data, reduce_args, [centred[i] for i in range(len(data))]))
    count = cp.asarray(np.asarray(counts, np.float64).reshape(-1, *([1] * (variances.ndim - 1))))
    scale, epsilon, ddof = float(args["scale"]), float(args["epsilon"]), int(args["ddof"])
    squares = variances * count
    enough = count > ddof
    variance = cp.where(enough, squares / cp.where(enough, count - ddof, 1.0) + epsilon, squares * 0.0 + epsilon)
    positive = variance > 0
    invs = cp.where(positive, scale / cp.sqrt(cp.where(positive, variance, 1.0)), 0.0).astype(np.float32)
    means = cp.ascontiguousarray(means.astype(work, copy=False))
    invs = cp.ascontiguousarray(invs.astype(work, copy=False))
    return [means[i] for i in range(len(data))], [invs[i] for i in range(len(data))]


def _apply(cp, data: list, means: list, invs: list, args: dict, work: np.dtype):
    """(x - mean) * inverse stddev + shift of every sample in one launch (kernels/signal.cu normalize_apply)."""
    n = len(data)
    rec = np.zeros(n, NORMALIZE)
    for i, sample in enumerate(data):
        rec["ndim"][i], rec["size"][i] = sample.ndim, sample.size
        rec["shape"][i, :sample.ndim] = sample.shape
        rec["mean_stride"][i, :sample.ndim] = _strides(means[i], sample.shape)
        rec["inv_stride"][i, :sample.ndim] = _strides(invs[i], sample.shape)
    outputs = Outputs([s.shape for s in data], work)
    rec["in"] = [s.data.ptr for s in data]
    rec["out"] = outputs.pointers
    rec["mean"] = [m.data.ptr for m in means]
    rec["inv"] = [v.data.ptr for v in invs]
    if rec["size"].max() > 0:
        kernel = module("signal.cu", _EXPRESSIONS).get_function(f"normalize_apply<{_CTYPE[work]}>")
        kernel(_grid(rec["size"], n), (256,), (upload(rec), work.type(args["shift"])))
    return _converted(outputs.result(), numpy_dtype(args["dtype"]))


@gpu_kernel("normalize")
def normalize_kernel(batch):
    return normalize(batch.samples(), batch.sample_args())


# shapes

@gpu_kernel("shapes")
def shapes_kernel(batch):
    """The samples' shapes (read without touching their data), as a GPU tensor per sample."""
    cp = cupy()
    value = batch.value(0)
    found = [np.shape(v) for v in value] if isinstance(value, list | tuple) else \
        [tuple(s.shape) for s in value.samples()]
    dtype = numpy_dtype(batch.args["dtype"])
    ndims = {len(s) for s in found}
    if len(ndims) == 1:
        table = saturate_cast(np.array(found, dtype=np.int64).reshape(len(found), ndims.pop()), dtype)
        return cp.asarray(table), None
    return None, [cp.asarray(saturate_cast(np.array(s, dtype=np.int64), dtype)) for s in found]
