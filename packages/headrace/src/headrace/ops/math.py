"""Schemas of the element-wise ops behind DataNode arithmetic, and `cast`."""

from headrace.schema import REQUIRED, Arg, OpSchema, register

BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "pow", "mod", "eq", "ne", "lt", "le", "gt", "ge",
              "bitand", "bitor", "bitxor")
UNARY_OPS = ("neg", "pos", "invert", "abs")

register(OpSchema(
    name="math.binary",
    doc="An element-wise binary op on two tensors, or a tensor and a scalar (numpy broadcasting per sample). "
        "Python scalars are weakly typed: `uint8 + 1` stays uint8, `int + 0.5` becomes float32; `/` gives float.",
    args=(Arg("op", "str", REQUIRED, "The operation.", choices=BINARY_OPS),
          Arg("scalar", "float", None, "The scalar operand when there is only one input tensor."),
          Arg("scalar_is_int", "bool", False, "Whether the scalar was a Python int (weak integer type)."),
          Arg("scalar_on_left", "bool", False, "Whether the scalar is the left operand.")),
    min_inputs=1, max_inputs=2, devices=("cpu", "gpu"),
    state="none",
))

register(OpSchema(
    name="math.unary",
    doc="An element-wise unary op.",
    args=(Arg("op", "str", REQUIRED, "The operation.", choices=UNARY_OPS),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none",
))

register(OpSchema(
    name="cast",
    doc="Converts the element type; float to integer rounds to nearest (ties to even) and saturates, like DALI.",
    args=(Arg("dtype", "dtype", REQUIRED, "The element type of the output."),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none",
))
