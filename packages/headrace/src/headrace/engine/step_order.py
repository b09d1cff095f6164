"""The order of a GPU stage's steps: those that do not read what a decoder makes run before the decoders, so that
their host work (launches, uploads) is done while the decode started ahead is still running."""

from __future__ import annotations

from typing import Any


def beside_decoders_first(steps: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """`steps` (a topological order of ("gpu", KernelStep) pairs) with every step that depends on no decoder
    launched ahead moved before the first that does; each group keeps its order, so the result is a topological
    order too. Unchanged where a step is not a GPU kernel or sits in a conditional branch."""
    if any(kind != "gpu" or step.node.guard is not None for kind, step in steps):
        return steps
    waiting: set[str] = set()  # the nodes whose steps wait, through their inputs, for a decoder's images
    beside, after = [], []
    for kind, step in steps:
        reads = {name for name, _ in (*step.inputs, *step.arg_refs)}
        if step.launches_ahead or reads & waiting:
            waiting.add(step.node.name)
            after.append((kind, step))
        else:
            beside.append((kind, step))
    return beside + after
