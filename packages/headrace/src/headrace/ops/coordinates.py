"""Schema of coord_transform: out = M @ in + T over the innermost axis of points or vectors, as DALI's."""

from __future__ import annotations

from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
from headrace.schema import Arg, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)


def _transformed(a: SpecArgs) -> list[OutputSpec]:
    """The input's points with m components each (m = M's rows), of element type `dtype`, in the input's layout."""
    first = a.first
    dims = None
    if first.dims is not None and first.dims:
        dims = (*first.dims[:-1], _rows(a, first.dims[-1]))
    return [OutputSpec(numpy_dtype(a.args["dtype"]), first.layout, dims)]


def _rows(a: SpecArgs, n: int) -> int:
    """The number of output components when it is known from literal arguments, else -1."""
    if {"M", "MT"} & a.per_sample or n < 0:
        return -1
    matrix, fused = a.args["M"], a.args["MT"]
    given, columns = (fused, n + 1) if fused is not None else (matrix, n)
    if given is None or len(given) == 1:
        return n
    return len(given) // columns if len(given) % columns == 0 else -1


def _rule(given: frozenset[str]) -> str | None:
    if "MT" in given and {"M", "T"} & given:
        return "the combined `MT` argument cannot be used together with `M` or `T`"
    return None


register(OpSchema(
    name="coord_transform",
    doc="Applies out = M @ in + T to every n-component vector of the input's innermost axis (points, colours); M "
        "is m x n (row-major; one value: that value times the identity), T has m values (one value: repeated). "
        "MT gives [M T] as one m x (n + 1) matrix, as the transforms.* ops make. Integer outputs are rounded "
        "half away from zero and clamped.",
    args=(Arg("M", "float", None, "The matrix, row-major (default the identity).", list_of=True, tensor_input=True),
          Arg("T", "float", None, "The translation vector (default zeros).", list_of=True, tensor_input=True),
          Arg("MT", "float", None, "The block matrix [M T], row-major.", list_of=True, tensor_input=True),
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Output element type: FLOAT or the input's type.")),
    min_inputs=1, max_inputs=1, devices=("cpu", "gpu"), state="none", output_spec=_transformed, rule=_rule,
))
