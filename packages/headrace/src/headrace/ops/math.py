"""Schemas of the element-wise ops behind DataNode arithmetic, and `cast`."""

from headrace.enums import DALIDataType
from headrace.output_specs import keeps_layout_with_dtype_arg
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "pow", "mod", "eq", "ne", "lt", "le", "gt", "ge",
              "bitand", "bitor", "bitxor", "lshift", "rshift", "min", "max", "fpow", "atan2")
FLOAT_FUNCTIONS = ("sqrt", "rsqrt", "cbrt", "exp", "log", "log2", "log10", "fabs", "floor", "ceil", "sin", "cos",
                   "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh")
"""The unary functions of `headrace.math` whose result is floating point (FLOAT for an integer input)."""
UNARY_OPS = ("neg", "pos", "invert", "abs", *FLOAT_FUNCTIONS)


def _binary(a: SpecArgs) -> list[OutputSpec]:
    """The element-wise result: DALI's result type of the operands, the inputs' first known layout, extents unknown."""
    from headrace_kernels.cpu.math_ops import operand_types, result_type

    layout = next((i.layout for i in a.inputs if i.layout), None)
    if any(i.dtype is None for i in a.inputs):
        return [OutputSpec(None, layout)]
    try:
        dtype = result_type(a.args["op"], *operand_types(a.args, [i.dtype for i in a.inputs]))
    except ValueError:  # no such operation on these types: the kernel says so when it runs
        dtype = None
    return [OutputSpec(dtype, layout)]


def _unary(a: SpecArgs) -> list[OutputSpec]:
    """The element-wise result: the input's layout and dims; DALI's type (FLOAT for a math function of integers)."""
    from headrace_kernels.cpu.math_ops import unary_result_type

    first = a.first
    try:
        dtype = None if first.dtype is None else unary_result_type(a.args["op"], first.dtype)
    except ValueError:  # e.g. a math function of booleans: the kernel says so when it runs
        dtype = None
    return [OutputSpec(dtype, first.layout, first.dims)]


def _clamped(a: SpecArgs) -> list[OutputSpec]:
    """The value clamped: DALI's common type of the three operands, the value's layout (and dims with scalar bounds)."""
    from headrace_kernels.cpu.math_ops import clamp_result_type

    value = a.first
    scalar_bounds = all(i.dims == () for i in a.inputs[1:])
    dims = value.dims if scalar_bounds else None
    layout = value.layout if scalar_bounds else next((i.layout for i in a.inputs if i.layout), None)
    if any(i.dtype is None for i in a.inputs):
        return [OutputSpec(None, layout, dims)]
    try:
        dtype = clamp_result_type(*(i.dtype for i in a.inputs))
    except ValueError:
        dtype = None
    return [OutputSpec(dtype, layout, dims)]


register(OpSchema(
    name="math.binary",
    doc="An element-wise binary op on two tensors, or a tensor and a scalar (numpy broadcasting per sample), with "
        "DALI's types: a Python int is INT32, a Python float FLOAT, a numpy scalar keeps its type; mixed integers "
        "promote as in numpy (but a signed type with UINT64 gives INT64); an integer with a float gives the float; "
        "`/` gives FLOAT (FLOAT64 with a FLOAT64 operand); comparisons give BOOL. As in DALI (C semantics) `//` "
        "truncates integers and divides floats exactly, `%` takes the dividend's sign; on two BOOLs only `*`, "
        "`&`, `|`, `^`, `<<`, `>>` and comparisons are defined. `<<` and `>>` take integers (the shift count "
        "taken modulo the width of the promoted type, as DALI's CPU build does); `min`/`max` give the first "
        "operand where the comparison fails (NaN); `fpow` and `atan2` give floats; an integer `**` with a negative "
        "exponent gives 0.",
    args=(Arg("op", "str", REQUIRED, "The operation.", choices=BINARY_OPS),
          Arg("scalar", "float", None, "The scalar operand when there is only one input tensor."),
          Arg("scalar_dtype", "dtype", DALIDataType.INT32, "The scalar's type (INT32 for a Python int, FLOAT for a "
              "Python float, a numpy scalar's own type)."),
          Arg("scalar_on_left", "bool", False, "Whether the scalar is the left operand.")),
    min_inputs=1, max_inputs=2, devices=("cpu", "gpu"),
    state="none", output_spec=_binary,
))

register(OpSchema(
    name="math.unary",
    doc="An element-wise unary op: `-`, `+`, `~`, `abs` (the input's type), or a `headrace.math` function "
        "(FLOAT for an integer input, the input's type for a float one; not defined on booleans).",
    args=(Arg("op", "str", REQUIRED, "The operation.", choices=UNARY_OPS),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_unary,
))

register(OpSchema(
    name="math.clamp",
    doc="`headrace.math.clamp(value, lo, hi)`: element-wise `min(max(value, lo), hi)` (numpy broadcasting per "
        "sample), in DALI's common type of the three operands; a NaN value stays NaN, a NaN bound is ignored.",
    min_inputs=3, max_inputs=3, devices=("cpu", "gpu"),
    state="none", output_spec=_clamped,
))

register(OpSchema(
    name="cast",
    doc="Converts the element type like DALI: float to integer rounds half away from zero and saturates (NaN gives "
        "0), integer to integer saturates, anything to BOOL is `!= 0`.",
    args=(Arg("dtype", "dtype", REQUIRED, "The element type of the output."),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg,
))
