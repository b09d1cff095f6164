"""Schemas of random.choice and random.beta: per-sample draws from the sample's own keyed stream (CPU and GPU give
the same numbers: the GPU kernels draw on the host and upload)."""

from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_SHAPE = Arg("shape", "int", None, "Shape of each sample's draws; a scalar when neither this nor a shape-like input "
             "is given (not both).", list_of=True, tensor_input=True)


def _chosen(a: SpecArgs) -> list[OutputSpec]:
    """Elements (rows) of the candidates input, of its element type, `shape` (or the shape-like input's) many."""
    first = a.first
    rows = None if first.dims is None else tuple(first.dims[1:])
    if len(a.inputs) > 1:
        draws = a.inputs[1].dims
    elif "shape" in a.per_sample:
        draws = None
    else:
        draws = tuple(a.args["shape"] or ())
    dims = None if rows is None or draws is None else (*draws, *rows)
    return [OutputSpec(first.dtype, None, dims)]


def _beta(a: SpecArgs) -> list[OutputSpec]:
    """Beta draws in [0, 1] of element type `dtype`, shaped as the shape-like input, else as `shape`."""
    if a.inputs:
        dims = a.first.dims
    else:
        dims = None if "shape" in a.per_sample else tuple(a.args["shape"] or ())
    return [OutputSpec(numpy_dtype(a.args["dtype"]), None, dims)]


register(OpSchema(
    name="random.choice",
    doc="Random picks from the first input: a scalar integer n picks from 0..n-1, a tensor picks its elements (rows "
        "along the first axis), with probabilities `p` (default uniform). The output keeps the input's element type. "
        "An optional second input gives the output its shape (DALI's `shape_like`; only its shape is read).",
    args=(Arg("p", "float", None, "Probability of each candidate; they must sum to 1.", list_of=True,
              tensor_input=True), _SHAPE),
    min_inputs=1, max_inputs=2,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=_chosen,
))

register(OpSchema(
    name="random.beta",
    doc="Draws from the beta distribution Beta(alpha, beta) in [0, 1]. An optional input gives the output its shape "
        "(DALI's `shape_like`; only its shape is read).",
    args=(Arg("alpha", "float", 1.0, "The alpha parameter, positive.", tensor_input=True),
          Arg("beta", "float", 1.0, "The beta parameter, positive.", tensor_input=True), _SHAPE,
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the output: FLOAT or FLOAT64.",
              choices=(DALIDataType.FLOAT, DALIDataType.FLOAT64))),
    min_inputs=0, max_inputs=1,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=_beta,
))
