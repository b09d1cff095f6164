"""CPU kernels of DataNode arithmetic, cast, constant and copy, with DALI's type rules."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


def _c_floordiv(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """DALI's `//`: integer division truncating toward zero (C), plain division for floats."""
    if left.dtype.kind == "f":
        return np.true_divide(left, right)
    return (left - np.fmod(left, right)) // right


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": _c_floordiv,
           "pow": np.power, "mod": np.fmod, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
           "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "bitand": np.bitwise_and,
           "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}
_UNARY = {"neg": np.negative, "pos": np.positive, "invert": np.invert, "abs": np.abs}
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_BOOL_OPS = ("mul", "bitand", "bitor", "bitxor", *_COMPARISONS)


def result_type(op: str, left: np.dtype, right: np.dtype) -> np.dtype:
    """The output type of `left op right`, by DALI's rules: comparisons give bool; `/` gives float32 unless an
    operand is float64; an integer with a float gives the float type; integers promote as in numpy except that a
    signed type with uint64 gives int64. Raises ValueError where DALI has no such operation."""
    left, right = np.dtype(left), np.dtype(right)
    kinds = {left.kind, right.kind}
    if kinds == {"b"} and op not in _BOOL_OPS:
        raise ValueError(f"'{op}' is not defined on two booleans (cast one operand first)")
    if op in ("bitand", "bitor", "bitxor") and "f" in kinds:
        raise ValueError(f"bitwise '{op}' needs integer or boolean operands, got {left} and {right}")
    if op in _COMPARISONS:
        return np.dtype(np.bool_)
    if op == "div":
        return np.dtype(np.float64) if np.float64 in (left, right) else np.dtype(np.float32)
    if "f" in kinds and kinds != {"f"}:
        return left if left.kind == "f" else right
    if np.dtype(np.uint64) in (left, right) and "i" in kinds:
        return np.dtype(np.int64)
    return np.result_type(left, right)


def operand_types(args: dict, tensors: list[np.dtype]) -> tuple[np.dtype, np.dtype]:
    """(left, right) element types of a math.binary node, given its input tensors' types."""
    if len(tensors) == 2:
        return np.dtype(tensors[0]), np.dtype(tensors[1])
    scalar = numpy_dtype(args["scalar_dtype"])
    return (scalar, np.dtype(tensors[0])) if args["scalar_on_left"] else (np.dtype(tensors[0]), scalar)


@cpu_kernel("math.binary")
def binary(inputs, args, ctx):
    op = args["op"]
    if len(inputs) == 2:
        left, right = np.asarray(inputs[0]), np.asarray(inputs[1])
    else:
        tensor = np.asarray(inputs[0])
        scalar = saturate_cast(np.asarray(args["scalar"]), numpy_dtype(args["scalar_dtype"]))
        left, right = (scalar, tensor) if args["scalar_on_left"] else (tensor, scalar)
    out_type = result_type(op, left.dtype, right.dtype)
    compute = out_type
    if out_type == np.bool_ and {left.dtype.kind, right.dtype.kind} != {"b"}:
        compute = result_type("add", left.dtype, right.dtype)  # compare in the common type
    if op in ("floordiv", "mod") and compute.kind in "iu" and np.any(right == 0):
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
    return saturate_cast(np.asarray(inputs[0]), numpy_dtype(args["dtype"]))


@cpu_kernel("constant")
def constant(inputs, args, ctx):
    integers = args.get("idata") is not None
    values = np.asarray(args["idata"] if integers else args["fdata"], dtype=np.int64 if integers else np.float64)
    shape = tuple(args["shape"]) or ((values.size,) if values.size > 1 else ())  # no shape: a flat list
    values = np.broadcast_to(values.reshape(()), shape) if values.size == 1 else values.reshape(shape)
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else np.dtype(
        np.int32 if integers else np.float32)
    return saturate_cast(values, dtype)


@cpu_kernel("copy")
def copy(inputs, args, ctx):
    return np.asarray(inputs[0])
