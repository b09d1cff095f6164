"""Schemas of the shape and type ops that move no values (or map them one to one): expand_dims, squeeze,
reinterpret, cast_like, element_extract and lookup_table, as DALI's."""

from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
from headrace.schema import REQUIRED, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

MAX_KEY = 65535
"""The largest key lookup_table takes (DALI's)."""


def _ndim(spec: OutputSpec) -> int | None:
    """The number of dimensions, from the dims or else the layout."""
    return spec.ndim if spec.ndim is not None else len(spec.layout) if spec.layout else None


def _expanded(a: SpecArgs) -> list[OutputSpec]:
    """The input with unit axes at `axes` (output positions), named `new_axis_names` in the input's layout."""
    first, axes, names = a.first, a.args["axes"], a.args["new_axis_names"] or ""
    ndim, dims, layout = _ndim(first), None, None
    if ndim is not None and len(set(axes)) == len(axes) and all(0 <= x < ndim + len(axes) for x in axes):
        if first.dims is not None:
            given = iter(first.dims)
            dims = tuple(1 if i in axes else next(given) for i in range(ndim + len(axes)))
        if first.layout and len(names) == len(axes):
            letters, named = iter(first.layout), dict(zip(axes, names, strict=True))
            layout = "".join(named[i] if i in named else next(letters) for i in range(ndim + len(axes)))
    return [OutputSpec(first.dtype, layout, dims)]


def _squeezed(a: SpecArgs) -> list[OutputSpec]:
    """The input without the unit axes `axes` (or `axis_names`), its layout without their letters."""
    first, axes, ndim = a.first, a.literal("axes"), _ndim(a.first)
    if axes is None or ndim is None or any(not 0 <= x < ndim for x in axes):
        return [OutputSpec(first.dtype, None, None)]
    layout = "".join(c for i, c in enumerate(first.layout) if i not in axes) if first.layout else None
    dims = tuple(n for i, n in enumerate(first.dims) if i not in axes) if first.dims is not None else None
    return [OutputSpec(first.dtype, layout, dims)]


def _reinterpreted(a: SpecArgs) -> list[OutputSpec]:
    """The input's bytes as `dtype` (default its type) in the shape asked (-1 where an extent is worked out)."""
    first = a.first
    dtype = numpy_dtype(a.args["dtype"]) or first.dtype
    dims = None
    if len(a.inputs) < 2 and not a.per_sample & {"shape", "rel_shape", "src_dims"}:
        shape, rel, src = a.args["shape"], a.args["rel_shape"], a.args["src_dims"]
        if shape is not None:
            dims = tuple(-1 if n < 0 else n for n in shape)
        elif rel is not None or src is not None:
            dims = (-1,) * len(rel if rel is not None else src)
        elif first.dims is not None:
            same = first.dtype is not None and dtype == first.dtype
            dims = first.dims if same or not first.dims else (*first.dims[:-1], -1)
    layout = a.args["layout"]
    if layout is None and first.layout and len(a.inputs) < 2 and len(first.layout) == (
            len(dims) if dims is not None else _out_ndim(a)):
        layout = first.layout
    return [OutputSpec(dtype, layout, dims)]


def _out_ndim(a: SpecArgs) -> int | None:
    """reinterpret's number of output dimensions where the arguments fix it."""
    for name in ("shape", "rel_shape", "src_dims"):
        if name in a.per_sample:
            return None
        if a.args[name] is not None:
            return len(a.args[name])
    return _ndim(a.first)


def _cast_like(a: SpecArgs) -> list[OutputSpec]:
    """The first input's values converted to the second input's element type, in the first's shape and layout."""
    return [OutputSpec(a.inputs[1].dtype if len(a.inputs) > 1 else None, a.first.layout, a.first.dims)]


def _extracted(a: SpecArgs) -> list[OutputSpec]:
    """One output per `element_map` entry: that element (frame) of each sequence, without the outer axis."""
    first = a.first
    layout = first.layout[1:] if first.layout and first.layout.startswith("F") else None
    dims = first.dims[1:] if first.dims else None
    return [OutputSpec(first.dtype, layout, dims) for _ in a.args["element_map"]]


def _looked_up(a: SpecArgs) -> list[OutputSpec]:
    """The table's values of `dtype` (or `output_dtype`), one per input element, in the input's shape and layout."""
    dtype = a.args.get("output_dtype") or a.args["dtype"]
    return [OutputSpec(numpy_dtype(dtype), a.first.layout, a.first.dims)]


def _one_of_axes(given: frozenset[str]) -> str | None:
    return None if len(given & {"axes", "axis_names"}) == 1 else "give the axes to remove: `axes` or `axis_names`"


def _shape_or_rel_shape(given: frozenset[str]) -> str | None:
    return "`shape` and `rel_shape` are mutually exclusive" if {"shape", "rel_shape"} <= given else None


register(OpSchema(
    name="expand_dims",
    doc="Inserts axes of extent 1 at `axes` (indices in the output, non-negative, no repeats); "
        "`new_axis_names` names them in the input's layout (else the output's layout is empty).",
    args=(Arg("axes", "int", REQUIRED, "Where the new axes go, as indices in the output.", list_of=True),
          Arg("new_axis_names", "str", "", "Layout letters of the new axes, one per entry of `axes`.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_expanded,
))

register(OpSchema(
    name="squeeze",
    doc="Removes the axes `axes` (or those named `axis_names`); each must have extent 1, unless the sample is "
        "empty before and after.",
    args=(Arg("axes", "int", None, "Indices of the axes to remove.", list_of=True, tensor_input=True),
          Arg("axis_names", "str", None, "Layout letters of the axes to remove.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), rule=_one_of_axes,
    state="none", output_spec=_squeezed,
))

register(OpSchema(
    name="reinterpret",
    doc="The input's bytes seen as another element type, shape or layout (no copy on the CPU). `shape` (or a "
        "second input of extents) may hold one -1, inferred; `rel_shape` scales the extents of the input axes "
        "`src_dims` (default: in order); `src_dims` alone picks input axes (-1 inserts a unit axis). With a new "
        "`dtype` and no shape, the innermost extent is adjusted to keep the byte size.",
    args=(Arg("dtype", "dtype", None, "Element type of the output (same total bytes)."),
          Arg("shape", "int", None, "The output shape; one extent may be -1.", list_of=True, tensor_input=True),
          Arg("rel_shape", "float", None, "Output extents relative to the input's (one may be -1).", list_of=True,
              tensor_input=True),
          Arg("src_dims", "int", None, "Input axes the output's extents come from; -1 adds a unit axis.",
              list_of=True, tensor_input=True),
          Arg("layout", "str", None, "Layout of the output; default the input's where the dimensions agree.")),
    min_inputs=1, max_inputs=2, devices=("cpu", "gpu"), rule=_shape_or_rel_shape,
    state="none", output_spec=_reinterpreted,
))

register(OpSchema(
    name="cast_like",
    doc="Converts the first input to the element type of the second (floats to integers rounded half away from "
        "zero and saturated, as `cast`).",
    min_inputs=2, max_inputs=2, devices=("cpu", "gpu"),
    state="none", output_spec=_cast_like,
))

register(OpSchema(
    name="element_extract",
    doc="Extracts elements (frames) of sequences: one output per entry of `element_map`, the input's outermost "
        "axis removed (FHWC in, HWC out).",
    args=(Arg("element_map", "int", REQUIRED, "Indices of the elements to extract, non-negative.", list_of=True),),
    min_inputs=1, max_inputs=1, num_outputs=lambda args: len(args.get("element_map") or (0,)),
    devices=("cpu", "gpu"), state="none", output_spec=_extracted,
))

register(OpSchema(
    name="lookup_table",
    doc="Maps integer inputs through the table `keys` -> `values` (the last of repeated keys wins); other inputs, "
        "negative or beyond the largest key included, give `default_value`.",
    args=(Arg("keys", "int", [], f"Input values of the table, 0 to {MAX_KEY}.", list_of=True,
              limits=Limits(0, MAX_KEY)),
          Arg("values", "float", [], "Output value of each key.", list_of=True),
          Arg("default_value", "float", 0.0, "Output of inputs that are no key."),
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the output."),
          Arg("output_dtype", "dtype", None, "Deprecated alias of `dtype` (DALI's); wins when given.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_looked_up,
))
