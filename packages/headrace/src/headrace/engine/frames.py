"""Sequences through frame-wise ops, as DALI's ops that allow sequences: a node whose input is laid out 'F' + a
layout the op reads runs its kernel on every frame and stacks the results. An argument input marked by
`fn.per_frame` gives one value per frame (or one for all); any other argument is the sequence's for every frame.

Kernels stay frame kernels: the CPU side wraps the per-sample kernel (`FrameKernel`), the GPU side hands the kernel
a batch of frames (`FrameBatchView`) and folds its result back into sequences (`fold_frames`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace.batch import TensorListGPU
from headrace.engine.context import SampleContext, arg_value, arg_values
from headrace.graph import OpNode
from headrace.schema import Arg


def is_sequence_node(node: OpNode) -> bool:
    """Whether `node` runs frame by frame: its op allows sequences and its first input is one."""
    return bool(node.inputs) and node.schema.sequence_input(node.inputs[0].spec.layout)


def per_frame_arg_names(node: OpNode) -> frozenset[str]:
    """The node's argument inputs marked as sequences (by fn.per_frame, or a layout 'F...'), one value per
    frame."""
    return frozenset(name for name, data in node.arg_inputs.items()
                     if data.op.schema.name == "per_frame" or (data.spec.layout or "").startswith("F"))


def frame_layouts(node: OpNode) -> tuple[str, ...]:
    """The layouts of a frame of each input of a sequence node ('F' dropped from the sequences)."""
    return tuple(_frame_layout(i.spec.layout) for i in node.inputs)


def _frame_layout(layout: str | None) -> str:
    return layout[1:] if layout and layout[0] == "F" else (layout or "")


class FrameValues(list):
    """An argument's values for one sample, one per frame of its sequence (or a single one for all frames)."""

    def at(self, frame: int) -> Any:
        return self[0] if len(self) == 1 else self[frame]


def frame_values(sample: Any, arg: Arg) -> FrameValues:
    """A per-frame argument input's sample (outer axis: frames) as the argument's value of each frame."""
    array = np.asarray(sample)
    if array.ndim == 0:
        raise ValueError(f"argument '{arg.name}' is given per frame (fn.per_frame), but its sample is a scalar: "
                         "it needs one value per frame (outer axis)")
    return FrameValues(arg_value(array[f], arg) for f in range(array.shape[0]))


def _check_frames(args: dict, frames: int) -> None:
    for name, value in args.items():
        if isinstance(value, FrameValues) and len(value) not in (1, frames):
            raise ValueError(f"argument '{name}' gives {len(value)} values per frame (fn.per_frame), but the "
                             f"sequence has {frames} frames")


def _stack(frames: list, xp) -> Any:
    """The frames' results as one sequence (xp: numpy or cupy), or an error where they differ in shape."""
    first = frames[0]
    if any(f.shape != first.shape or f.dtype != first.dtype for f in frames):
        shapes = sorted({tuple(f.shape) for f in frames})
        raise ValueError(f"the frames of a sequence gave outputs of different shapes {shapes}: a sequence's frames "
                         "must come out alike (give size or keep_size)")
    return xp.stack(frames)


class FrameKernel:
    """A per-sample CPU kernel applied to every frame of a sequence sample; the frames' results stacked."""

    def __init__(self, kernel, sequence_inputs: tuple[bool, ...], layouts: tuple[str, ...], num_outputs: int):
        self.kernel, self.sequence_inputs, self.layouts = kernel, sequence_inputs, layouts
        self.num_outputs = num_outputs

    def __call__(self, inputs: list, args: dict, ctx: SampleContext) -> Any:
        frames = np.shape(inputs[0])[0] if np.ndim(inputs[0]) else 0
        if frames == 0:
            raise ValueError("an empty sequence (no frames, layout 'F...'): there is no frame to process")
        _check_frames(args, frames)
        per_frame = [name for name, value in args.items() if isinstance(value, FrameValues)]
        results = []
        for f in range(frames):
            frame_inputs = [x[f] if seq else x for x, seq in zip(inputs, self.sequence_inputs, strict=True)]
            frame_args = args if not per_frame else {**args, **{n: args[n].at(f) for n in per_frame}}
            result = self.kernel(frame_inputs, frame_args, SampleContext(ctx.seed, ctx.index, ctx.source,
                                                                         self.layouts))
            results.append(result if self.num_outputs > 1 else (result,))
        stacked = tuple(_stack([r[k] for r in results], np) for k in range(self.num_outputs))
        return stacked if self.num_outputs > 1 else stacked[0]


class FrameBatchView:
    """A GPU step's batch of sequences seen as a batch of frames: sample i of the view is one frame, its arguments
    the sequence's (or the frame's, for fn.per_frame ones), its random stream and source the sequence's."""

    def __init__(self, outer, per_frame_args: frozenset[str], sequence_inputs: tuple[bool, ...],
                 layouts: tuple[str, ...]):
        self.outer, self.per_frame_args = outer, per_frame_args
        self.sequence_inputs, self.input_layouts = sequence_inputs, layouts
        lengths = [int(x.shape[0]) if x.ndim else 0 for x in outer.samples(0)]
        for index, length in enumerate(lengths):
            if length == 0:
                raise ValueError(f"sample {index} is an empty sequence (no frames, layout 'F...'): there is no frame "
                                 "to process")
        self.lengths = lengths
        self.owner = [s for s, length in enumerate(lengths) for _ in range(length)]
        """The sequence each frame belongs to."""
        self.size = len(self.owner)
        self.args, self.per_sample_args = outer.args, outer.per_sample_args
        self.iteration, self.first_sample = outer.iteration, outer.first_sample
        self.stream, self.device_id = outer.stream, outer.device_id
        self.ahead = self.planned = self.meanwhile = None
        self.sources = [outer.sources[s] if s < len(outer.sources) else "" for s in self.owner]
        self._inputs: dict[int, TensorListGPU] = {}

    def active(self):
        return self.outer.active()

    def num_inputs(self) -> int:
        return self.outer.num_inputs()

    def input(self, k: int = 0) -> TensorListGPU:
        if k not in self._inputs:
            batch = self.outer.input(k)
            if not self.sequence_inputs[k]:  # the sequence's sample for each of its frames
                samples = batch.samples()
                self._inputs[k] = TensorListGPU([samples[s] for s in self.owner])
            elif batch.dense is not None and len(set(self.lengths)) == 1:
                dense = batch.dense
                self._inputs[k] = TensorListGPU(dense.reshape(self.size, *dense.shape[2:]))
            else:
                self._inputs[k] = TensorListGPU([x[f] for x in batch.samples() for f in range(x.shape[0])])
        return self._inputs[k]

    def value(self, k: int = 0) -> TensorListGPU:
        return self.input(k)

    def has_value(self, k: int = 0) -> bool:
        return self.outer.has_value(k)

    def samples(self, k: int = 0, raw: bool = False) -> list:
        return self.input(k).samples()

    def sample_args(self, part: int = -1) -> list[dict]:
        node, args, arg_inputs = self.outer.step.parts[part]
        if not arg_inputs:
            return [args] * self.size
        specs, count = node.schema.all_args, len(self.lengths)
        per_sequence = [dict(args) for _ in range(count)]
        for name, ref in arg_inputs:
            samples = self.outer.values[ref]
            if name in self.per_frame_args:
                values = [frame_values(samples[s], specs[name]) for s in range(count)]
            else:
                values = arg_values(samples, specs[name], count)
            for sample, value in zip(per_sequence, values, strict=True):
                sample[name] = value
        out = []
        for s, length in enumerate(self.lengths):
            _check_frames(per_sequence[s], length)
            for f in range(length):
                out.append({k: (v.at(f) if isinstance(v, FrameValues) else v) for k, v in per_sequence[s].items()})
        return out

    def rng(self, index: int) -> np.random.Generator:
        return self.outer.rng(self.owner[index])

    def prepared(self, k: int = 0) -> Any:
        return None


def fold_frames(result: TensorListGPU, lengths: list[int]) -> TensorListGPU:
    """A frame batch's result as the batch of sequences it came from (frames stacked in order)."""
    dense = result.dense
    if dense is not None and len(set(lengths)) == 1:
        return TensorListGPU(dense.reshape(len(lengths), lengths[0], *dense.shape[1:]), stream=result.stream,
                             device_id=result.device_id)
    import cupy

    samples, out, start = result.samples(), [], 0
    for length in lengths:
        out.append(_stack(samples[start:start + length], cupy))
        start += length
    return TensorListGPU(out, stream=result.stream, device_id=result.device_id)
