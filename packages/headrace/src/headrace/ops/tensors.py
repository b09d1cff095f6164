"""Schemas of the shape and layout ops: stack, cat, reshape, transpose, pad, one_hot."""

from headrace.schema import REQUIRED, Arg, OpSchema, register
from headrace.types import DALIDataType

MAX_JOINED = 64
"""The most inputs stack and cat take."""

register(OpSchema(
    name="stack",
    doc="Stacks the inputs (same shape and type) along a new axis.",
    args=(Arg("axis", "int", 0, "Position of the new axis in the output; negative counts from the end."),
          Arg("axis_name", "str", None, "Layout letter of the new axis (layouts are not tracked; accepted for "
              "DALI compatibility).")),
    min_inputs=1, max_inputs=MAX_JOINED, devices=("cpu", "gpu"),
    state="none",
))

register(OpSchema(
    name="cat",
    doc="Concatenates the inputs (same type, same extents except along `axis`) along an existing axis.",
    args=(Arg("axis", "int", 0, "The axis to join along; negative counts from the end."),
          Arg("axis_name", "str", None, "Layout letter of the axis (accepted for DALI compatibility).")),
    min_inputs=1, max_inputs=MAX_JOINED, devices=("cpu", "gpu"),
    state="none",
))

register(OpSchema(
    name="reshape",
    doc="Gives the data a new shape with the same number of elements (no copy). One extent of `shape` may be -1 "
        "(inferred); `rel_shape` scales the input's extents; `src_dims` picks input axes (-1 inserts a unit axis).",
    args=(Arg("shape", "int", None, "The output shape.", list_of=True, tensor_input=True),
          Arg("rel_shape", "float", None, "The output shape relative to the input's.", list_of=True,
              tensor_input=True),
          Arg("src_dims", "int", None, "Input axes to keep, in order; -1 adds an axis of extent 1.", list_of=True),
          Arg("layout", "str", None, "Layout name of the output (accepted for DALI compatibility).")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none",
))

register(OpSchema(
    name="transpose",
    doc="Permutes the axes: output axis i is input axis perm[i].",
    args=(Arg("perm", "int", REQUIRED, "The permutation.", list_of=True),
          Arg("transpose_layout", "bool", True, "Permute the layout name too (accepted for DALI compatibility)."),
          Arg("output_layout", "str", None, "Layout name of the output (accepted for DALI compatibility).")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none",
))

register(OpSchema(
    name="pad",
    doc="Pads the end of `axes` with `fill_value`: to the largest extent in the batch, to `shape` where it is "
        "given (-1 = batch largest), and up to a multiple of `align`.",
    args=(Arg("axes", "int", None, "Axes to pad; default all.", list_of=True),
          Arg("axis_names", "str", None, "Axes to pad by layout letters (HW, HWC or DHWC by dimensions)."),
          Arg("fill_value", "float", 0.0, "The padding value."),
          Arg("shape", "int", None, "Extents to pad to, one per padded axis; -1 = the batch's largest.",
              list_of=True, tensor_input=True),
          Arg("align", "int", None, "Pad each extent up to a multiple of this (one value, or one per axis).",
              list_of=True)),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), whole_batch=True,
    state="none",
))

register(OpSchema(
    name="one_hot",
    doc="One-hot encoding of integer class labels: a new axis of `num_classes` with `on_value` at the label.",
    args=(Arg("num_classes", "int", REQUIRED, "Number of classes."),
          Arg("axis", "int", -1, "Where the new axis goes; -1 = last."),
          Arg("axis_name", "str", None, "Layout letter of the new axis (accepted for DALI compatibility)."),
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Output element type."),
          Arg("on_value", "float", 1.0, "Value at the label."),
          Arg("off_value", "float", 0.0, "Value elsewhere.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none",
))
