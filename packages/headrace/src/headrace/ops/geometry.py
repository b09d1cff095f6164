"""Schemas of resize (and experimental.resize), crop, flip, random_resized_crop and the fused crop-mirror-normalize."""

import numpy as np

from headrace.enums import DALIDataType, DALIInterpType
from headrace.output_specs import hwc_dims, numpy_dtype, round_half_up, same_as_input
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_DALI_HINT = "Accepted for DALI compatibility; no effect in headrace."
RESIZE_DTYPE_ARG = Arg("dtype", "dtype", None, "Output element type: the input's (default) or FLOAT (resampled "
                       "from float values, not rounded).", choices=(DALIDataType.UINT8, DALIDataType.FLOAT))

INTERP_ARGS = (
    Arg("interp_type", "interp_type", DALIInterpType.INTERP_LINEAR, "Resampling filter (of both min_filter and "
        "mag_filter, unless they are given).", tensor_input=True),
    Arg("min_filter", "interp_type", None, "Filter of the axes that shrink (output smaller than the source "
        "region); default interp_type.", tensor_input=True),
    Arg("mag_filter", "interp_type", None, "Filter of the other axes; default interp_type.", tensor_input=True),
    Arg("antialias", "bool", True, "When shrinking with LINEAR/CUBIC/LANCZOS3, widen the filter by the scale "
        "(average over the source footprint; LINEAR becomes TRIANGULAR); NN is never antialiased."),
)
"""The resampling arguments of the resize family, as DALI's (min_filter / mag_filter chosen per axis)."""

INTERLEAVED = ("HW", "HWC")
"""The layouts the image geometry ops read (and 'F' + one of them, a sequence). DALI's also take planar (CHW) and
volumetric (DHWC) data; here those are refused with the op's name rather than read as HWC."""

RESAMPLE_HINT_ARGS = (
    Arg("minibatch_size", "int", 32, _DALI_HINT),
    Arg("temp_buffer_hint", "int", 0, _DALI_HINT),
)
"""DALI's performance hints of its resampling kernels: accepted, no effect."""

ROI_ARGS = (
    Arg("roi_start", "float", None, "Origin (y, x) of the region of interest that is resized; with roi_end. Past "
        "roi_end on an axis, that axis is flipped.", list_of=True, list_len=(2, 2), tensor_input=True),
    Arg("roi_end", "float", None, "End (y, x) of the region of interest; with roi_start.", list_of=True,
        list_len=(2, 2), tensor_input=True),
    Arg("roi_relative", "bool", False, "roi_start / roi_end are relative to the image's size (0 top / left, "
        "1 bottom / right) instead of pixels."),
)
"""DALI's region of interest of the resize family: the output size is computed for the region, not the image."""

CROP_WINDOW_ARGS = (
    Arg("crop", "float", None, "Crop size (height, width).", list_of=True, list_len=(2, 2), tensor_input=True),
    Arg("crop_h", "float", 0.0, "Crop height (alternative to `crop`).", tensor_input=True),
    Arg("crop_w", "float", 0.0, "Crop width (alternative to `crop`).", tensor_input=True),
    Arg("crop_pos_x", "float", 0.5, "Horizontal anchor of the window, 0 (left) to 1 (right).", tensor_input=True),
    Arg("crop_pos_y", "float", 0.5, "Vertical anchor of the window, 0 (top) to 1 (bottom).", tensor_input=True),
    Arg("out_of_bounds_policy", "str", "error", "What a window outside the image does: 'error', 'pad' "
        "(with fill_values) or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
    Arg("fill_values", "float", [0.0], "Padding values (out_of_bounds_policy='pad'): one, or one per output "
        "channel.", list_of=True),
    Arg("rounding", "str", "round", "How the window's anchor, crop_pos * (extent - crop), becomes a whole pixel: "
        "'round' (half away from zero) or 'truncate' (toward zero).", choices=("round", "truncate")),
)


def _resize_outputs(args: dict) -> int:
    """The resized images; then, with save_attrs, each input's (height, width)."""
    return 2 if args.get("save_attrs") else 1


def _resized(a: SpecArgs) -> list[OutputSpec]:
    """Resized images (input's type or `dtype`, layout, channels); with save_attrs, each input's int32 (H, W)."""
    x, y, size = a.literal("resize_x"), a.literal("resize_y"), a.literal("size")
    if size:
        y, x = size
    fixed = x and y and a.args["mode"] in ("default", "stretch") and not a.args["max_size"]
    height, width = (round_half_up(y), round_half_up(x)) if fixed else (-1, -1)
    first = a.first
    images = OutputSpec(numpy_dtype(a.args["dtype"]) or first.dtype, first.layout, (height, width, hwc_dims(first)[2]))
    return [images, OutputSpec(np.int32, None, (2,))] if a.args["save_attrs"] else [images]


def _crop_window(a: SpecArgs) -> tuple[int, int]:
    """(height, width) of a crop window, -1 where it varies; a missing extent is the input's."""
    if a.args["out_of_bounds_policy"] == "trim_to_shape" or "crop" in a.per_sample:
        return -1, -1
    if a.args["crop"]:
        height, width = a.args["crop"]
        return int(height), int(width)
    whole = hwc_dims(a.first)
    extents = [a.literal("crop_h"), a.literal("crop_w")]
    return tuple(-1 if value is None else int(value) if value else whole[axis]
                 for axis, value in enumerate(extents))


def _cropped(a: SpecArgs) -> list[OutputSpec]:
    """Windows of the images: the input's type (or `dtype`), layout and channels, at the crop size where fixed."""
    first = a.first
    return [OutputSpec(numpy_dtype(a.args["dtype"]) or first.dtype, first.layout,
                       (*_crop_window(a), hwc_dims(first)[2]))]


def _normalized(a: SpecArgs) -> list[OutputSpec]:
    """Normalized windows of the images, of `dtype` in `output_layout` (one more channel with pad_output)."""
    height, width = _crop_window(a)
    channels = hwc_dims(a.first)[2]
    if a.args["pad_output"] and channels != -1:
        channels += 1
    layout = a.args["output_layout"]
    dims = (channels, height, width) if layout == "CHW" else (height, width, channels)
    return [OutputSpec(numpy_dtype(a.args["dtype"]), layout, dims)]


def _random_resized(a: SpecArgs) -> list[OutputSpec]:
    """Random windows of the images resized to `size`: the input's type (or `dtype`), layout and channels."""
    height, width = a.args["size"]
    first = a.first
    return [OutputSpec(numpy_dtype(a.args["dtype"]) or first.dtype, first.layout,
                       (int(round(height)), int(round(width)), hwc_dims(first)[2]))]


def _resize_rule(given: frozenset[str]) -> str | None:
    """DALI's: exactly one way of giving the size; resize_shorter, resize_longer and mode exclude each other;
    roi_start and roi_end come together."""
    if len(given & {"roi_start", "roi_end"}) == 1:
        return "roi_start and roi_end must be given together"
    ways = [w for w in ("resize_x/resize_y", "size", "resize_shorter", "resize_longer")
            if given & set(w.split("/"))]
    if len(ways) != 1:
        return (f"give the output size one way: resize_x/resize_y, size, resize_shorter or resize_longer "
                f"(got {', '.join(ways) if ways else 'none'})")
    exclusive = sorted(given & {"resize_shorter", "resize_longer", "mode"})
    if len(exclusive) > 1:
        return f"{' and '.join(exclusive)} exclude each other (resize_shorter implies mode='not_smaller', " \
               "resize_longer mode='not_larger')"
    return None


_RESIZE_DOC = ("Resizes HWC images (or a region of interest of each). Give resize_x/resize_y (one of them keeps the "
               "aspect ratio; a negative one flips that axis), `size`, resize_shorter or resize_longer; `mode` decides "
               "how an aspect-ratio conflict is settled.")

RESIZE_ARGS = (
    Arg("resize_x", "float", 0.0, "Output width; 0 = from resize_y keeping the aspect ratio.", tensor_input=True),
    Arg("resize_y", "float", 0.0, "Output height; 0 = from resize_x keeping the aspect ratio.",
        tensor_input=True),
    Arg("size", "float", None, "Output size (height, width); a 0 extent keeps the aspect ratio.",
        list_of=True, list_len=(2, 2), tensor_input=True),
    Arg("resize_shorter", "float", 0.0, "Length of the shorter side; the longer keeps the aspect ratio.",
        tensor_input=True),
    Arg("resize_longer", "float", 0.0, "Length of the longer side; the shorter keeps the aspect ratio.",
        tensor_input=True),
    Arg("max_size", "float", None, "Upper bound of each output extent (height, width).", list_of=True,
        list_len=(1, 2)),
    Arg("mode", "str", "default", "'default': the size asked, a missing extent scaled like the given one; "
        "'stretch': the size asked, a missing extent kept; 'not_larger': fit inside it keeping the aspect ratio; "
        "'not_smaller': cover it keeping the aspect ratio. Excludes resize_shorter / resize_longer.",
        choices=("default", "stretch", "not_larger", "not_smaller")),
    *INTERP_ARGS,
    RESIZE_DTYPE_ARG,
    Arg("subpixel_scale", "bool", True, "When the size asked is fractional, keep its exact scale (sample a "
        "source region about the centre, scaled by rounded / asked) instead of stretching the image onto the "
        "rounded size."),
    *ROI_ARGS,
    *RESAMPLE_HINT_ARGS,
    Arg("save_attrs", "bool", False, "Also output each input's (height, width), int32 (DALI's testing aid)."),
)
"""The arguments of resize (and of experimental.resize, and, but save_attrs, of resize_crop_mirror)."""

for _name, _doc in (("resize", ""), ("experimental.resize", " (DALI has it on the GPU only, through CV-CUDA; "
                                                              "headrace's is resize, on both devices)")):
    register(OpSchema(
        name=_name, doc=_RESIZE_DOC + _doc, args=RESIZE_ARGS, min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
        num_outputs=_resize_outputs, rule=_resize_rule, state="none", output_spec=_resized, sequences=True,
        input_layouts=INTERLEAVED,
    ))

register(OpSchema(
    name="crop",
    doc="Cuts a window out of each HWC image.",
    renamed_args={"output_dtype": "dtype"},
    args=(*CROP_WINDOW_ARGS, Arg("dtype", "dtype", None, "Output element type; default the input's.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_cropped, sequences=True, input_layouts=INTERLEAVED,
))

register(OpSchema(
    name="crop_mirror_normalize",
    doc="Crop, optional horizontal mirror, (x - mean) / std * scale + shift, cast and layout change, fused.",
    renamed_args={"output_dtype": "dtype"},
    args=(
        *CROP_WINDOW_ARGS,
        Arg("mirror", "int", 0, "1 flips the sample horizontally.", tensor_input=True),
        Arg("mean", "float", [0.0], "Mean per channel (or one for all).", list_of=True, tensor_input=True),
        Arg("std", "float", [1.0], "Standard deviation per channel (or one for all).", list_of=True,
            tensor_input=True),
        Arg("scale", "float", 1.0, "Multiplier applied after normalization."),
        Arg("shift", "float", 0.0, "Offset added after scaling."),
        Arg("dtype", "dtype", DALIDataType.FLOAT, "Output element type.",
            choices=(DALIDataType.FLOAT, DALIDataType.FLOAT16, DALIDataType.UINT8, DALIDataType.INT8,
                     DALIDataType.INT16, DALIDataType.INT32)),
        Arg("output_layout", "str", "CHW", "'CHW' or 'HWC' ('FCHW' or 'FHWC' for a sequence).",
            choices=("CHW", "HWC", "FCHW", "FHWC")),
        Arg("pad_output", "bool", False, "Append a channel: fill_values' last (or only) value with "
            "out_of_bounds_policy='pad', else 0."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_normalized, sequences=True, input_layouts=INTERLEAVED,
))

register(OpSchema(
    name="random_resized_crop",
    doc="A random window (Inception-style area and aspect ratio) resized to `size`.",
    args=(
        Arg("size", "float", REQUIRED, "Output size (height, width).", list_of=True, list_len=(2, 2)),
        Arg("random_area", "float", [0.08, 1.0], "Range of the window's area fraction.", list_of=True,
            list_len=(1, 2)),
        Arg("random_aspect_ratio", "float", [3 / 4, 4 / 3], "Range of width/height ratios (log-uniform).",
            list_of=True, list_len=(1, 2)),
        Arg("num_attempts", "int", 10, "Tries before falling back to a centre crop."),
        *INTERP_ARGS,
        RESIZE_DTYPE_ARG,
        *RESAMPLE_HINT_ARGS,
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), random=True, state="rng", output_spec=_random_resized,
    input_layouts=INTERLEAVED,
))

register(OpSchema(
    name="flip",
    doc="Flips HWC images horizontally and/or vertically.",
    args=(Arg("horizontal", "int", 1, "1 flips left-right.", tensor_input=True),
          Arg("vertical", "int", 0, "1 flips top-bottom.", tensor_input=True)),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=same_as_input, sequences=True, input_layouts=INTERLEAVED,
))
