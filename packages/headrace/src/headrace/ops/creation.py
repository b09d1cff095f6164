"""Schemas of the creation ops: zeros, ones and full (new data of a given shape) and their `_like` forms (the shape,
type and layout of an input), as DALI's."""

from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_SHAPE = Arg("shape", "int", None, "Shape of each output sample; a scalar when not given.", list_of=True,
             tensor_input=True)
_LAYOUT = Arg("layout", "str", None, "Layout of the output; as many letters as the output has dimensions.")


def _shape_dims(a: SpecArgs) -> tuple[int, ...] | None:
    shape = a.literal("shape")
    if "shape" in a.per_sample:
        return None
    return tuple(shape) if shape is not None else ()


def _created(a: SpecArgs) -> list[OutputSpec]:
    """Data of element type `dtype` (INT32 by default), of `shape` (a scalar when not given), layout `layout`."""
    return [OutputSpec(numpy_dtype(a.args["dtype"]), a.args["layout"], _shape_dims(a))]


def _filled(a: SpecArgs) -> list[OutputSpec]:
    """Data of the fill value's element type, of `shape` (a scalar when not given), layout `layout`."""
    return [OutputSpec(a.first.dtype, a.args["layout"], _shape_dims(a))]


def _like(a: SpecArgs) -> list[OutputSpec]:
    """Data of the first input's shape and layout, of element type `dtype` (default the input's)."""
    first = a.first
    return [OutputSpec(numpy_dtype(a.args.get("dtype")) or first.dtype, first.layout, first.dims)]


for _name, _value in (("zeros", 0), ("ones", 1)):
    register(OpSchema(
        name=_name,
        doc=f"New data of `shape` and `dtype`, filled with {_value}s.",
        args=(_SHAPE, Arg("dtype", "dtype", DALIDataType.INT32, "Element type of the output."), _LAYOUT),
        devices=("cpu", "gpu"), state="none", output_spec=_created,
    ))
    register(OpSchema(
        name=f"{_name}_like",
        doc=f"New data of the input's shape, element type and layout, filled with {_value}s.",
        args=(Arg("dtype", "dtype", None, "Element type of the output; default the input's."),),
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=_like,
    ))

register(OpSchema(
    name="full",
    doc="New data of `shape`, filled with the input `fill_value` (of its element type), broadcast NumPy-style: a "
        "fill of fewer dimensions is padded with leading 1s, and each extent must match or be 1.",
    args=(_SHAPE, _LAYOUT),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=_filled,
))

register(OpSchema(
    name="full_like",
    doc="New data of the first input's shape, element type and layout, filled with the second input `fill_value` "
        "(converted to that type with rounding and saturation, broadcast NumPy-style).",
    min_inputs=2, max_inputs=2, devices=("cpu", "gpu"), state="none", output_spec=_like,
))
