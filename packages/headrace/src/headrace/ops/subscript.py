"""Schema of `_tensor_subscript`, the op behind DataNode indexing (`x[5:25, 10:-5]`, `x[:, :, 1]`), with DALI's
arguments: `at_i` (an index), `lo_i`/`hi_i`/`step_i` (a range) for subscript i, each literal or per sample."""

from headrace.graph import MAX_SUBSCRIPTS
from headrace.schema import REQUIRED, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

_KINDS = (("at", "Index into axis {i} (negative counts from the end); the axis is removed."),
          ("lo", "Start of the range of axis {i}, as in Python (default: its start; clamped)."),
          ("hi", "End of the range of axis {i}, excluded, as in Python (default: its end; clamped)."),
          ("step", "Step of the range of axis {i} (not 0; negative walks backwards)."))


def _index_or_range(given: frozenset[str]) -> str | None:
    """Subscript i is an index or a range, not both."""
    for i in range(MAX_SUBSCRIPTS):
        if f"at_{i}" in given and any(f"{k}_{i}" in given for k in ("lo", "hi", "step")):
            return f"subscript {i} is given both an index (at_{i}) and a range (lo_{i}, hi_{i}, step_{i})"
    return None


def _extent(extent: int, lo: int | None, hi: int | None, step: int | None) -> int:
    if extent < 0 or step == 0:
        return -1
    return len(range(*slice(lo, hi, step).indices(extent)))


def _indexed(a: SpecArgs) -> list[OutputSpec]:
    """The input's element type; the axes given an index removed (with their layout letters), ranges resized."""
    from headrace_kernels.cpu.subscript_ops import subscript_axes

    first = a.first
    count, ellipsis = a.args["num_subscripts"], a.args["ellipsis_at"]
    ndim = first.ndim if first.ndim is not None else (len(first.layout) if first.layout else None)
    if ndim is None or count > ndim:
        return [OutputSpec(first.dtype, None, None)]
    dims = list(first.dims) if first.dims is not None else None
    kept = list(range(ndim))
    for i, axis in enumerate(subscript_axes(count, ellipsis, ndim)):
        if a.args.get(f"at_{i}") is not None or f"at_{i}" in a.per_sample:
            kept.remove(axis)
        elif dims is not None:
            bounds = [a.literal(f"{k}_{i}") for k in ("lo", "hi", "step")]
            per_sample = any(f"{k}_{i}" in a.per_sample for k in ("lo", "hi", "step"))
            dims[axis] = -1 if per_sample else _extent(dims[axis], *bounds)
    layout = "".join(first.layout[k] for k in kept) if first.layout and len(first.layout) == ndim else None
    return [OutputSpec(first.dtype, layout, None if dims is None else tuple(dims[k] for k in kept))]


register(OpSchema(
    name="_tensor_subscript",
    doc="NumPy-like basic indexing of every sample, which `DataNode.__getitem__` inserts: subscript i is an index "
        "(`at_i`, which removes the axis and its layout letter) or a range (`lo_i`, `hi_i`, `step_i`, clamped as "
        "Python's slices; absent ones default); axes without a subscript are kept whole. An index out of range, a "
        "step of 0 or more subscripts than the sample has dimensions is an error. With no index or bound it only "
        "checks that the sample has `num_subscripts` dimensions (DALI's `_subscript_dim_check`).",
    args=(*(Arg(f"{kind}_{i}", "int", None, doc.format(i=i), tensor_input=True)
            for i in range(MAX_SUBSCRIPTS) for kind, doc in _KINDS),
          Arg("num_subscripts", "int", REQUIRED, "How many subscripts the expression has (full ranges included).",
              limits=Limits(0, MAX_SUBSCRIPTS)),
          Arg("ellipsis_at", "int", -1, "Where `...` stands among the subscripts (-1: none); the subscripts after "
              "it apply to the last axes. A headrace extension: DALI has no ellipsis.",
              limits=Limits(-1, MAX_SUBSCRIPTS))),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), rule=_index_or_range,
    state="none", output_spec=_indexed,
))
