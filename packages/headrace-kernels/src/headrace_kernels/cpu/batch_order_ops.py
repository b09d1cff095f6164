"""CPU kernels of permute_batch and batch_permutation (whole batch: lists of inputs, arguments and contexts in, one
result per sample out). batch_permutation draws from the batch's first sample's stream, so the GPU kernel, given
the same stream, draws the same indices."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace_kernels.registry import cpu_kernel


def sample_indices(batch_args: list[dict[str, Any]]) -> list[int]:
    """The input sample each output sample is: `indices` as one list for the batch, or one value per sample; each
    checked to lie in the batch."""
    size = len(batch_args)
    out = []
    for i, args in enumerate(batch_args):
        indices = list(args["indices"])
        if len(indices) not in (1, size):
            raise ValueError(f"argument 'indices' has {len(indices)} values for a batch of {size} samples (give one "
                             "per sample)")
        index = indices[0] if len(indices) == 1 else indices[i]
        if not 0 <= index < size:
            raise ValueError(f"argument 'indices': sample {i} asks for sample {index}, which is not in a batch of "
                             f"{size} (0 to {size - 1})")
        out.append(int(index))
    return out


def draw_permutation(size: int, allow_repetitions: bool, no_fixed_points: bool, rng: np.random.Generator) -> list[int]:
    """`size` indices into a batch: a permutation (a derangement with `no_fixed_points`, drawn by rejection), or
    independent draws (each from the other samples with `no_fixed_points`)."""
    if size <= 1:
        return [0] * size
    if allow_repetitions:
        if not no_fixed_points:
            return rng.integers(0, size, size).tolist()
        draws = rng.integers(0, size - 1, size)
        return (draws + (draws >= np.arange(size))).tolist()  # skip the sample's own index
    while True:
        order = rng.permutation(size)
        if not no_fixed_points or not np.any(order == np.arange(size)):
            return order.tolist()


@cpu_kernel("permute_batch")
def permute_batch(batch_inputs, batch_args, contexts):
    """Whole batch: each output sample a copy of the input sample its index names."""
    samples = [np.asarray(inputs[0]) for inputs in batch_inputs]
    return [samples[index].copy() for index in sample_indices(batch_args)]


@cpu_kernel("batch_permutation")
def batch_permutation(batch_inputs, batch_args, contexts):
    """Whole batch: the indices drawn from the first sample's random stream, one int32 scalar per sample."""
    if not contexts:
        return []
    args = batch_args[0]
    order = draw_permutation(len(contexts), args["allow_repetitions"], args["no_fixed_points"], contexts[0].rng)
    return [np.array(index, np.int32) for index in order]
