"""Axis helpers shared by the kernels: default layouts by dimension count, and `axes` / `axis_names` resolution."""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_LAYOUTS = {1: "W", 2: "HW", 3: "HWC", 4: "DHWC"}


def default_layout(ndim: int) -> str:
    """The layout a kernel assumes for a sample of `ndim` dimensions (kernels see arrays, not the graph's layouts)."""
    return DEFAULT_LAYOUTS.get(ndim, "")


def resolve_axes(axes: Sequence[int] | None, axis_names: str | None, ndim: int,
                 default: Sequence[int] | None = None) -> list[int]:
    """Axis indices from `axes` (negative allowed) or layout letters; `default` (or all axes) when neither."""
    if axes is not None:
        out = []
        for axis in axes:
            if not -ndim <= axis < ndim:
                raise ValueError(f"axis {axis} is out of range for a sample with {ndim} dimensions")
            out.append(axis % ndim)
        return out
    if axis_names is not None:
        layout = default_layout(ndim)
        missing = [name for name in axis_names if name not in layout]
        if missing:
            raise ValueError(f"axis_names {axis_names!r}: {''.join(missing)!r} not in the layout {layout!r} assumed "
                             f"for {ndim}-dimensional samples; give `axes` instead")
        return [layout.index(name) for name in axis_names]
    return list(default) if default is not None else list(range(ndim))
