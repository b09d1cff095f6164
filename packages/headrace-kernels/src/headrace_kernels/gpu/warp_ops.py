"""GPU rotate and warp_affine (kernels/warp.cu): the CPU kernels' output sizes, float32 output-to-input matrices and
border values per sample, resampled for the whole batch in one launch with the CPU's float32 steps (so the GPU's
output equals the CPU's, which equals DALI's CPU operators')."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.warp_ops import affine_geometry, border_value, rotation_geometry
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


def _checked_size(out_h: int, out_w: int) -> tuple[int, int]:
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"output size {out_h}x{out_w} is empty")
    return out_h, out_w


def records(op: str, shapes: list[tuple[int, ...]], args_list: list[dict], in_dtype: np.dtype, out_dtype: np.dtype,
            matrices: list | None = None) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """One WarpSample record per sample (pointers left 0) and the output shapes; host work only."""
    rec = np.zeros(len(shapes), RECORD)
    out_shapes = []
    for i, (shape, args) in enumerate(zip(shapes, args_list, strict=True)):
        height, width = shape[:2]
        if op == "rotate":
            matrix, out_h, out_w = per_sample(i, rotation_geometry, height, width, args)
        else:
            matrix, out_h, out_w = per_sample(i, affine_geometry, height, width, args,
                                              None if matrices is None else matrices[i])
        per_sample(i, _checked_size, out_h, out_w)
        rec["m"][i] = np.asarray(matrix, np.float32).ravel()
        rec["in_h"][i], rec["in_w"][i], rec["out_h"][i], rec["out_w"][i] = height, width, out_h, out_w
        rec["channels"][i] = shape[2] if len(shape) == 3 else 1
        interp = int(args["interp_type"])
        border = border_value(args["fill_value"], interp, in_dtype, out_dtype)
        rec["use_fill"][i] = border is not None
        rec["fill"][i] = 0.0 if border is None else np.float32(border[0])
        rec["interp"][i] = interp
        out_shapes.append((out_h, out_w, *shape[2:]))
    return rec, out_shapes


def warp(op: str, samples: list, args_list: list[dict], matrices: list | None = None):
    """rotate / warp_affine of every sample (`matrices`: warp_affine's second input, host arrays, if any)."""
    images, in_dtype = contiguous_samples(samples, op, ndims=(2, 3))
    empty = [i for i, image in enumerate(images) if image.size == 0]
    if empty:
        raise SampleFailureError(empty[0], f"{op} cannot warp an empty image of shape "
                                           f"{tuple(images[empty[0]].shape)}")
    dtype = args_list[0].get("dtype") if args_list else None
    out_dtype = in_dtype if dtype is None else numpy_dtype(dtype)
    write, final = output_type(out_dtype, op)
    rec, shapes = records(op, [tuple(image.shape) for image in images], args_list, in_dtype, np.dtype(out_dtype),
                          matrices)
    outputs = Outputs(shapes, write)
    rec["in"] = [image.data.ptr for image in images]
    rec["out"] = outputs.pointers
    if images:
        kernel = module("warp.cu", kernel_expressions("warp_affine")).get_function(
            f"warp_affine<{CTYPES[images[0].dtype.name]}, {CTYPES[write.name]}>")
        grid = (blocks(rec["out_w"].max(), 32), blocks(rec["out_h"].max(), 8), len(images))
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
