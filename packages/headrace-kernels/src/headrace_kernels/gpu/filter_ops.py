"""GPU gaussian_blur (kernels/filter.cu): the CPU kernel's windows (blur_parameters, gaussian_window) per sample,
one row pass and one column pass over the whole batch."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.filter_ops import blur_parameters, gaussian_window
from headrace_kernels.dtypes import CTYPES, numpy_dtype
from headrace_kernels.gpu.packing import (
    KERNEL_INPUTS,
    KERNEL_OUTPUTS,
    Outputs,
    blocks,
    contiguous_samples,
    output_type,
    per_sample,
    upload,
)
from headrace_kernels.gpu.runtime import cupy, module
from headrace_kernels.registry import gpu_kernel

RECORD = np.dtype([("in", "<u8"), ("out", "<u8"), ("tmp", "<u8"), ("h", "<i4"), ("w", "<i4"), ("channels", "<i4"),
                   ("window_y", "<i4"), ("window_x", "<i4"), ("weights_y", "<i4"), ("weights_x", "<i4")],
                  align=True)  # laid out as the C struct
assert RECORD.itemsize == 56, RECORD.itemsize
_EXPRESSIONS = tuple(f"blur_rows<{CTYPES[t]}>" for t in KERNEL_INPUTS) + \
    tuple(f"blur_columns<{CTYPES[t]}>" for t in KERNEL_OUTPUTS)


def gaussian_blur(samples: list, args_list: list[dict]):
    """Blur every sample with its own window; returns (dense or None, list) as the GPU stage expects."""
    cp = cupy()
    images, in_dtype = contiguous_samples(samples, "gaussian_blur", ndims=(2, 3))
    n = len(images)
    rec = np.zeros(n, RECORD)
    windows: list[np.ndarray] = []
    cache: dict[tuple, tuple[int, int]] = {}  # (window, sigma) pairs -> offsets, shared by equal samples
    offset = 0
    for i, (image, args) in enumerate(zip(images, args_list, strict=True)):
        (wy, sy), (wx, sx) = per_sample(i, blur_parameters, args["sigma"], args["window_size"])
        key = (wy, sy, wx, sx)
        if key not in cache:
            windows += [gaussian_window(wy, sy), gaussian_window(wx, sx)]
            cache[key] = (offset, offset + wy)
            offset += wy + wx
        rec["weights_y"][i], rec["weights_x"][i] = cache[key]
        rec["window_y"][i], rec["window_x"][i] = wy, wx
        rec["h"][i], rec["w"][i] = image.shape[0], image.shape[1]
        rec["channels"][i] = image.shape[2] if image.ndim == 3 else 1
    dtype = args_list[0].get("dtype") if args_list else None
    write, final = output_type(in_dtype if dtype is None else numpy_dtype(dtype), "gaussian_blur")
    outputs = Outputs([image.shape for image in images], write)
    tmp = cp.empty(sum(image.size for image in images), dtype=cp.float32)
    sizes = np.array([image.size for image in images], dtype=np.int64)
    rec["in"] = [image.data.ptr for image in images]
    rec["out"] = outputs.pointers
    rec["tmp"] = tmp.data.ptr + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) * 4
    if n and sizes.max() > 0:
        weights = cp.asarray(np.concatenate(windows).astype(np.float32))
        records = upload(rec)
        kernels = module("filter.cu", _EXPRESSIONS)
        row = rec["w"].astype(np.int64) * rec["channels"]
        grid = (blocks(row.max(), 64), blocks(rec["h"].max(), 4), n)
        source = images[0].dtype.name
        kernels.get_function(f"blur_rows<{CTYPES[source]}>")(grid, (64, 4, 1), (records, weights))
        kernels.get_function(f"blur_columns<{CTYPES[write.name]}>")(grid, (64, 4, 1), (records, weights))
    return outputs.result(final)


@gpu_kernel("gaussian_blur")
def gaussian_blur_kernel(batch):
    return gaussian_blur(batch.samples(), batch.sample_args())
