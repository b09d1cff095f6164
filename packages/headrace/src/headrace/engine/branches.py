"""GPU data through `if` on data (`enable_conditionals=True`): a GPU step inside a branch runs on the sub-batch of
the samples that take the branch, its outputs put back at their places with None elsewhere. (`merge` on the GPU is
a kernel of its own: headrace_kernels.gpu.conditional_ops.)"""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace.batch import TensorListGPU
from headrace.engine.context import BatchInfo
from headrace.engine.gpu_batch import PREPARED, Outputs
from headrace_kernels.rng import sample_rng


class BranchInfo(BatchInfo):
    """The batch as a step inside a branch sees it: only the samples that take the branch, each keeping its own
    random stream (keyed by its place in the whole batch, as on the CPU)."""

    def __init__(self, info: BatchInfo, indices: list[int]):
        sources = [info.sources[i] for i in indices if i < len(info.sources)]
        super().__init__(info.iteration, info.first_sample, len(indices), sources)
        self.indices = indices

    def rngs(self, seed: int):
        first, indices = self.first_sample, self.indices
        return lambda j: sample_rng(seed, first + indices[j])


def pick(value: Any, indices: list[int]) -> Any:
    """The samples at `indices` of a batch (GPU or CPU)."""
    if isinstance(value, TensorListGPU):
        if value.dense is not None:
            import cupy as cp

            return TensorListGPU(value.dense[cp.asarray(np.asarray(indices, dtype=np.int64))],
                                 stream=value.stream, device_id=value.device_id)
        samples = value.samples(raw=True)
        return TensorListGPU([samples[i] for i in indices], stream=value.stream, device_id=value.device_id)
    return [value[i] for i in indices]


def scatter(result: Any, indices: list[int], size: int, gpu: bool, ctx) -> Any:
    """A sub-batch's result back at the samples' places, None where a sample did not take the branch."""
    if result is None:
        parts: list = []
    elif isinstance(result, TensorListGPU):
        parts = result.samples(raw=True) if result.dense is None else [result.dense[j] for j in range(len(result))]
    else:
        parts = list(result)
    out: list = [None] * size
    for j, i in enumerate(indices):
        out[i] = parts[j]
    if gpu:
        return TensorListGPU(out, stream=ctx.stream, device_id=ctx.device_id)
    return out


def run_step(step, values: dict, info: BatchInfo) -> Any:
    """step.run, on the samples that take the step's branch when it is inside an `if` on data."""
    guard = step.node.guard
    if guard is None:
        return step.run(values, info)
    tokens = values[(guard.op.name, guard.index)]
    indices = [i for i in range(info.size) if tokens[i] is not None]
    if len(indices) == info.size:
        return step.run(values, info)
    gpu = step.node.device != "cpu"
    count = len(step.node.outputs)
    if not indices:
        empty = [scatter(None, [], info.size, gpu, step.stage.ctx) for _ in range(count)]
        return Outputs(empty) if count > 1 else empty[0]
    branch = dict(values)
    branch.pop((PREPARED, step.node.name), None)  # prepared for the whole batch: redo for the sub-batch
    for ref in list(step.inputs) + list(step.arg_refs):
        branch[ref] = pick(values[ref], indices)
    try:
        result = step.run(branch, BranchInfo(info, indices))
    except Exception as exc:
        index = getattr(exc, "index", None)
        if isinstance(index, int) and 0 <= index < len(indices):
            exc.index = indices[index]  # the sample's place in the whole batch, for the error message
        raise
    if isinstance(result, Outputs):
        return Outputs(scatter(part, indices, info.size, gpu, step.stage.ctx) for part in result)
    return scatter(result, indices, info.size, gpu, step.stage.ctx)
