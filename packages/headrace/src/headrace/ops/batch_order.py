"""Schemas of the ops that reorder a batch: permute_batch (samples picked by index) and batch_permutation (random
indices for it), as DALI's. Both see the whole batch at once."""

from headrace.output_specs import per_sample_scalar, same_as_input
from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _indices(a: SpecArgs) -> list[OutputSpec]:
    """One int32 index per sample, into the batch."""
    return [per_sample_scalar("int32")]


register(OpSchema(
    name="permute_batch",
    doc="out[i] = in[indices[i]]: a batch made of the input's samples in another order (repeats and omissions "
        "allowed). `indices` is a list of one index per sample, or a per-sample scalar DataNode (e.g. "
        "batch_permutation's output); a single index is taken by every sample.",
    args=(Arg("indices", "int", REQUIRED, "Index of the input sample each output sample is, in [0, batch size).",
              list_of=True, tensor_input=True),),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), whole_batch=True,
    state="none", output_spec=same_as_input,
))

register(OpSchema(
    name="batch_permutation",
    doc="Random indices into the batch, one per sample (int32 scalars): a permutation, or with `allow_repetitions` "
        "independent draws; `no_fixed_points` excludes out[i] == i (ignored for a batch of one).",
    args=(Arg("allow_repetitions", "bool", False, "Draw each index independently (repeats and omissions)."),
          Arg("no_fixed_points", "bool", False, "No sample keeps its place: out[i] != i.")),
    devices=("cpu", "gpu"), whole_batch=True, random=True,
    state="rng", output_spec=_indices,
))
