"""Schemas of the noise ops (noise.gaussian, noise.salt_and_pepper, noise.shot): each element's noise comes from the
sample's own keyed stream, so CPU and GPU give the same output; the element type is kept."""

from headrace.output_specs import same_as_input
from headrace.schema import Arg, OpSchema, registrar

register = registrar(__name__)

register(OpSchema(
    name="noise.gaussian",
    doc="Adds Gaussian noise N(mean, stddev) to every element; integer outputs are rounded and saturated, as DALI.",
    args=(Arg("mean", "float", 0.0, "Mean of the noise.", tensor_input=True),
          Arg("stddev", "float", 1.0, "Standard deviation of the noise.", tensor_input=True)),
    min_inputs=1, max_inputs=1,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=same_as_input,
))

register(OpSchema(
    name="noise.salt_and_pepper",
    doc="Replaces elements, each with probability `prob`, by `salt_val` (a fraction `salt_vs_pepper` of them) or "
        "`pepper_val`. Unless `per_channel`, the channels of a pixel share one draw; the channels are the last axis "
        "(kernels see arrays, not layouts: DALI's channel-first layouts are not told apart).",
    args=(Arg("prob", "float", 0.05, "Probability of an element being replaced.", tensor_input=True),
          Arg("salt_vs_pepper", "float", 0.5, "Probability of a replaced element being salt.", tensor_input=True),
          Arg("salt_val", "float", None, "Value of salt; default 1.0 for floats, the type's maximum for integers.",
              tensor_input=True),
          Arg("pepper_val", "float", None, "Value of pepper; default -1.0 for floats, the type's minimum for "
              "integers.", tensor_input=True),
          Arg("per_channel", "bool", False, "Draw for every channel independently.")),
    min_inputs=1, max_inputs=1,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=same_as_input,
))

register(OpSchema(
    name="noise.shot",
    doc="Shot (Poisson) noise: each element x becomes Poisson(x / factor) * factor, rounded and saturated to the "
        "element type; factor 0 leaves the input unchanged.",
    args=(Arg("factor", "float", 12.0, "The factor: larger is noisier. The default is the 12 DALI 2.4 applies when "
              "the argument is not given (its schema says 20).", tensor_input=True),),
    min_inputs=1, max_inputs=1,
    devices=("cpu", "gpu"), random=True, state="rng", output_spec=same_as_input,
))
