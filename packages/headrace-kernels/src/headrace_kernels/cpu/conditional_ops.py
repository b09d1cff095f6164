"""CPU kernels of the conditional nodes: predicate checks, the per-sample split into branch tokens, and merge."""

from __future__ import annotations

import numpy as np

from headrace_kernels.registry import cpu_kernel

_TOKEN = np.ones((), dtype=np.bool_)


def as_predicate(value) -> bool:
    """A condition sample as a bool: one boolean (or integer) value, else ValueError saying how to make one."""
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError(f"a condition must be one boolean per sample, got shape {array.shape}: reduce it first "
                         "(e.g. fn.reductions.max) or compare a scalar")
    if array.dtype.kind not in "biu":
        raise ValueError(f"a condition must be boolean (or integer), got {array.dtype}: compare it explicitly, "
                         "e.g. `if x > 0.5:`")
    return bool(array.reshape(()))


@cpu_kernel("_conditional.predicate")
def predicate(inputs, args, ctx):
    return np.array(as_predicate(inputs[0]))


@cpu_kernel("_conditional.not_")
def not_(inputs, args, ctx):
    return np.array(not as_predicate(inputs[0]))


@cpu_kernel("_conditional.split")
def split(inputs, args, ctx):
    """A token on the side this sample takes; None (not on that branch) on the other."""
    return (_TOKEN, None) if as_predicate(inputs[0]) else (None, _TOKEN)


@cpu_kernel("_conditional.merge")
def merge(inputs, args, ctx):
    if_true, if_false, condition = inputs
    return if_true if as_predicate(condition) else if_false
