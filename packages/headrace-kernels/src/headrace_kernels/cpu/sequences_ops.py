"""CPU kernels of sequence_rearrange (a gather of frames) and per_frame (the data as it is), with DALI's checks."""

from __future__ import annotations

import numpy as np

from headrace_kernels.registry import cpu_kernel


def check_sequence_layout(layout: str, op: str) -> None:
    """DALI's rule: data with a layout is a sequence only if its layout starts with 'F'."""
    if layout and not layout.startswith("F"):
        raise ValueError(f"{op} needs a sequence, whose layout starts with 'F' (frames), got layout {layout!r}")


def frame_order(new_order, frames: int) -> np.ndarray:
    """`new_order` as an int64 index array, checked against the number of input frames."""
    order = np.asarray(new_order).reshape(-1)
    if order.size == 0:
        raise ValueError("argument 'new_order' is empty: empty result sequences are not allowed")
    if order.dtype.kind not in "iub":
        raise ValueError(f"argument 'new_order' must be integers, got {order.dtype}")
    order = order.astype(np.int64)
    bad = np.flatnonzero((order < 0) | (order >= frames))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"argument 'new_order'[{i}] is {int(order[i])}; it must be in [0, {frames}) for a sequence "
                         f"of {frames} frames")
    return order


def sequence_shape(shape: tuple[int, ...], op: str) -> None:
    """A sequence has at least one dimension (its frames)."""
    if not shape:
        raise ValueError(f"{op} needs data with an outermost frame axis, got a scalar")


def per_frame_check(layout: str, replace: bool) -> None:
    """DALI's rule: without `replace`, an input layout must start with 'F'."""
    if layout and not replace and not layout.startswith("F"):
        raise ValueError(f"per_frame: the input layout must start with 'F', got {layout!r} (give replace=True to "
                         "replace its first letter)")


@cpu_kernel("sequence_rearrange")
def sequence_rearrange(inputs, args, ctx):
    data = np.asarray(inputs[0])
    check_sequence_layout(ctx.input_layouts[0] if ctx.input_layouts else "", "sequence_rearrange")
    sequence_shape(data.shape, "sequence_rearrange")
    return data[frame_order(args["new_order"], data.shape[0])]


@cpu_kernel("per_frame")
def per_frame(inputs, args, ctx):
    data = np.asarray(inputs[0])
    per_frame_check(ctx.input_layouts[0] if ctx.input_layouts else "", bool(args["replace"]))
    sequence_shape(data.shape, "per_frame")
    return data
