"""Schemas of the element-wise ops behind DataNode arithmetic, and `cast`."""

from headrace.enums import DALIDataType
from headrace.output_specs import keeps_layout_with_dtype_arg, same_as_input
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "pow", "mod", "eq", "ne", "lt", "le", "gt", "ge",
              "bitand", "bitor", "bitxor")
UNARY_OPS = ("neg", "pos", "invert", "abs")

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


register(OpSchema(
    name="math.binary",
    doc="An element-wise binary op on two tensors, or a tensor and a scalar (numpy broadcasting per sample), with "
        "DALI's types: a Python int is INT32, a Python float FLOAT, a numpy scalar keeps its type; mixed integers "
        "promote as in numpy (but a signed type with UINT64 gives INT64); an integer with a float gives the float; "
        "`/` gives FLOAT (FLOAT64 with a FLOAT64 operand); comparisons give BOOL. As in DALI (C semantics) `//` "
        "truncates integers and divides floats exactly, `%` takes the dividend's sign; on two BOOLs only `*`, "
        "`&`, `|`, `^` and comparisons are defined.",
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
    doc="An element-wise unary op.",
    args=(Arg("op", "str", REQUIRED, "The operation.", choices=UNARY_OPS),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=same_as_input,
))

register(OpSchema(
    name="cast",
    doc="Converts the element type like DALI: float to integer rounds half away from zero and saturates (NaN gives "
        "0), integer to integer saturates, anything to BOOL is `!= 0`.",
    args=(Arg("dtype", "dtype", REQUIRED, "The element type of the output."),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg,
))
