"""`headrace.math`, as `nvidia.dali.math`: element-wise functions of DataNodes with DALI's result types (FLOAT for a
function of integers such as sqrt; min, max, pow and clamp promote their operands as DALI's arithmetic does).

Each function builds a `math.unary`, `math.binary` or `math.clamp` node (see headrace.ops.math); an operand may be
a DataNode, a `types.Constant` or, beside a DataNode, a Python or numpy number."""

from __future__ import annotations

from typing import Any

from headrace.graph import DataNode, binary_function, clamp_function, unary_function

__all__ = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "clamp", "cos", "cosh",
           "exp", "fabs", "floor", "fpow", "log", "log10", "log2", "max", "min", "pow", "rsqrt", "sin", "sinh",
           "sqrt", "tan", "tanh"]


def sqrt(input: Any) -> DataNode:
    """Square root; FLOAT for integers."""
    return unary_function(input, "sqrt")


def rsqrt(input: Any) -> DataNode:
    """Reciprocal of the square root; FLOAT for integers."""
    return unary_function(input, "rsqrt")


def cbrt(input: Any) -> DataNode:
    """Cube root; FLOAT for integers."""
    return unary_function(input, "cbrt")


def exp(input: Any) -> DataNode:
    """e to the power of the input; FLOAT for integers."""
    return unary_function(input, "exp")


def log(input: Any) -> DataNode:
    """Natural logarithm; FLOAT for integers."""
    return unary_function(input, "log")


def log2(input: Any) -> DataNode:
    """Base-2 logarithm; FLOAT for integers."""
    return unary_function(input, "log2")


def log10(input: Any) -> DataNode:
    """Base-10 logarithm; FLOAT for integers."""
    return unary_function(input, "log10")


def abs(input: Any) -> DataNode:
    """Absolute value, in the input's type (as Python's `abs()` of a DataNode)."""
    return unary_function(input, "abs")


def fabs(input: Any) -> DataNode:
    """Absolute value as a float; FLOAT for integers."""
    return unary_function(input, "fabs")


def floor(input: Any) -> DataNode:
    """The largest integral value not above the input, as a float; FLOAT for integers."""
    return unary_function(input, "floor")


def ceil(input: Any) -> DataNode:
    """The smallest integral value not below the input, as a float; FLOAT for integers."""
    return unary_function(input, "ceil")


def sin(input: Any) -> DataNode:
    """Sine (radians); FLOAT for integers."""
    return unary_function(input, "sin")


def cos(input: Any) -> DataNode:
    """Cosine (radians); FLOAT for integers."""
    return unary_function(input, "cos")


def tan(input: Any) -> DataNode:
    """Tangent (radians); FLOAT for integers."""
    return unary_function(input, "tan")


def asin(input: Any) -> DataNode:
    """Arcsine, in radians; FLOAT for integers."""
    return unary_function(input, "asin")


def acos(input: Any) -> DataNode:
    """Arccosine, in radians; FLOAT for integers."""
    return unary_function(input, "acos")


def atan(input: Any) -> DataNode:
    """Arctangent, in radians; FLOAT for integers."""
    return unary_function(input, "atan")


def sinh(input: Any) -> DataNode:
    """Hyperbolic sine; FLOAT for integers."""
    return unary_function(input, "sinh")


def cosh(input: Any) -> DataNode:
    """Hyperbolic cosine; FLOAT for integers."""
    return unary_function(input, "cosh")


def tanh(input: Any) -> DataNode:
    """Hyperbolic tangent; FLOAT for integers."""
    return unary_function(input, "tanh")


def asinh(input: Any) -> DataNode:
    """Inverse hyperbolic sine; FLOAT for integers."""
    return unary_function(input, "asinh")


def acosh(input: Any) -> DataNode:
    """Inverse hyperbolic cosine; FLOAT for integers."""
    return unary_function(input, "acosh")


def atanh(input: Any) -> DataNode:
    """Inverse hyperbolic tangent; FLOAT for integers."""
    return unary_function(input, "atanh")


def min(left: Any, right: Any) -> DataNode:
    """Element-wise minimum, in the operands' common type (`left < right ? left : right`)."""
    return binary_function(left, right, "min")


def max(left: Any, right: Any) -> DataNode:
    """Element-wise maximum, in the operands' common type (`left > right ? left : right`)."""
    return binary_function(left, right, "max")


def pow(base: Any, exponent: Any) -> DataNode:
    """`base ** exponent` in the operands' common type (an integer to a negative power gives 0), as `**`."""
    return binary_function(base, exponent, "pow")


def fpow(base: Any, exponent: Any) -> DataNode:
    """`base ** exponent` computed in floating point: FLOAT unless an operand is FLOAT64."""
    return binary_function(base, exponent, "fpow")


def atan2(x: Any, y: Any) -> DataNode:
    """Arctangent of `x / y` in the quadrant of the signs, as C's atan2(x, y); FLOAT unless an operand is FLOAT64."""
    return binary_function(x, y, "atan2")


def clamp(value: Any, lo: Any, hi: Any) -> DataNode:
    """`value` limited to [lo, hi] (`min(max(value, lo), hi)`), in the common type of the three operands."""
    return clamp_function(value, lo, hi)
