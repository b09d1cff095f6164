"""Schema of multi_paste: regions of several images pasted onto one zero canvas per output sample, from the same
batch (in_ids) or from several inputs, as DALI's. The op sees the whole batch (in_ids may name any sample)."""

from __future__ import annotations

from headrace.output_specs import hwc_dims, numpy_dtype
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_PAIRS = (("in_anchors", "in_anchors_rel"), ("shapes", "shapes_rel"), ("out_anchors", "out_anchors_rel"))
_PER_REGION = "One (row, column) pair per pasted region: a (regions, 2) array per sample, or the pairs flattened."


def _canvas(a: SpecArgs) -> list[OutputSpec]:
    """One HWC canvas per sample, of `dtype` (default the input's), of `output_size` where it is given."""
    first = a.first
    size = a.literal("output_size")
    height, width = (size[0], size[1]) if size else (-1, -1)
    if not size and "output_size" not in a.per_sample and first.dims is not None and len(a.inputs) == 1 \
            and -1 not in first.dims[:2]:
        height, width = first.dims[:2]
    return [OutputSpec(numpy_dtype(a.args["dtype"]) or first.dtype, first.layout, (height, width, hwc_dims(first)[2]))]


def _rule(given: frozenset[str]) -> str | None:
    for absolute, relative in _PAIRS:
        if absolute in given and relative in given:
            return f"`{absolute}` and `{relative}` cannot be given together"
    return None


register(OpSchema(
    name="multi_paste",
    doc="Pastes regions of HWC images onto a zero canvas per output sample, later regions over earlier ones. With "
        "`in_ids`, output sample i takes the samples of the (one) input that in_ids[i] lists, in order; without "
        "it, sample i of every input, in input order. A region is the source from its anchor to its end unless "
        "`shapes` says otherwise; relative anchors are rounded down and relative shapes up, as DALI. Every region "
        "must lie inside its source and the canvas (an error otherwise). The canvas is `output_size` (H, W), "
        "default the inputs' common size.",
    args=(
        Arg("in_ids", "int", None, "Indices of the samples pasted into each output sample (one input only).",
            list_of=True, tensor_input=True),
        Arg("in_anchors", "int", None, "Top-left corner of each region in its source. " + _PER_REGION,
            list_of=True, tensor_input=True),
        Arg("in_anchors_rel", "float", None, "in_anchors relative to the source's size, in [0, 1]. " + _PER_REGION,
            list_of=True, tensor_input=True),
        Arg("shapes", "int", None, "Size of each region. " + _PER_REGION, list_of=True, tensor_input=True),
        Arg("shapes_rel", "float", None, "shapes relative to the source's size, in [0, 1]. " + _PER_REGION,
            list_of=True, tensor_input=True),
        Arg("out_anchors", "int", None, "Top-left corner of each region on the canvas. " + _PER_REGION,
            list_of=True, tensor_input=True),
        Arg("out_anchors_rel", "float", None, "out_anchors relative to the canvas size, in [0, 1]. " + _PER_REGION,
            list_of=True, tensor_input=True),
        Arg("output_size", "int", None, "Canvas size (H, W); default the inputs' common size.", list_of=True,
            list_len=(2, 3), tensor_input=True),
        Arg("dtype", "dtype", None, "Output element type; default the input's."),
    ),
    min_inputs=1, max_inputs=64, devices=("cpu", "gpu"), whole_batch=True, state="none", output_spec=_canvas,
    rule=_rule, input_layouts=("HWC",),
))
