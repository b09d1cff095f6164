"""Schemas of the reductions (`fn.reductions.*`): over `axes` (or `axis_names`) of each sample."""

import numpy as np

from headrace.output_specs import numpy_dtype, reduced
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_AXES = (
    Arg("axes", "int", None, "Axes to reduce; default all. Negative values count from the end.", list_of=True),
    Arg("axis_names", "str", None, "Axes to reduce by layout letters (HW, HWC or DHWC by dimensions), instead "
        "of `axes`."),
    Arg("keep_dims", "bool", False, "Keep reduced axes with extent 1."),
)
_DTYPE = Arg("dtype", "dtype", None, "Output element type; default: float for mean, and for sum the input's "
             "float type or 64-bit integers.")


def _sum(a: SpecArgs) -> list[OutputSpec]:
    """The sums over `axes`, of `dtype` (default: float32 for floats up to 32 bits, wider floats; else 64-bit ints)."""
    source = a.first.dtype
    dtype = numpy_dtype(a.args["dtype"])
    if dtype is None and source is not None:
        dtype = (np.dtype(np.float32) if source.itemsize <= 4 else source) if source.kind == "f" else \
            np.dtype(np.uint64 if source.kind in "ub" else np.int64)
    return [reduced(a.first, a, dtype)]


def _float_statistic(a: SpecArgs) -> list[OutputSpec]:
    """The statistic over `axes`, of `dtype` (default float32)."""
    return [reduced(a.first, a, numpy_dtype(a.args["dtype"]) or np.dtype(np.float32))]


def _extreme(a: SpecArgs) -> list[OutputSpec]:
    """The extreme elements over `axes`, of the input's type."""
    return [reduced(a.first, a, a.first.dtype)]


def _deviation(a: SpecArgs) -> list[OutputSpec]:
    """The float32 statistic over `axes`."""
    return [reduced(a.first, a, np.dtype(np.float32))]


for _name, _doc, _spec in (
    ("sum", "Sum of the elements.", _sum),
    ("mean", "Mean of the elements.", _float_statistic),
    ("mean_square", "Mean of the squared elements.", _float_statistic),
    ("rms", "Root mean square of the elements.", _float_statistic),
    ("min", "Smallest element.", _extreme),
    ("max", "Largest element.", _extreme),
):
    register(OpSchema(
        name=f"reductions.{_name}", doc=_doc, args=(*_AXES, *((_DTYPE,) if _spec is not _extreme else ())),
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
        state="none", output_spec=_spec,
    ))

for _name, _doc in (("std_dev", "Standard deviation, given the data and its mean (over the same axes, as "
                                "fn.reductions.mean gives it)."),
                    ("variance", "Variance, given the data and its mean (over the same axes).")):
    register(OpSchema(
        name=f"reductions.{_name}", doc=_doc,
        args=(*_AXES, Arg("ddof", "int", 0, "Delta degrees of freedom: divide by N - ddof.")),
        min_inputs=2, max_inputs=2, devices=("cpu", "gpu"),
        state="none", output_spec=_deviation,
    ))
