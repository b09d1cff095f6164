"""GPU cast (kernels/cast.cu), DataNode arithmetic (CuPy's element-wise kernels, with the CPU kernel's type rules)
and constant. A batch is a list of device arrays, or one dense (N, ...) array, processed in one launch."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.math_ops import clamp_result_type, result_type, shifted, unary_result_type
from headrace_kernels.dtypes import dali_number, numpy_dtype
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy, module
from headrace_kernels.registry import gpu_kernel

_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "floordiv": "floor_divide",
           "pow": "power", "mod": "fmod", "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
           "gt": "greater", "ge": "greater_equal", "bitand": "bitwise_and", "bitor": "bitwise_or",
           "bitxor": "bitwise_xor", "fpow": "power", "atan2": "arctan2"}
_UNARY = {"neg": "negative", "pos": "positive", "invert": "invert", "abs": "abs", "sqrt": "sqrt", "cbrt": "cbrt",
          "exp": "exp", "log": "log", "log2": "log2", "log10": "log10", "fabs": "fabs", "floor": "floor",
          "ceil": "ceil", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin", "acos": "arccos",
          "atan": "arctan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "arcsinh",
          "acosh": "arccosh", "atanh": "arctanh"}


def cast_array(array, dtype: np.dtype):
    """`array` converted to `dtype` by kernels/cast.cu (float to integer: round half away from zero, saturate)."""
    cp = cupy()
    dtype = np.dtype(dtype)
    source = cp.ascontiguousarray(array)
    out = cp.empty(source.shape, dtype=dtype)
    n = source.size
    if n:
        kernel = module("cast.cu").get_function("cast_any")
        blocks = min(max(1, -(-n // 256)), 65535 * 4)
        kernel((blocks,), (256,), (source, np.int32(dali_number(source.dtype)), out, np.int32(dali_number(dtype)),
                                   np.uint64(n)))
    return out


def cast(batch: list | object, dense: bool, dtype_code: int):
    dtype = numpy_dtype(dtype_code)
    if dense:
        return cast_array(batch, dtype)
    return [cast_array(sample, dtype) for sample in batch]


def binary(left, right, args: dict):
    """One sample (or a dense batch, with per-sample numpy broadcasting preserved by the caller), by the CPU
    kernel's rules: the scalar in its `scalar_dtype`, comparisons in the common type, `//` and `%` as in C."""
    cp = cupy()
    op = args["op"]
    if right is None:
        scalar = cp.asarray(saturate_cast(np.asarray(args["scalar"]), numpy_dtype(args["scalar_dtype"])))
        left, right = (scalar, left) if args["scalar_on_left"] else (left, scalar)
    left_type, right_type = np.dtype(left.dtype), np.dtype(right.dtype)
    out_type = result_type(op, left_type, right_type)
    compute = out_type
    if out_type == np.bool_ and {left_type.kind, right_type.kind} != {"b"}:
        compute = result_type("add", left_type, right_type)  # compare in the common type
    if op in ("floordiv", "mod") and compute.kind in "iu" and bool(cp.any(right == 0)):
        raise ValueError(f"integer '{op}' by zero")
    if op in ("lshift", "rshift"):
        return shifted(op, left, right, out_type, xp=cp)
    a, b = left.astype(compute, copy=False), right.astype(compute, copy=False)
    if op == "floordiv":
        result = cp.true_divide(a, b) if compute.kind == "f" else (a - cp.fmod(a, b)) // b
    elif op == "mod":
        result = cp.fmod(a, b)
    elif op == "min":
        result = cp.where(a < b, a, b)
    elif op == "max":
        result = cp.where(a > b, a, b)
    elif op == "pow" and compute.kind in "iu":  # a negative integer exponent gives 0, as in DALI
        negative, zero = b < 0, cp.zeros((), dtype=compute)
        result = cp.where(negative, zero, cp.power(a, cp.where(negative, zero, b)))
    else:
        result = getattr(cp, _BINARY[op])(a, b)
    return result.astype(out_type, copy=False)


def unary(value, args: dict):
    """One sample or a dense batch, by the CPU kernel's type rules (a math function of integers in float32)."""
    cp = cupy()
    op = args["op"]
    out_type = unary_result_type(op, np.dtype(value.dtype))
    value = value.astype(out_type, copy=False)
    if op == "rsqrt":
        return (1 / cp.sqrt(value)).astype(out_type, copy=False)
    return getattr(cp, _UNARY[op])(value).astype(out_type, copy=False)


def clamp(value, lo, hi):
    """One sample: std::min(std::max(value, lo), hi) in the common type, as the CPU kernel."""
    cp = cupy()
    out_type = clamp_result_type(np.dtype(value.dtype), np.dtype(lo.dtype), np.dtype(hi.dtype))
    value, lo, hi = (a.astype(out_type, copy=False) for a in (value, lo, hi))
    raised = cp.where(value < lo, lo, value)
    return cp.where(hi < raised, hi, raised)


# The registered kernels: one launch over a dense batch, else one per sample.
@gpu_kernel("cast")
def cast_kernel(batch):
    first = batch.input(0)
    if first.dense is not None:
        return cast(first.dense, True, batch.args["dtype"]), None
    return cast(first.samples(), False, batch.args["dtype"])


@gpu_kernel("math.unary")
def unary_kernel(batch):
    first = batch.input(0)
    if first.dense is not None:
        return unary(first.dense, batch.args), None
    return [unary(s, batch.args) for s in first.samples()]


@gpu_kernel("math.clamp")
def clamp_kernel(batch):
    operands = [batch.samples(k) for k in range(3)]
    return [per_sample(i, clamp, *values) for i, values in enumerate(zip(*operands, strict=True))]


@gpu_kernel("math.binary")
def binary_kernel(batch):
    first = batch.input(0)
    second = batch.input(1) if batch.num_inputs() > 1 else None
    if first.dense is not None and (second is None or (second.dense is not None and
                                                       second.dense.shape == first.dense.shape)):
        return binary(first.dense, None if second is None else second.dense, batch.args), None
    left = first.samples()
    right = second.samples() if second is not None else [None] * len(left)
    return [binary(a, b, batch.args) for a, b in zip(left, right, strict=True)]
