"""GPU rotate and warp_affine (kernels/warp.cu): the CPU kernels' output sizes and output-to-input matrices per
sample (pixel centres at integers, as handed to OpenCV), resampled for the whole batch in one launch."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.warp_ops import affine_geometry, rotation_geometry
from headrace_kernels.dtypes import CTYPES, numpy_dtype
from headrace_kernels.gpu.packing import (
    Outputs,
    blocks,
    contiguous_samples,
    kernel_expressions,
    output_type,
    per_sample,
    upload,
)
from headrace_kernels.gpu.runtime import module
from headrace_kernels.registry import SampleFailureError, gpu_kernel

RECORD = np.dtype([("in", "<u8"), ("out", "<u8"), ("in_h", "<i4"), ("in_w", "<i4"), ("out_h", "<i4"),
                   ("out_w", "<i4"), ("channels", "<i4"), ("interp", "<i4"), ("use_fill", "<i4"), ("fill", "<f4"),
                   ("m", "<f4", (6,))], align=True)
assert RECORD.itemsize == 72, RECORD.itemsize


def _centred(out_to_in: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """The matrix in pixel-centre-at-integer coordinates (the CPU kernel's `warp`)."""
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"output size {out_h}x{out_w} is empty")
    linear, shift = out_to_in[:, :2], out_to_in[:, 2]
    return np.hstack([linear, (shift + linear @ np.array([0.5, 0.5]) - 0.5)[:, None]])


def warp(op: str, samples: list, args_list: list[dict], matrices: list | None = None):
    """rotate / warp_affine of every sample (`matrices`: warp_affine's second input, host arrays, if any)."""
    images, in_dtype = contiguous_samples(samples, op, ndims=(2, 3))
    n = len(images)
    rec = np.zeros(n, RECORD)
    shapes = []
    for i, (image, args) in enumerate(zip(images, args_list, strict=True)):
        height, width = image.shape[:2]
        if op == "rotate":
            matrix, out_h, out_w = per_sample(i, rotation_geometry, height, width, args)
        else:
            matrix, out_h, out_w = per_sample(i, affine_geometry, height, width, args, None if matrices is None
                                              else matrices[i])
        rec["m"][i] = per_sample(i, _centred, matrix, out_h, out_w).astype(np.float32).ravel()
        rec["in_h"][i], rec["in_w"][i], rec["out_h"][i], rec["out_w"][i] = height, width, out_h, out_w
        rec["channels"][i] = image.shape[2] if image.ndim == 3 else 1
        fill = args["fill_value"]
        rec["use_fill"][i], rec["fill"][i] = fill is not None, np.float32(fill or 0)
        rec["interp"][i] = int(args["interp_type"])
        shapes.append((out_h, out_w, *image.shape[2:]))
    dtype = args_list[0].get("dtype") if args_list else None
    write, final = output_type(in_dtype if dtype is None else numpy_dtype(dtype), op)
    outputs = Outputs(shapes, write)
    rec["in"] = [image.data.ptr for image in images]
    rec["out"] = outputs.pointers
    empty = [i for i, image in enumerate(images) if image.size == 0]
    if empty:
        raise SampleFailureError(empty[0], f"{op} cannot warp an empty image of shape "
                                           f"{tuple(images[empty[0]].shape)}")
    if n:
        kernel = module("warp.cu", kernel_expressions("warp_affine")).get_function(
            f"warp_affine<{CTYPES[images[0].dtype.name]}, {CTYPES[write.name]}>")
        grid = (blocks(rec["out_w"].max(), 32), blocks(rec["out_h"].max(), 8), n)
        kernel(grid, (32, 8, 1), (upload(rec),))
    return outputs.result(final)


@gpu_kernel("rotate", "warp_affine")
class WarpKernel:
    """rotate and warp_affine; warp_affine's optional second input (the matrices) is read on the host."""

    def __init__(self, setup):
        self.op = setup.op

    def run(self, batch):
        matrices = None
        if batch.num_inputs() > 1:
            value = batch.value(1)
            matrices = [np.asarray(m) for m in (value.as_cpu() if hasattr(value, "as_cpu") else value)]
        return warp(self.op, batch.samples(), batch.sample_args(), matrices)
