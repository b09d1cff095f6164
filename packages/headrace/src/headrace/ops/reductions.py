"""Schemas of the reductions (`fn.reductions.*`): over `axes` (or `axis_names`) of each sample."""

from headrace.schema import Arg, OpSchema, register

_AXES = (
    Arg("axes", "int", None, "Axes to reduce; default all. Negative values count from the end.", list_of=True),
    Arg("axis_names", "str", None, "Axes to reduce by layout letters (HW, HWC or DHWC by dimensions), instead "
        "of `axes`."),
    Arg("keep_dims", "bool", False, "Keep reduced axes with extent 1."),
)
_DTYPE = Arg("dtype", "dtype", None, "Output element type; default: float for mean, and for sum the input's "
             "float type or 64-bit integers.")

for _name, _doc, _dtype in (
    ("sum", "Sum of the elements.", True),
    ("mean", "Mean of the elements.", True),
    ("mean_square", "Mean of the squared elements.", True),
    ("rms", "Root mean square of the elements.", True),
    ("min", "Smallest element.", False),
    ("max", "Largest element.", False),
):
    register(OpSchema(
        name=f"reductions.{_name}", doc=_doc, args=(*_AXES, *((_DTYPE,) if _dtype else ())),
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
        state="none",
    ))

for _name, _doc in (("std_dev", "Standard deviation, given the data and its mean (over the same axes, as "
                                "fn.reductions.mean gives it)."),
                    ("variance", "Variance, given the data and its mean (over the same axes).")):
    register(OpSchema(
        name=f"reductions.{_name}", doc=_doc,
        args=(*_AXES, Arg("ddof", "int", 0, "Delta degrees of freedom: divide by N - ddof.")),
        min_inputs=2, max_inputs=2, devices=("cpu", "gpu"),
        state="none",
    ))
