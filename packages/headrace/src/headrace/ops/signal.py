"""Schemas of the signal ops of the ASR pipelines (preemphasis_filter, nonsilent_region) and the generic ops they
lean on (slice, normalize, shapes), with DALI's names, arguments, defaults and outputs."""

import numpy as np

from headrace.enums import DALIDataType
from headrace.output_specs import keeps_layout_with_dtype_arg, numpy_dtype, per_sample_scalar, selected_axes
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

OUT_OF_BOUNDS_POLICIES = ("error", "pad", "constant", "trim_to_shape", "edge", "clamp", "reflect", "reflect_1001",
                          "reflect_101", "wrap")
SLICE_START = ("start", "rel_start")
SLICE_END = ("end", "rel_end", "shape", "rel_shape")


def _region(a: SpecArgs) -> list[OutputSpec]:
    """Two int32 scalars per sample: the first index of the non-silent region and its length."""
    return [per_sample_scalar(np.int32), per_sample_scalar(np.int32)]


def _sliced(a: SpecArgs) -> list[OutputSpec]:
    """The window of the input: its layout, element type `dtype` (default the input's), sliced extents varying."""
    first = a.first
    dims = None
    if first.dims is not None:
        over = selected_axes(a, first.ndim) if a.args.get("axes") is not None else None
        dims = tuple(-1 if over is None or i in over else n for i, n in enumerate(first.dims))
    return [OutputSpec(numpy_dtype(a.literal("dtype")) or first.dtype, first.layout, dims)]


def _normalized(a: SpecArgs) -> list[OutputSpec]:
    """The input's shape and layout, normalized, of element type `dtype` (default float32)."""
    first = a.first
    return [OutputSpec(numpy_dtype(a.args["dtype"]) or np.dtype(np.float32), first.layout, first.dims)]


def _shape_of(a: SpecArgs) -> list[OutputSpec]:
    """Each sample's shape: a 1D tensor of its extents, of element type `dtype` (default int64)."""
    ndim = a.first.ndim
    return [OutputSpec(numpy_dtype(a.args["dtype"]), None, (ndim if ndim is not None else -1,))]


def _slice_rule(given: frozenset[str]) -> str | None:
    """DALI's: one way to give the start and one to give the end; axes and axis_names exclude each other."""
    for group in (SLICE_START, SLICE_END, ("axes", "axis_names")):
        both = sorted(given & set(group))
        if len(both) > 1:
            return f"{' and '.join(both)} exclude each other"
    return None


def _normalize_rule(given: frozenset[str]) -> str | None:
    """DALI's: axes and axis_names exclude each other."""
    return "axes and axis_names exclude each other" if {"axes", "axis_names"} <= given else None


register(OpSchema(
    name="preemphasis_filter",
    doc="Preemphasis: Y[t] = X[t] - preemph_coeff * X[t-1] over the sample's elements in order, with X[-1] = X[0] "
        "('clamp'), 0 ('zero') or X[1] ('reflect'). Computed in float32 (float64 for float64 input), as DALI.",
    args=(
        Arg("preemph_coeff", "float", 0.97, "The coefficient `coeff`; 0 copies the input.", tensor_input=True),
        Arg("border", "str", "clamp", "The value before the first sample: 'clamp' (X[0]), 'zero' or 'reflect' "
            "(X[1]).", choices=("zero", "clamp", "reflect")),
        Arg("dtype", "dtype", DALIDataType.FLOAT, "Output element type (integers round half away from zero and "
            "saturate)."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=keeps_layout_with_dtype_arg,
))

register(OpSchema(
    name="nonsilent_region",
    doc="Leading and trailing silence detection in 1D audio: the short-term power (mean square over "
        "`window_length` samples ending at each sample) against `cutoff_db` below `reference_power` (default: the "
        "signal's largest short-term power). Outputs (begin, length) of the non-silent region, int32 scalars, "
        "widened by window_length - 1 at the start as DALI does; (0, 0) when all is silent. The GPU version "
        "computes on the host, as DALI's does.",
    args=(
        Arg("cutoff_db", "float", -60.0, "Threshold in dB below the reference power under which it is silence."),
        Arg("reference_power", "float", None, "Power that 0 dB refers to (positive); default the maximum of the "
            "short-term power."),
        Arg("reset_interval", "int", 8192, "Samples after which the running sum is recomputed (float input; a "
            "multiple of window_length, or -1 for never)."),
        Arg("window_length", "int", 2048, "Length of the window of the short-term power (at most the signal's)."),
    ),
    min_inputs=1, max_inputs=1, num_outputs=2, devices=("cpu", "gpu"),
    state="none", output_spec=_region,
))

register(OpSchema(
    name="slice",
    doc="Extracts a window: positional inputs `anchor` and `shape` (1D or scalar per sample; integers are "
        "absolute, floats normalized unless normalized_anchor / normalized_shape are False), or the arguments "
        "start / rel_start with end / rel_end / shape / rel_shape. They list coordinates of `axes` (or "
        "`axis_names`, default 'WH': x before y); other axes are kept whole. Coordinates round half away from "
        "zero. Outside the input, out_of_bounds_policy decides: error, pad / constant (fill_values, one or one per "
        "channel), trim_to_shape, edge / clamp, reflect / reflect_1001, reflect_101 or wrap.",
    args=(
        Arg("axes", "int", None, "The axes the coordinates refer to, in order; negative counts from the end.",
            list_of=True),
        Arg("axis_names", "str", None, "The axes by layout letters (HW, HWC or DHWC by dimensions); default 'WH'."),
        Arg("normalized_anchor", "bool", True, "A float positional anchor is a fraction of the extents."),
        Arg("normalized_shape", "bool", True, "A float positional shape is a fraction of the extents."),
        Arg("start", "int", None, "Start coordinates.", list_of=True, tensor_input=True),
        Arg("rel_start", "float", None, "Start coordinates as fractions of the extents.", list_of=True,
            tensor_input=True),
        Arg("end", "int", None, "End coordinates (exclusive).", list_of=True, tensor_input=True),
        Arg("rel_end", "float", None, "End coordinates as fractions of the extents.", list_of=True,
            tensor_input=True),
        Arg("shape", "int", None, "Extents of the window.", list_of=True, tensor_input=True),
        Arg("rel_shape", "float", None, "Extents as fractions of the input's.", list_of=True, tensor_input=True),
        Arg("out_of_bounds_policy", "str", "error", "What a window reaching outside the input gets.",
            choices=OUT_OF_BOUNDS_POLICIES),
        Arg("fill_values", "float", [0.0], "Padding values: one, or one per channel of the output (the layout's C "
            "axis, assumed HWC / DHWC by dimensions); converted as C++'s static_cast, as DALI.", list_of=True),
        Arg("dtype", "dtype", None, "Output element type (float, float16 or uint8; default the input's): floats "
            "saturate, uint8 saturates and truncates.",
            choices=(DALIDataType.FLOAT, DALIDataType.FLOAT16, DALIDataType.UINT8)),
    ),
    min_inputs=1, max_inputs=3, devices=("cpu", "gpu"), rule=_slice_rule, default_axis_names="WH",
    state="none", output_spec=_sliced,
))

register(OpSchema(
    name="normalize",
    doc="out = scale * (in - mean) / stddev + shift, with mean and stddev computed over `axes` (default all) of "
        "each sample, or of the whole batch with batch=True (samples must then agree on the other axes), unless "
        "given: a scalar, or per sample as a DataNode of one value per element of the reduced shape. A zero "
        "variance (or stddev) gives `shift`. Statistics are summed in float64; DALI sums in float32, so results "
        "agree to float32 rounding, not bit for bit.",
    args=(
        Arg("axes", "int", None, "Axes to reduce (at least one); default all.", list_of=True),
        Arg("axis_names", "str", None, "Axes to reduce by layout letters (HW, HWC or DHWC by dimensions)."),
        Arg("mean", "float", None, "Mean to subtract; default computed.", list_of=True, tensor_input=True),
        Arg("stddev", "float", None, "Standard deviation to divide by; default computed.", list_of=True,
            tensor_input=True),
        Arg("scale", "float", 1.0, "Multiplier of the normalized value."),
        Arg("shift", "float", 0.0, "Value the mean maps to."),
        Arg("epsilon", "float", 0.0, "Added to the variance."),
        Arg("ddof", "int", 0, "Delta degrees of freedom: the variance divides by N - ddof."),
        Arg("batch", "bool", False, "Compute mean and standard deviation over the whole batch."),
        Arg("dtype", "dtype", DALIDataType.FLOAT, "Output element type (integers round half away from zero and "
            "saturate)."),
    ),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), whole_batch=True, rule=_normalize_rule,
    state="none", output_spec=_normalized,
))

register(OpSchema(
    name="shapes",
    doc="The shape of each sample, as a 1D tensor. On the GPU the result is a GPU tensor (`.cpu()` brings it "
        "back).",
    args=(Arg("dtype", "dtype", DALIDataType.INT64, "Element type of the extents."),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
    state="none", output_spec=_shape_of,
))
