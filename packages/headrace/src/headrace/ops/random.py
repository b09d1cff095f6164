"""Schemas of the random number generators; each sample's draw is keyed by (seed, node, sample index). As DALI's,
uniform and normal take an optional shape-like input (`fn.random.normal(audio)`: one draw per element of `audio`,
the ASR examples' dither)."""

from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_SHAPE = Arg("shape", "int", None, "Shape of each sample's output (a DataNode gives each sample its own); a scalar "
             "when neither this nor a shape-like input is given (not both).", list_of=True, tensor_input=True)
_SHAPE_LIKE = (" An optional input (DALI's `shape_like`) gives the output its shape, sample by sample; only its shape "
               "is read. On the GPU (a GPU input, or device='gpu') the draws are made on the host from the samples' "
               "own streams and uploaded: CPU and GPU give the same numbers.")


def _drawn(a: SpecArgs) -> list[OutputSpec]:
    """Random draws of element type `dtype`, shaped as the shape-like input, else as `shape` (default a scalar)."""
    if a.inputs:
        return [OutputSpec(numpy_dtype(a.args["dtype"]), None, a.first.dims)]
    if "shape" in a.per_sample:  # each sample's own
        return [OutputSpec(numpy_dtype(a.args["dtype"]), None, None)]
    return [OutputSpec(numpy_dtype(a.args["dtype"]), None, tuple(a.args["shape"] or ()))]


register(OpSchema(
    name="random.coin_flip",
    doc="Bernoulli draws: 1 with `probability`, else 0." + _SHAPE_LIKE,
    args=(Arg("probability", "float", 0.5, "Probability of a 1.", tensor_input=True), _SHAPE,
          Arg("dtype", "dtype", DALIDataType.INT32, "Element type of the output: INT32, UINT8 or BOOL (DALI's).",
              choices=(DALIDataType.INT32, DALIDataType.UINT8, DALIDataType.BOOL))),
    min_inputs=0, max_inputs=1,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=_drawn,
))

register(OpSchema(
    name="random.uniform",
    doc="Uniform draws in [range[0], range[1]), or from the discrete set `values`." + _SHAPE_LIKE,
    args=(Arg("range", "float", [-1.0, 1.0], "The interval.", list_of=True, list_len=(2, 2), tensor_input=True),
          Arg("values", "float", None, "A discrete set to draw from, instead of `range`.", list_of=True,
              tensor_input=True), _SHAPE,
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the output.")),
    min_inputs=0, max_inputs=1,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=_drawn,
))

register(OpSchema(
    name="random.normal",
    doc="Normal draws with `mean` and `stddev`." + _SHAPE_LIKE,
    args=(Arg("mean", "float", 0.0, "Mean.", tensor_input=True),
          Arg("stddev", "float", 1.0, "Standard deviation.", tensor_input=True), _SHAPE,
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the output.")),
    min_inputs=0, max_inputs=1,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=_drawn,
))
