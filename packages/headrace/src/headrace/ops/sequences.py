"""Schemas of the sequence ops, as DALI's: `sequence_rearrange` (reorder the frames of each sequence) and
`per_frame` (mark data as a sequence, outermost axis 'F', e.g. an argument given one value per frame)."""

from __future__ import annotations

from headrace.schema import REQUIRED, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _rearranged(a: SpecArgs) -> list[OutputSpec]:
    """The input's frames in the new order: its element type and layout, len(new_order) frames."""
    first, order = a.first, a.literal("new_order")
    dims = first.dims
    if dims and order is not None:
        dims = (len(order), *dims[1:])
    elif dims and order is None:
        dims = (-1, *dims[1:])
    return [OutputSpec(first.dtype, first.layout, dims)]


def per_frame_layout(layout: str | None, ndim: int | None, replace: bool) -> str | None:
    """The layout per_frame gives: the input's with 'F' first (replaced where `replace`), or 'F' padded with '*'
    to the number of dimensions when the input has none; None where that is not known here."""
    if layout:
        return "F" + layout[1:] if replace or layout[0] == "F" else layout
    return "F" + "*" * (ndim - 1) if ndim else None


def _per_frame(a: SpecArgs) -> list[OutputSpec]:
    """The input's data unchanged, its layout marked as a sequence (outermost axis 'F')."""
    first = a.first
    return [OutputSpec(first.dtype, per_frame_layout(first.layout, first.ndim, a.args["replace"]), first.dims)]


register(OpSchema(
    name="sequence_rearrange",
    doc="Rearranges the frames of each sequence (outermost axis), as DALI's: out[i] = in[new_order[i]]. Frames may "
        "repeat or be dropped; the output must have at least one frame. An input with a layout must have 'F' first.",
    args=(
        Arg("new_order", "int", REQUIRED, "Index of the input frame for each output frame, in [0, frames).",
            tensor_input=True, list_of=True, list_len=(1, 1 << 20), limits=Limits(0, 1 << 31)),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_rearranged,
))

register(OpSchema(
    name="per_frame",
    doc="Marks the input as a sequence, as DALI's: only the layout changes (its first letter becomes 'F'; an input "
        "without a layout gets 'F' padded with '*'), the data stays as it is. Use it to give an argument one value "
        "per frame of a sequence. headrace knows the padded layout only where the input's number of dimensions is "
        "known while the graph is built (external_source(ndim=...)).",
    args=(
        Arg("replace", "bool", False, "Replace the first letter of an input layout by 'F' (else an input layout "
            "that does not start with 'F' is an error)."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_per_frame,
))
