"""GPU expand_dims, squeeze, reinterpret (views of the device arrays), cast_like (kernels/cast.cu), element_extract
(slices) and lookup_table (the CPU kernel's table, uploaded, one gather per batch). The CPU kernels' shape rules,
checks and messages."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.shaping_ops import (
    check_layout,
    check_lookup_input,
    expanded_shape,
    extract_indices,
    lookup_table_array,
    reinterpret_checks,
    reinterpreted_shape,
    squeeze_axes,
    squeezed_shape,
)
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.gpu.math_ops import cast_array
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import SampleFailureError, gpu_kernel


def _each(samples: list, args_list: list[dict], call) -> list:
    return [per_sample(i, call, s, a) for i, (s, a) in enumerate(zip(samples, args_list, strict=True))]


@gpu_kernel("expand_dims")
def expand_dims_kernel(batch):
    """Each sample reshaped with its new unit axes."""
    return _each(batch.samples(), batch.sample_args(),
                 lambda s, a: s.reshape(expanded_shape(tuple(s.shape), a["axes"], a["new_axis_names"])))


@gpu_kernel("squeeze")
def squeeze_kernel(batch):
    """Each sample reshaped without the squeezed axes."""
    return _each(batch.samples(), batch.sample_args(),
                 lambda s, a: s.reshape(squeezed_shape(tuple(s.shape), squeeze_axes(a, s.ndim))))


def _reinterpret(sample, args: dict, shape_input):
    cp = cupy()
    data = cp.ascontiguousarray(sample)
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else np.dtype(data.dtype)
    shape = reinterpreted_shape(tuple(data.shape), data.dtype.itemsize, dtype.itemsize, args, shape_input)
    check_layout(args.get("layout"), len(shape))
    return data.reshape(-1).view(dtype).reshape(shape) if data.size else cp.empty(shape, dtype)


@gpu_kernel("reinterpret")
def reinterpret_kernel(batch):
    """Each sample's bytes seen in the new type and shape (a second input of extents is read on the host)."""
    args_list = batch.sample_args()
    for i, args in enumerate(args_list):
        per_sample(i, reinterpret_checks, args, batch.num_inputs())
    shapes = [None] * batch.size
    if batch.num_inputs() > 1:
        shapes = [cupy().asnumpy(s).ravel().tolist() for s in batch.samples(1)]
    return [per_sample(i, _reinterpret, s, a, shapes[i])
            for i, (s, a) in enumerate(zip(batch.samples(0), args_list, strict=True))]


@gpu_kernel("cast_like")
def cast_like_kernel(batch):
    """The first input converted to the second's element type, in one launch when the batch is dense."""
    first, second = batch.input(0), batch.samples(1)
    if not second:
        return None, []
    dtype = np.dtype(second[0].dtype)
    if any(np.dtype(s.dtype) != dtype for s in second):
        raise SampleFailureError(0, "cast_like on the GPU needs one element type in the second input's batch")
    if first.dense is not None:
        return cast_array(first.dense, dtype), None
    return None, [cast_array(s, dtype) for s in first.samples()]


@gpu_kernel("element_extract")
class ElementExtract:
    """Each sequence's chosen elements, one output batch per entry of `element_map`."""

    def __init__(self, setup):
        self.element_map = list(setup.args["element_map"])

    def run(self, batch):
        samples = batch.samples()
        for i, s in enumerate(samples):
            per_sample(i, extract_indices, s.shape[0] if s.ndim else 0, tuple(s.shape), self.element_map)
        outs = [[s[k].copy() for s in samples] for k in self.element_map]
        return tuple(outs) if len(outs) > 1 else outs[0]


@gpu_kernel("lookup_table")
def lookup_table_kernel(batch):
    """One gather through the uploaded table per sample (per batch when dense); out-of-table inputs get the
    default value."""
    cp = cupy()
    table, default, dtype = lookup_table_array(batch.args)
    device_table = cp.asarray(table if len(table) else np.array([default], dtype))
    size = len(table)

    def look_up(data):
        check_lookup_input(np.dtype(data.dtype))
        inside = (data >= 0) & (data < size)
        picked = device_table[cp.where(inside, data, 0).astype(cp.int64)]
        return cp.where(inside, picked, cp.asarray(default, dtype=dtype)).astype(dtype, copy=False)

    first = batch.input(0)
    if first.dense is not None:
        return per_sample(0, look_up, first.dense), None
    return None, [per_sample(i, look_up, s) for i, s in enumerate(first.samples())]
