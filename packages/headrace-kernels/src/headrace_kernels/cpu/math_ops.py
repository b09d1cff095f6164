"""CPU kernels of DataNode arithmetic, cast, constant and copy, with DALI's type rules."""

from __future__ import annotations

import operator

import numpy as np

from headrace_kernels.cpu.geometry_ops import _numpy_dtype, _saturate
from headrace_kernels.registry import cpu_kernel

_BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": np.true_divide,
           "floordiv": np.floor_divide, "pow": np.power, "mod": np.mod, "eq": np.equal, "ne": np.not_equal,
           "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "bitand": np.bitwise_and,
           "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}
_UNARY = {"neg": np.negative, "pos": np.positive, "invert": np.invert, "abs": np.abs}


def result_type(op: str, left: np.dtype, right: np.dtype) -> np.dtype:
    """The output type of `left op right` (DALI's rules: comparisons give bool, `/` gives float32 unless an
    operand is float64, integer pairs promote as in numpy, int with float gives the float type)."""
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        return np.dtype(np.bool_)
    kinds = {left.kind, right.kind}
    if op == "div":
        return np.dtype(np.float64) if np.float64 in (left, right) else np.dtype(np.float32)
    if "f" in kinds and kinds != {"f"}:
        return left if left.kind == "f" else right
    return np.result_type(left, right)


def scalar_type(value: float, is_int: bool, other: np.dtype) -> np.dtype:
    """A Python scalar takes the tensor's type (weak typing) unless it is a float beside an integer tensor."""
    if is_int or other.kind == "f":
        return other if other != np.bool_ else np.dtype(np.int32)
    return np.dtype(np.float32)


@cpu_kernel("math.binary")
def binary(inputs, args, ctx):
    op = args["op"]
    if len(inputs) == 2:
        left, right = np.asarray(inputs[0]), np.asarray(inputs[1])
    else:
        tensor = np.asarray(inputs[0])
        scalar = np.asarray(args["scalar"], dtype=scalar_type(args["scalar"], args["scalar_is_int"], tensor.dtype))
        left, right = (scalar, tensor) if args["scalar_on_left"] else (tensor, scalar)
    out_type = result_type(op, left.dtype, right.dtype)
    compute = out_type if out_type != np.bool_ else np.result_type(left.dtype, right.dtype)
    if op in ("bitand", "bitor", "bitxor") and out_type.kind == "f":
        raise ValueError(f"bitwise '{op}' needs integer or boolean operands, got {left.dtype} and {right.dtype}")
    if op in ("floordiv", "mod") and out_type.kind in "iu" and np.any(right == 0):
        raise ValueError(f"integer '{op}' by zero")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = _BINARY[op](left.astype(compute, copy=False), right.astype(compute, copy=False))
    return np.asarray(result).astype(out_type, copy=False)


@cpu_kernel("math.unary")
def unary(inputs, args, ctx):
    value = np.asarray(inputs[0])
    if args["op"] == "invert" and value.dtype.kind == "f":
        raise ValueError(f"'~' needs an integer or boolean tensor, got {value.dtype}")
    return np.asarray(_UNARY[args["op"]](value))


@cpu_kernel("cast")
def cast(inputs, args, ctx):
    value = np.asarray(inputs[0])
    dtype = _numpy_dtype(args["dtype"])
    if value.dtype.kind == "f" and dtype.kind in "iu":
        return _saturate(value, dtype)  # round to nearest even, then saturate, as DALI's ConvertSat
    return value.astype(dtype)


@cpu_kernel("constant")
def constant(inputs, args, ctx):
    values = np.asarray(args["fdata"], dtype=np.float64)
    shape = tuple(args["shape"]) or ()
    values = values.reshape(shape) if values.size == int(np.prod(shape)) else np.broadcast_to(values, shape)
    return _saturate(values, _numpy_dtype(args["dtype"])) if _numpy_dtype(args["dtype"]).kind != "b" \
        else values.astype(bool)


@cpu_kernel("copy")
def copy(inputs, args, ctx):
    return np.asarray(inputs[0])
