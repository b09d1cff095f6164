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


def _minimum(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """DALI's `min`: `left < right ? left : right` (so a NaN on the left gives the right operand)."""
    return np.where(left < right, left, right)


def _maximum(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """DALI's `max`: `left > right ? left : right`."""
    return np.where(left > right, left, right)


def _power(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """`**` as DALI computes it: integers wrap, and an integer raised to a negative power gives 0."""
    if base.dtype.kind not in "iu":
        return np.power(base, exponent)
    negative = exponent < 0
    if not np.any(negative):
        return np.power(base, exponent)
    return np.where(negative, 0, np.power(base, np.where(negative, 0, exponent))).astype(base.dtype)


def shift_compute_type(out_type: np.dtype) -> np.dtype:
    """The type a shift is computed in: C's integer promotion of the result type (at least 32 bits)."""
    return np.dtype(np.int32) if out_type.itemsize < 4 else np.dtype(out_type)


def shifted(op: str, left, right, out_type: np.dtype, xp=np):
    """`left << right` or `left >> right` as DALI's CPU build computes it: in the promoted type, the count taken
    modulo that type's width (x86's rule), the result wrapped to `out_type`. `xp` is numpy or CuPy."""
    compute = shift_compute_type(out_type)
    count = xp.bitwise_and(right.astype(compute), compute.itemsize * 8 - 1)
    value = left.astype(compute)
    result = xp.left_shift(value, count) if op == "lshift" else xp.right_shift(value, count)
    return result.astype(out_type)


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": _c_floordiv,
           "pow": _power, "mod": np.fmod, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
           "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "bitand": np.bitwise_and,
           "bitor": np.bitwise_or, "bitxor": np.bitwise_xor, "min": _minimum, "max": _maximum, "fpow": np.power,
           "atan2": np.arctan2}
_UNARY = {"neg": np.negative, "pos": np.positive, "invert": np.invert, "abs": np.abs}
FLOAT_UNARY = {"sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "exp": np.exp, "log": np.log,
               "log2": np.log2, "log10": np.log10, "fabs": np.fabs, "floor": np.floor, "ceil": np.ceil,
               "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
               "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
               "acosh": np.arccosh, "atanh": np.arctanh}
"""The `headrace.math` functions of one operand computed in floating point (numpy's names differ from C's)."""
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_BITWISE = ("bitand", "bitor", "bitxor", "lshift", "rshift")
_BOOL_OPS = ("mul", *_BITWISE, *_COMPARISONS)
_FLOAT_RESULT = ("fpow", "atan2")


def result_type(op: str, left: np.dtype, right: np.dtype) -> np.dtype:
    """The output type of `left op right`, by DALI's rules: comparisons give bool; `/` gives float32 unless an
    operand is float64; an integer with a float gives the float type; integers promote as in numpy except that a
    signed type with uint64 gives int64. Raises ValueError where DALI has no such operation."""
    left, right = np.dtype(left), np.dtype(right)
    kinds = {left.kind, right.kind}
    if kinds == {"b"} and op not in _BOOL_OPS:
        raise ValueError(f"'{op}' is not defined on two booleans (cast one operand first)")
    if op in _BITWISE and "f" in kinds:
        raise ValueError(f"bitwise '{op}' needs integer or boolean operands, got {left} and {right}")
    if op in _COMPARISONS:
        return np.dtype(np.bool_)
    if op == "div":
        return np.dtype(np.float64) if np.float64 in (left, right) else np.dtype(np.float32)
    if op in _FLOAT_RESULT:
        common = result_type("add", left, right)
        return common if common.kind == "f" else np.dtype(np.float32)
    if "f" in kinds and kinds != {"f"}:
        return left if left.kind == "f" else right
    if np.dtype(np.uint64) in (left, right) and "i" in kinds:
        return np.dtype(np.int64)
    return np.result_type(left, right)


def unary_result_type(op: str, dtype: np.dtype) -> np.dtype:
    """The output type of a unary op, by DALI's rules: a math function gives the input's float type, FLOAT for an
    integer; `-`, `+`, `~` and `abs` keep the type. Raises ValueError where DALI has no such operation."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b" and op not in ("invert", "pos"):
        raise ValueError(f"'{op}' is not defined on booleans (cast the input first)")
    if op == "invert" and dtype.kind == "f":
        raise ValueError(f"'~' needs an integer or boolean tensor, got {dtype}")
    if op in FLOAT_UNARY:
        return dtype if dtype.kind == "f" else np.dtype(np.float32)
    return dtype


def clamp_result_type(value: np.dtype, lo: np.dtype, hi: np.dtype) -> np.dtype:
    """The output type of clamp(value, lo, hi): DALI's common type of the three (as `+` promotes them)."""
    types = [np.dtype(t) for t in (value, lo, hi)]
    if all(t.kind == "b" for t in types):
        raise ValueError("clamp is not defined on booleans (cast the input first)")
    common = types[0]
    for other in types[1:]:
        common = result_type("max", common, other) if {common.kind, other.kind} != {"b"} else common
    return common


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
    if op in ("lshift", "rshift"):
        return np.asarray(shifted(op, left, right, out_type))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = _BINARY[op](left.astype(compute, copy=False), right.astype(compute, copy=False))
    return np.asarray(result).astype(out_type, copy=False)


@cpu_kernel("math.unary")
def unary(inputs, args, ctx):
    value = np.asarray(inputs[0])
    op = args["op"]
    out_type = unary_result_type(op, value.dtype)
    if op in FLOAT_UNARY:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.asarray(FLOAT_UNARY[op](value.astype(out_type, copy=False))).astype(out_type, copy=False)
    return np.asarray(_UNARY[op](value))


@cpu_kernel("math.clamp")
def clamp(inputs, args, ctx):
    value, lo, hi = (np.asarray(i) for i in inputs)
    out_type = clamp_result_type(value.dtype, lo.dtype, hi.dtype)
    value, lo, hi = (a.astype(out_type, copy=False) for a in (value, lo, hi))
    raised = np.where(value < lo, lo, value)  # std::max(value, lo): a NaN value stays
    return np.asarray(np.where(hi < raised, hi, raised))  # std::min(raised, hi)


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
