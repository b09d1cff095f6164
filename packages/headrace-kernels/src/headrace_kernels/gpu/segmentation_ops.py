"""GPU segmentation helpers and crop-window generators. DALI has CPU versions only; here random_mask_pixel counts and
finds the foreground on the device (CuPy), and the others, whose inputs and outputs are a few numbers per sample
(or, for random_object_bbox, a blob search that is sequential by nature), run the CPU kernels' functions on the
host copies and upload the results. Every random choice comes from the sample's own stream (batch.rng), as on the
CPU, so both give the same numbers."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.segmentation_ops import (
    any_pixel,
    check_mask,
    mask_foreground,
    random_crop_generator_of,
    random_object_bbox_of,
    roi_random_crop_of,
    select_masks_of,
)
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel

HOST_FUNCTIONS = {
    "segmentation.random_object_bbox": random_object_bbox_of,
    "segmentation.select_masks": select_masks_of,
    "roi_random_crop": roi_random_crop_of,
    "random_crop_generator": random_crop_generator_of,
}
"""Op name -> its CPU function (inputs, args, rng) -> output or tuple of outputs."""


def host_inputs(batch) -> list[list[np.ndarray]]:
    """Each sample's inputs on the host (CPU inputs as they are, GPU ones copied)."""
    columns = []
    for k in range(batch.num_inputs()):
        value = batch.value(k)
        if hasattr(value, "as_cpu"):
            value = value.as_cpu()
        columns.append([np.asarray(v) for v in value])
    return [list(row) for row in zip(*columns, strict=True)] if columns else [[] for _ in range(batch.size)]


def upload_outputs(per_sample_outputs: list[tuple]) -> tuple | list:
    """Per-sample tuples of host outputs as one (None, list of device arrays) result per output."""
    cp = cupy()
    count = len(per_sample_outputs[0]) if per_sample_outputs else 0
    results = tuple((None, [cp.asarray(outs[j]) for outs in per_sample_outputs]) for j in range(count))
    return results if count > 1 else results[0] if results else (None, [])


@gpu_kernel(*HOST_FUNCTIONS)
class HostComputed:
    """An op whose CPU function runs per sample on the host copies of its inputs; its outputs are uploaded."""

    def __init__(self, setup):
        self.function = HOST_FUNCTIONS[setup.op]

    def run(self, batch):
        outs = []
        for i, (inputs, args) in enumerate(zip(host_inputs(batch), batch.sample_args(), strict=True)):
            result = per_sample(i, self.function, inputs, args, batch.rng(i))
            outs.append(result if isinstance(result, tuple) else (result,))
        return upload_outputs(outs)


@gpu_kernel("segmentation.random_mask_pixel")
def random_mask_pixel(batch):
    """The foreground counted and located on the device; the draw (which foreground pixel, or any pixel) made on
    the host from the sample's stream with the CPU kernel's calls."""
    cp = cupy()
    out = []
    for i, (mask, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True)):
        per_sample(i, check_mask, mask)
        rng = batch.rng(i)
        pixel = None
        if int(np.asarray(args["foreground"]).reshape(-1)[0]):
            test = per_sample(i, mask_foreground, mask, args)
            if test is not None:
                flat = cp.flatnonzero(test(mask))
                if flat.size:
                    pixel = np.array(np.unravel_index(int(flat[int(rng.integers(0, flat.size))]), mask.shape),
                                     np.int64)
        out.append(pixel if pixel is not None else any_pixel(mask.shape, rng))
    if not out:
        return None, []
    return cp.asarray(np.stack(out)), None
