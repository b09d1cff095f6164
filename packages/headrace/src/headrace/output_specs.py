"""Reusable output specs: the functions most op schemas name as `output_spec`, and the small helpers that op-specific
spec functions build on. Each spec function's docstring says in words what the output is."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from headrace import enums
from headrace.schema import OutputSpec, SpecArgs


def numpy_dtype(value: Any) -> np.dtype | None:
    """The numpy dtype of a `dtype` argument's value (a enums.DALIDataType); None stays None."""
    return None if value is None else enums.to_numpy_dtype(value)


def round_half_up(value: float) -> int:
    """An extent given as a float, rounded as the kernels round it (halves up)."""
    return int(math.floor(value + 0.5))


def hwc_dims(spec: OutputSpec) -> tuple[int, int, int]:
    """(height, width, channels) of an HWC input, -1 where unknown."""
    return spec.dims if spec.dims is not None and len(spec.dims) == 3 else (-1, -1, -1)


def insert_axis(layout: str | None, dims: tuple[int, ...] | None, axis: int, name: str | None,
                extent: int) -> tuple[str | None, tuple[int, ...] | None]:
    """Layout and dims with a new axis at `axis` (negative counts from the end of the output): the layout only when
    the input's is known and the new axis is named."""
    new_layout = None
    if layout and name:
        at = axis % (len(layout) + 1)
        new_layout = layout[:at] + name + layout[at:]
    new_dims = None
    if dims is not None and -len(dims) - 1 <= axis <= len(dims):
        at = axis % (len(dims) + 1)
        new_dims = (*dims[:at], extent, *dims[at:])
    return new_layout, new_dims


def joined(first: OutputSpec, second: OutputSpec) -> OutputSpec:
    """What either of two specs may be: the fields they agree on, -1 for extents that differ."""
    dims = None
    if first.dims is not None and second.dims is not None and len(first.dims) == len(second.dims):
        dims = tuple(a if a == b else -1 for a, b in zip(first.dims, second.dims, strict=True))
    return OutputSpec(first.dtype if first.dtype == second.dtype else None,
                      first.layout if first.layout == second.layout else None, dims)


def same_as_input(a: SpecArgs) -> list[OutputSpec]:
    """The input's data: its element type, layout and dims."""
    first = a.first
    return [OutputSpec(first.dtype, first.layout, first.dims)]


def keeps_layout_with_dtype_arg(a: SpecArgs) -> list[OutputSpec]:
    """Data of the input's layout and dims, of element type `dtype` (default the input's)."""
    first = a.first
    return [OutputSpec(numpy_dtype(a.literal("dtype")) or first.dtype, first.layout, first.dims)]


def declared(a: SpecArgs) -> list[OutputSpec]:
    """Data of the element type, layout and number of dimensions the arguments declare (extents vary)."""
    ndim = a.args.get("ndim")
    shape = a.args.get("shape")
    dims = tuple(shape) if shape is not None else ((-1,) * ndim if ndim is not None else None)
    return [OutputSpec(numpy_dtype(a.args.get("dtype")), a.args.get("layout"), dims)]


def per_sample_scalar(dtype: Any, note: str = "") -> OutputSpec:
    """A spec of one value per sample, of `dtype`."""
    return OutputSpec(np.dtype(dtype), None, (), note)


def selected_axes(a: SpecArgs, ndim: int | None) -> list[int] | None:
    """The axes a reduction or pad works on, as non-negative indices; None when they cannot be known here."""
    axes = a.args.get("axes")
    if axes is None:
        if a.args.get("axis_names"):  # names not resolved into axes: the input's layout is unknown
            return None
        return list(range(ndim)) if ndim is not None else None
    if ndim is None:
        return None
    if any(not -ndim <= axis < ndim for axis in axes):
        return None
    return sorted({axis % ndim for axis in axes})


def reduced(spec: OutputSpec, a: SpecArgs, dtype: np.dtype | None) -> OutputSpec:
    """What reducing `spec` over the node's `axes` gives (kept with extent 1 under keep_dims)."""
    keep = a.args.get("keep_dims", False)
    axes, layout = a.args.get("axes"), spec.layout
    if keep:
        out_layout = layout
    elif layout is None or axes is None:
        out_layout = None
    else:
        dropped = {axis % len(layout) for axis in axes}
        out_layout = "".join(c for i, c in enumerate(layout) if i not in dropped)
    over = selected_axes(a, spec.ndim)
    dims = None
    if over is not None and spec.dims is not None:
        dims = tuple(1 if i in over else n for i, n in enumerate(spec.dims)) if keep else \
            tuple(n for i, n in enumerate(spec.dims) if i not in over)
    return OutputSpec(dtype, out_layout, dims)


def permuted(spec: OutputSpec, perm: Sequence[int], permute_layout: bool) -> tuple[str | None, tuple[int, ...] | None]:
    """Layout (when `permute_layout`) and dims of `spec` with its axes in the order `perm`; None where unknown."""
    def valid(n: int) -> bool:
        return sorted(perm) == list(range(n))

    layout = "".join(spec.layout[p] for p in perm) if spec.layout and permute_layout and valid(len(spec.layout)) \
        else None
    dims = tuple(spec.dims[p] for p in perm) if spec.dims is not None and valid(len(spec.dims)) else None
    return layout, dims

