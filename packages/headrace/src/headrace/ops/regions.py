"""Schemas of erase (fill regions) and paste (place an image on a larger canvas)."""

from headrace.output_specs import same_as_input
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _pasted(a: SpecArgs) -> list[OutputSpec]:
    """Images on larger canvases: the input's type and layout, `n_channels` channels, height and width varying."""
    return [OutputSpec(a.first.dtype, a.first.layout, (-1, -1, a.args["n_channels"]))]


register(OpSchema(
    name="erase",
    doc="Fills regions with `fill_value`. `anchor` and `shape` give one or more regions over `axes` (or "
        "`axis_names`, default 'HW'): anchor = (a0, a1, b0, b1, ...) for two axes; other axes are covered whole. "
        "Regions are clipped to the sample.",
    args=(
        Arg("anchor", "float", [], "Start of each region, per listed axis.", list_of=True, tensor_input=True),
        Arg("shape", "float", [], "Extent of each region, per listed axis.", list_of=True, tensor_input=True),
        Arg("axes", "int", None, "The axes anchor and shape refer to; default from axis_names.", list_of=True),
        Arg("axis_names", "str", None, "The axes by layout letters (HW, HWC or DHWC by dimensions); default 'HW'."),
        Arg("fill_value", "float", [0.0], "One value, or one per channel (the layout's C axis, else the one "
            "unlisted axis whose extent matches).", list_of=True, tensor_input=True),
        Arg("centered_anchor", "bool", False, "The anchor is the region's centre."),
        Arg("normalized", "bool", False, "Both anchor and shape are fractions of the extents."),
        Arg("normalized_anchor", "bool", False, "The anchor is a fraction of the extents."),
        Arg("normalized_shape", "bool", False, "The shape is a fraction of the extents."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=same_as_input, default_axis_names="HW",
))

register(OpSchema(
    name="paste",
    doc="Places each HWC image on a canvas `ratio` times larger (at least min_canvas_size), at (paste_y, "
        "paste_x) as fractions of the free space, on `fill_value`.",
    args=(
        Arg("ratio", "float", REQUIRED, "Canvas size relative to the image (>= 1).", tensor_input=True),
        Arg("paste_x", "float", 0.5, "Horizontal position, 0 (left) to 1 (right).", tensor_input=True),
        Arg("paste_y", "float", 0.5, "Vertical position, 0 (top) to 1 (bottom).", tensor_input=True),
        Arg("fill_value", "float", [0.0], "Canvas colour: one value, or one per channel.", list_of=True),
        Arg("min_canvas_size", "float", 0.0, "Smallest canvas height and width.", tensor_input=True),
        Arg("n_channels", "int", 3, "Number of channels of the images (checked)."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_pasted, input_layouts=("HWC",),
))
