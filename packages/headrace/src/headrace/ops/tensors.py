"""Schemas of the shape and layout ops: stack, cat, reshape, transpose, pad, one_hot."""

from headrace.enums import DALIDataType
from headrace.errors import SchemaError
from headrace.output_specs import insert_axis, numpy_dtype, permuted, selected_axes
from headrace.schema import Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

MAX_JOINED = 64
"""The most inputs stack and cat take."""


def _axis_letter(op: str, a: SpecArgs) -> str | None:
    """The op's `axis_name`: one layout letter (DALI refuses any other length), or None when not given."""
    name = a.args["axis_name"]
    if name is not None and len(name) != 1:
        raise SchemaError(f"{op}: argument 'axis_name' must be a single character, got {name!r}")
    return name


def _stacked(a: SpecArgs) -> list[OutputSpec]:
    """The inputs along a new axis `axis` (named `axis_name` in the layout), of their type."""
    name = _axis_letter("stack", a)
    layout, dims = insert_axis(a.first.layout, a.first.dims, a.args["axis"], name, len(a.inputs))
    if name and (a.first.dims == () or not a.first.layout):  # scalars (the only inputs that need no layout):
        layout = name  # the new axis is the whole layout (DALI's)
    return [OutputSpec(a.first.dtype, layout, dims)]


def _cat_rule(given: frozenset[str]) -> str | None:
    """`axis` and `axis_name` name the same thing: DALI takes one or the other."""
    return "arguments 'axis' and 'axis_name' cannot be used together" if {"axis", "axis_name"} <= given else None


def _concatenated(a: SpecArgs) -> list[OutputSpec]:
    """The inputs joined along `axis` (or axis `axis_name` of the first input's layout): their type and layout."""
    name, layout = _axis_letter("cat", a), a.first.layout
    axis = a.args["axis"]
    if name is not None and layout is not None:
        if name not in layout:
            raise SchemaError(f"cat: argument 'axis_name': {name!r} is not an axis of the first input's layout "
                              f"{layout!r}")
        axis = layout.index(name)
    shapes = [i.dims for i in a.inputs]
    dims = None
    if all(s is not None for s in shapes) and len({len(s) for s in shapes}) == 1 and len(shapes[0]):
        ndim = len(shapes[0])
        if -ndim <= axis < ndim and (name is None or layout is not None):
            along = [s[axis] for s in shapes]
            dims = tuple((-1 if -1 in along else sum(along)) if i == axis % ndim else
                         (n if all(s[i] == n for s in shapes) else -1) for i, n in enumerate(shapes[0]))
    return [OutputSpec(a.first.dtype, a.first.layout, dims)]


def _reshaped(a: SpecArgs) -> list[OutputSpec]:
    """The input's data in a new shape (its own with `layout` alone), of its type, in the layout named by `layout`."""
    first, dims = a.first, None
    if a.per_sample & {"shape", "rel_shape"}:
        dims = None
    elif a.args["shape"] is not None:
        dims = tuple(a.args["shape"])
    elif a.args["rel_shape"] is not None:
        dims = (-1,) * len(a.args["rel_shape"])
    elif a.args["src_dims"] is not None:
        known = first.dims or ()
        dims = tuple(1 if d == -1 else known[d] if 0 <= d < len(known) else -1 for d in a.args["src_dims"])
    else:  # only a layout: the data relabelled, its shape kept
        dims = first.dims
    return [OutputSpec(first.dtype, a.args["layout"], dims)]


def _transposed(a: SpecArgs) -> list[OutputSpec]:
    """The input's axes in the order `perm`, its layout permuted too (or named by `output_layout`)."""
    perm = a.args["perm"]
    if perm is None:  # the axes reversed, as many as the input has (unknown where its rank is)
        rank = len(a.first.dims) if a.first.dims is not None else len(a.first.layout or "")
        perm = list(range(rank))[::-1]
    layout, dims = permuted(a.first, perm, a.args["transpose_layout"])
    if not a.args["transpose_layout"]:  # the axes move, their names stay as they were (DALI's)
        layout = a.first.layout
    return [OutputSpec(a.first.dtype, a.args["output_layout"] or layout, dims)]


def _padded(a: SpecArgs) -> list[OutputSpec]:
    """The input padded along `axes`: its type and layout, the padded extents varying."""
    first, dims = a.first, None
    if first.dims is not None:
        over = selected_axes(a, first.ndim)
        dims = tuple(-1 if over is None or i in over else n for i, n in enumerate(first.dims))
    return [OutputSpec(first.dtype, first.layout, dims)]


def _one_hot(a: SpecArgs) -> list[OutputSpec]:
    """One-hot vectors of `num_classes` values of `dtype`, along a new axis `axis` (named `axis_name`) of the labels."""
    name, dims = _axis_letter("one_hot", a), a.first.dims
    if dims == (1,):  # a one-element label is a scalar
        dims = ()
    elif dims == (-1,):  # maybe one element, maybe not
        dims = None
    layout, known = None, a.first.layout
    if name and (dims == () or not known):  # scalar labels (the only ones that need no layout): the name alone
        layout = name
    elif name and known and (len(known) == len(dims) if dims is not None else len(known) > 1):
        layout, _ = insert_axis(known, None, a.args["axis"], name, 0)  # (a 1-letter layout may hold scalars)
    _, dims = insert_axis(None, dims, a.args["axis"], None, a.args["num_classes"])
    return [OutputSpec(numpy_dtype(a.args["dtype"]), layout, dims)]


register(OpSchema(
    name="stack",
    doc="Stacks the inputs (same shape and type) along a new axis.",
    args=(Arg("axis", "int", 0, "Position of the new axis in the output, in [-ndim, ndim]; negative counts from the "
              "end."),
          Arg("axis_name", "str", None, "Layout letter of the new axis, inserted into the first input's layout "
              "(which non-scalar inputs then need).")),
    min_inputs=1, max_inputs=MAX_JOINED, devices=("cpu", "gpu"),
    state="none", output_spec=_stacked,
))

register(OpSchema(
    name="cat",
    doc="Concatenates the inputs (same type, same extents except along `axis`) along an existing axis.",
    args=(Arg("axis", "int", 0, "The axis to join along; negative counts from the end."),
          Arg("axis_name", "str", None, "The axis to join along, by its letter in the first input's layout (instead "
              "of `axis`).")),
    min_inputs=1, max_inputs=MAX_JOINED, devices=("cpu", "gpu"),
    state="none", output_spec=_concatenated, rule=_cat_rule,
))

register(OpSchema(
    name="reshape",
    doc="Gives the data a new shape with the same number of elements (no copy). One extent of `shape` may be -1 "
        "(inferred); `rel_shape` scales the input's extents; `src_dims` picks input axes (-1 inserts a unit axis).",
    args=(Arg("shape", "int", None, "The output shape.", list_of=True, tensor_input=True),
          Arg("rel_shape", "float", None, "The output shape relative to the input's.", list_of=True,
              tensor_input=True),
          Arg("src_dims", "int", None, "Input axes to keep, in order; -1 adds an axis of extent 1.", list_of=True),
          Arg("layout", "str", None, "Layout name of the output.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_reshaped,
))

register(OpSchema(
    name="transpose",
    doc="Permutes the axes: output axis i is input axis perm[i].",
    args=(Arg("perm", "int", None, "The permutation, e.g. [2, 0, 1]; default: the axes reversed.", list_of=True),
          Arg("transpose_layout", "bool", True, "Permute the input's layout name too."),
          Arg("output_layout", "str", None, "Layout name of the output (instead of the permuted one).")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_transposed,
))

register(OpSchema(
    name="pad",
    doc="Pads the end of `axes` with `fill_value`: to the largest extent in the batch, to `shape` where it is "
        "given (-1 = batch largest), and up to a multiple of `align`.",
    args=(Arg("axes", "int", None, "Axes to pad; default all.", list_of=True),
          Arg("axis_names", "str", None, "Axes to pad by their letters in the input's layout."),
          Arg("fill_value", "float", 0.0, "The padding value."),
          Arg("shape", "int", None, "Extents to pad to, one per padded axis; -1 = the batch's largest.",
              list_of=True, tensor_input=True),
          Arg("align", "int", None, "Pad each extent up to a multiple of this (one value, or one per axis).",
              list_of=True)),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), whole_batch=True,
    state="none", output_spec=_padded,
))

register(OpSchema(
    name="one_hot",
    doc="One-hot encoding of integer class labels: a new axis of `num_classes` with `on_value` at the label.",
    args=(Arg("num_classes", "int", 0, "Number of classes (DALI's default, 0, gives empty codes).",
              limits=Limits(0, 1 << 31)),
          Arg("axis", "int", -1, "Where the new axis goes, in [-1, ndim]; -1 = last."),
          Arg("axis_name", "str", None, "Layout letter of the new axis, inserted into the input's layout (which "
              "non-scalar labels then need); without it the output has no layout."),
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Output element type."),
          Arg("on_value", "float", 1.0, "Value at the label."),
          Arg("off_value", "float", 0.0, "Value elsewhere.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_one_hot,
))
