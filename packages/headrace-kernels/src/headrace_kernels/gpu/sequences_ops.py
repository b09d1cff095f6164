"""GPU sequence_rearrange (one CuPy gather per sample, with the CPU kernel's index checks) and per_frame (the
device arrays as they are)."""

from __future__ import annotations

from headrace_kernels.cpu.sequences_ops import check_sequence_layout, frame_order, per_frame_check, sequence_shape
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import SampleFailureError, gpu_kernel


def _layout(batch) -> str:
    return batch.input_layouts[0] if batch.input_layouts else ""


def _rearranged(sample, args: dict):
    sequence_shape(tuple(sample.shape), "sequence_rearrange")
    return sample[cupy().asarray(frame_order(args["new_order"], int(sample.shape[0])))]


@gpu_kernel("sequence_rearrange")
def sequence_rearrange_kernel(batch):
    """The frames of each sample gathered in the new order (indices checked on the host)."""
    try:
        check_sequence_layout(_layout(batch), "sequence_rearrange")
    except ValueError as exc:
        raise SampleFailureError(0, str(exc)) from None
    return [per_sample(i, _rearranged, s, a) for i, (s, a) in enumerate(zip(batch.samples(), batch.sample_args(),
                                                                            strict=True))]


@gpu_kernel("per_frame")
def per_frame_kernel(batch):
    """The input's samples unchanged (only the layout, known from the graph, differs)."""
    try:
        per_frame_check(_layout(batch), bool(batch.args["replace"]))
    except ValueError as exc:
        raise SampleFailureError(0, str(exc)) from None
    samples = batch.samples()
    for i, sample in enumerate(samples):
        per_sample(i, sequence_shape, tuple(sample.shape), "per_frame")
    return samples
