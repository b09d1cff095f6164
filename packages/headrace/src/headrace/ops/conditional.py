"""Schemas of the nodes that `enable_conditionals=True` inserts for `if`/`and`/`or`/`not` on data.

A branch is a per-sample token: `split` gives each sample a token on the side its predicate chose and none on the
other; every node defined inside a branch carries that token as its guard and runs only where it has a value.
`merge` joins the value a variable had in each branch.
"""

import numpy as np

from headrace.output_specs import joined, per_sample_scalar
from headrace.schema import OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _condition(a: SpecArgs) -> list[OutputSpec]:
    """One bool per sample: a condition."""
    return [per_sample_scalar(np.bool_)]


def _tokens(a: SpecArgs) -> list[OutputSpec]:
    """Two branch tokens (a bool per sample, on one side only): the samples that take the `if`, and the others."""
    return [per_sample_scalar(np.bool_, "branch token")] * 2


def _merged(a: SpecArgs) -> list[OutputSpec]:
    """Each sample's value from the branch it ran: the type, layout and extents the two branches agree on."""
    return [joined(a.inputs[0], a.inputs[1])]

register(OpSchema(
    name="_conditional.predicate",
    doc="Checks that each sample is one boolean (or integer) value and gives it as a bool scalar: the condition "
        "of an `if`, or an operand of `and`/`or` on data.",
    min_inputs=1, max_inputs=1, devices=("cpu",),
    state="none", output_spec=_condition,
))

register(OpSchema(
    name="_conditional.split",
    doc="Splits the samples by a predicate: output 0 has a token for the samples where it is true, output 1 for "
        "those where it is false; nodes guarded by a token run only for the samples that have it.",
    min_inputs=1, max_inputs=1, num_outputs=2, devices=("cpu",),
    state="none", output_spec=_tokens,
))

register(OpSchema(
    name="_conditional.merge",
    doc="After an `if` on data: inputs (value from the true branch, value from the false branch, predicate); "
        "each sample takes the value of the branch it ran.",
    min_inputs=3, max_inputs=3, devices=("cpu", "gpu"),
    state="none", output_spec=_merged,
))

register(OpSchema(
    name="_conditional.not_",
    doc="Logical negation of a per-sample boolean scalar (`not` on data).",
    min_inputs=1, max_inputs=1, devices=("cpu",),
    state="none", output_spec=_condition,
))
