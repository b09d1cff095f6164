"""CPU `_tensor_subscript` (DataNode indexing): each sample indexed as numpy's basic indexing does, with DALI's checks
(an index out of range, a step of 0, more subscripts than dimensions) and messages."""

from __future__ import annotations

import numpy as np

from headrace_kernels.registry import cpu_kernel

_KINDS = ("at", "lo", "hi", "step")


def subscript_axes(num_subscripts: int, ellipsis_at: int, ndim: int) -> list[int]:
    """The input axis each subscript applies to: in order, those after an ellipsis counted from the last axis."""
    if ellipsis_at < 0:
        return list(range(num_subscripts))
    return [i if i < ellipsis_at else ndim - num_subscripts + i for i in range(num_subscripts)]


def _scalar(args: dict, name: str) -> int | None:
    """Argument `name` as a Python int (a per-sample value must be one integer), None when not given."""
    value = args.get(name)
    if value is None:
        return None
    array = np.asarray(value)
    if array.size != 1 or array.dtype.kind not in "iub":
        raise ValueError(f"argument '{name}' must be one integer per sample, got {array.dtype} of shape "
                         f"{array.shape}")
    return int(array.reshape(()))


def subscript_index(shape: tuple[int, ...], args: dict) -> tuple:
    """The numpy index (ints and slices) that `args` (at_i, lo_i, hi_i, step_i, num_subscripts, ellipsis_at)
    give for a sample of `shape`; ValueError for an index out of range, a zero step or too many subscripts."""
    count, ndim = int(args["num_subscripts"]), len(shape)
    beyond = [k for k, v in args.items() if v is not None and k.split("_")[0] in _KINDS
              and k.split("_")[-1].isdigit() and int(k.split("_")[-1]) >= count]
    if beyond:
        raise ValueError(f"argument '{beyond[0]}' is beyond the {count} subscripts of 'num_subscripts'")
    if count > ndim:
        raise ValueError(f"too many indices ({count}) for a {ndim}-D tensor of shape {tuple(shape)}")
    index: list = [slice(None)] * ndim
    for i, axis in enumerate(subscript_axes(count, int(args.get("ellipsis_at", -1)), ndim)):
        at = _scalar(args, f"at_{i}")
        if at is not None:
            if not -shape[axis] <= at < shape[axis]:
                raise ValueError(f"index {at} (argument 'at_{i}') is out of range for axis {axis} of length "
                                 f"{shape[axis]} (sample shape {tuple(shape)})")
            index[axis] = at
            continue
        lo, hi, step = (_scalar(args, f"{kind}_{i}") for kind in ("lo", "hi", "step"))
        if step == 0:
            raise ValueError(f"argument 'step_{i}': the step cannot be zero (axis {axis})")
        index[axis] = slice(lo, hi, step)
    return tuple(index)


@cpu_kernel("_tensor_subscript")
def tensor_subscript(inputs, args, ctx):
    sample = np.asarray(inputs[0])
    out = np.asarray(sample[subscript_index(sample.shape, args)])
    return out if out.flags.c_contiguous else out.copy()  # (np.ascontiguousarray would make a scalar 1-D)
