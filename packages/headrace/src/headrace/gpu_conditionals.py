"""GPU data through `if` on data (`enable_conditionals=True`): a GPU step inside a branch runs on the sub-batch of
the samples that take the branch (split), its outputs put back at their places with None elsewhere, and `merge`
on the GPU takes each sample from the branch it ran. Imported by gpu_stage, into whose step table `merge` goes."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace.batch import TensorListGPU
from headrace.gpu_stage import _PREPARED, _STEPS, _BatchInfo, _Step


class _BranchInfo(_BatchInfo):
    """The batch as a step inside a branch sees it: only the samples that take the branch, each keeping its own
    random stream (keyed by its place in the whole batch, as on the CPU)."""

    def __init__(self, info: _BatchInfo, indices: list[int]):
        sources = [info.sources[i] for i in indices if i < len(info.sources)]
        super().__init__(info.iteration, info.first_sample, len(indices), sources)
        self.indices = indices

    def rngs(self, seed: int):
        from headrace_kernels.rng import sample_rng

        first, indices = self.first_sample, self.indices
        return lambda j: sample_rng(seed, first + indices[j])


def _pick(value: Any, indices: list[int]) -> Any:
    """The samples at `indices` of a batch (GPU or CPU)."""
    if isinstance(value, TensorListGPU):
        if value._dense is not None:
            import cupy as cp

            return TensorListGPU(value._dense[cp.asarray(np.asarray(indices, dtype=np.int64))],
                                 stream=value.stream, device_id=value.device_id)
        return TensorListGPU([value._samples[i] for i in indices], stream=value.stream, device_id=value.device_id)
    return [value[i] for i in indices]


def _scatter(result: Any, indices: list[int], size: int, gpu: bool, stage) -> Any:
    """A sub-batch's result back at the samples' places, None where a sample did not take the branch."""
    if result is None:
        parts: list = []
    elif isinstance(result, TensorListGPU):
        parts = list(result._samples) if result._samples is not None else [result._dense[j] for j in range(len(result))]
    else:
        parts = list(result)
    out: list = [None] * size
    for j, i in enumerate(indices):
        out[i] = parts[j]
    if gpu:
        return TensorListGPU(out, stream=stage.ctx.stream, device_id=stage.ctx.device_id)
    return out


def _step_refs(step: _Step) -> list:
    refs = list(step.inputs) + [ref for _, ref in step.arg_inputs]
    refs += [ref for _, ref in getattr(step, "resize_arg_inputs", [])]
    return refs


def run_step(step: _Step, values: dict, info: _BatchInfo) -> Any:
    """step.run, on the samples that take the step's branch when it is inside an `if` on data."""
    guard = step.node.guard
    if guard is None:
        return step.run(values, info)
    tokens = values[(guard.op.name, guard.index)]
    indices = [i for i in range(info.size) if tokens[i] is not None]
    if len(indices) == info.size:
        return step.run(values, info)
    gpu = step.node.device != "cpu"
    if not indices:
        return _scatter(None, [], info.size, gpu, step.stage)
    branch = dict(values)
    branch.pop((_PREPARED, step.node.name), None)  # prepared for the whole batch: redo for the sub-batch
    for ref in _step_refs(step):
        branch[ref] = _pick(values[ref], indices)
    try:
        result = step.run(branch, _BranchInfo(info, indices))
    except Exception as exc:
        index = getattr(exc, "index", None)
        if isinstance(index, int) and 0 <= index < len(indices):
            exc.index = indices[index]  # the sample's place in the whole batch, for the error message
        raise
    return _scatter(result, indices, info.size, gpu, step.stage)


class _Merge(_Step):
    """`_conditional.merge` on GPU data: each sample from the branch it took (CPU values are uploaded)."""

    def run(self, values: dict, info: _BatchInfo):
        import cupy as cp

        from headrace_kernels.cpu.conditional_ops import _as_predicate

        if_true, if_false, condition = (values[ref] for ref in self.inputs)
        picked = []
        for i in range(info.size):
            value = (if_true if _as_predicate(condition[i]) else if_false)[i]
            if value is None:
                raise ValueError(f"sample {i} has no value in the branch it took")
            picked.append(value if isinstance(value, cp.ndarray) else cp.asarray(value))
        if picked and all(p.shape == picked[0].shape and p.dtype == picked[0].dtype for p in picked):
            return self.outputs((cp.stack(picked), None))
        return self.outputs(picked)


_STEPS["_conditional.merge"] = _Merge
