"""Schema of `dump_image`: DALI's debugging op that writes every image of a batch to a PPM file and passes it on."""

from __future__ import annotations

from headrace.errors import SchemaError
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _dumped(a: SpecArgs) -> list[OutputSpec]:
    """The input, unchanged: its element type, layout and dims."""
    if a.args["input_layout"] != "HWC":  # DALI's constructor refuses any other ("CHW not supported yet")
        raise SchemaError(f"dump_image: argument 'input_layout': only 'HWC' images are written, got "
                          f"{a.args['input_layout']!r}")
    first = a.first
    return [OutputSpec(first.dtype, first.layout, first.dims)]


register(OpSchema(
    name="dump_image",
    doc="Saves the images of the batch to disk in PPM format, for debugging, and outputs them unchanged. Sample i "
        "of the batch (of its branch, under a conditional) goes to '<i>-<suffix>-0.ppm' in the current directory, "
        "rewritten every iteration: plain-text P3 for 3 channels, P2 for 1, as DALI writes them. The images must "
        "be uint8 HWC with 1 or 3 channels.",
    args=(
        Arg("suffix", "str", "", "Middle part of the file names: '<sample>-<suffix>-0.ppm'."),
        Arg("input_layout", "str", "HWC", "Layout of the input images; only 'HWC' is supported (as in DALI)."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), whole_batch=True,
    state="none", output_spec=_dumped,
))
