"""GPU jitter, water, sphere, grid_mask and jpeg_compression_distortion. The geometry of each sample (source points,
jitter's draws from its stream, the grid mask) is the CPU kernels', computed on the host in float32 and uploaded;
the pixels are read on the GPU by the CPU kernels' `remap` run on CuPy, so nearest-neighbour output equals the
CPU's. jpeg_compression_distortion round-trips through the host (OpenCV), as nvImageCodec offers no encoder here."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.distortions_ops import (
    INTERP_NN,
    applies,
    fill_of,
    grid_keep,
    image_of,
    interpolation,
    jitter_points,
    jpeg_round_trip,
    remap,
    sphere_points,
    water_points,
)
from headrace_kernels.gpu.math_ops import cast_array
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import GpuBatch, KernelSetup, gpu_kernel


def _points(op: str, h: int, w: int, args: dict, rng) -> tuple[np.ndarray, np.ndarray]:
    if op == "jitter":
        return jitter_points(h, w, args, rng)
    if op == "water":
        return water_points(h, w, args)
    return sphere_points(h, w)


def _displaced_sample(op: str, sample, args: dict, rng):
    cp = cupy()
    image = image_of(sample, op)
    interp = INTERP_NN if op == "jitter" else interpolation(args)
    if not applies(args):
        return sample.copy()
    xs, ys = _points(op, int(image.shape[0]), int(image.shape[1]), args, rng)
    fill = cp.asarray(fill_of(args["fill_value"], image.dtype))
    out = remap(cp, cp.ascontiguousarray(image), cp.asarray(xs), cp.asarray(ys), interp, fill)
    return cast_array(out, image.dtype).reshape(sample.shape)


def _grid_mask_sample(sample, args: dict):
    cp = cupy()
    image = image_of(sample, "grid_mask")
    keep = cp.asarray(grid_keep(int(image.shape[0]), int(image.shape[1]), args))
    return (image * keep[..., None].astype(image.dtype)).reshape(sample.shape)


@gpu_kernel("jitter", "water", "sphere")
class Displacement:
    """One node of a displacement filter: host geometry per sample, the read on the GPU."""

    def __init__(self, setup: KernelSetup):
        self.op = setup.op

    def run(self, batch: GpuBatch) -> list:
        return [per_sample(i, _displaced_sample, self.op, sample, args, batch.rng(i))
                for i, (sample, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True))]


@gpu_kernel("grid_mask")
def grid_mask_kernel(batch: GpuBatch) -> list:
    return [per_sample(i, _grid_mask_sample, sample, args)
            for i, (sample, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True))]


@gpu_kernel("jpeg_compression_distortion")
def jpeg_compression_distortion_kernel(batch: GpuBatch) -> list:
    cp = cupy()
    return [cp.asarray(per_sample(i, jpeg_round_trip, cp.asnumpy(sample), args["quality"]))
            for i, (sample, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True))]
