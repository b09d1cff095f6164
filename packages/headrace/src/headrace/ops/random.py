"""Schemas of the random number generators; each sample's draw is keyed by (seed, node, sample index)."""

from headrace.enums import DALIDataType
from headrace.output_specs import drawn
from headrace.schema import Arg, OpSchema, registrar

register = registrar(__name__)

_SHAPE = Arg("shape", "int", [], "Shape of each sample's output; [] for a scalar.", list_of=True)

register(OpSchema(
    name="random.coin_flip",
    doc="Bernoulli draws: 1 with `probability`, else 0.",
    args=(Arg("probability", "float", 0.5, "Probability of a 1.", tensor_input=True), _SHAPE,
          Arg("dtype", "dtype", DALIDataType.INT32, "Element type of the output.")),
    devices=("cpu",), random=True, state="rng", output_spec=drawn,
))

register(OpSchema(
    name="random.uniform",
    doc="Uniform draws in [range[0], range[1]), or from the discrete set `values`.",
    args=(Arg("range", "float", [-1.0, 1.0], "The interval.", list_of=True, list_len=(2, 2), tensor_input=True),
          Arg("values", "float", None, "A discrete set to draw from, instead of `range`.", list_of=True), _SHAPE,
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the output.")),
    devices=("cpu",), random=True, state="rng", output_spec=drawn,
))

register(OpSchema(
    name="random.normal",
    doc="Normal draws with `mean` and `stddev`.",
    args=(Arg("mean", "float", 0.0, "Mean.", tensor_input=True),
          Arg("stddev", "float", 1.0, "Standard deviation.", tensor_input=True), _SHAPE,
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Element type of the output.")),
    devices=("cpu",), random=True, state="rng", output_spec=drawn,
))
