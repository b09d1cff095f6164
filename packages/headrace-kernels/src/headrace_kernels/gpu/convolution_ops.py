"""GPU filter / experimental.filter and laplacian: per sample, the image padded by cupy.pad with the CPU kernel's
border rule, then one elementwise CuPy kernel sums window x input in float32 for every output element; the CPU
kernels' checks and windows (the Laplacian as one 2D window), DALI's conversion to the output type."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from headrace_kernels.cpu.convolution_ops import (
    PAD_MODES,
    checked_image,
    fill_value,
    filter_geometry,
    laplacian_window_2d,
    output_dtype,
)
from headrace_kernels.gpu.coordinates_ops import saturate_cast_gpu
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


@functools.cache
def _correlation():
    return cupy().ElementwiseKernel(
        "raw float32 src, raw float32 window, int32 src_w, int32 out_w, int32 channels, int32 rows, int32 cols",
        "float32 out",
        """
        const int c = i % channels;
        const int x = (i / channels) % out_w;
        const int y = i / (channels * out_w);
        float acc = 0.0f;
        for (int a = 0; a < rows; ++a) {
            for (int b = 0; b < cols; ++b) {
                acc += window[a * cols + b] * src[((long long)(y + a) * src_w + (x + b)) * channels + c];
            }
        }
        out = acc;
        """,
        "headrace_correlate_valid",
    )


def correlate(image: Any, window: np.ndarray, pads: list[tuple[int, int]], out_hw: tuple[int, int], border: str,
              fill: float) -> Any:
    """float32 correlation of one HW / HWC CuPy image with a host 2D `window`, after padding by `pads`."""
    cp = cupy()
    source = image.astype(cp.float32)
    widths = [*pads, *([(0, 0)] if image.ndim == 3 else [])]
    if border == "constant":
        source = cp.pad(source, widths, mode="constant", constant_values=float(np.float32(fill)))
    else:
        source = cp.pad(source, widths, mode=PAD_MODES[border])
    source = cp.ascontiguousarray(source)
    channels = image.shape[2] if image.ndim == 3 else 1
    out = cp.empty((*out_hw, *image.shape[2:]), dtype=cp.float32)
    if out.size:
        weights = cp.asarray(np.ascontiguousarray(window, dtype=np.float32))
        _correlation()(source, weights, np.int32(source.shape[1]), np.int32(out_hw[1]), np.int32(channels),
                       np.int32(window.shape[0]), np.int32(window.shape[1]), out)
    return out


@gpu_kernel("filter", "experimental.filter")
def filter_kernel(batch):
    cp = cupy()
    images, windows = batch.samples(0), batch.samples(1)
    fills = batch.samples(2) if batch.num_inputs() > 2 else None
    out = []
    for i, args in enumerate(batch.sample_args()):
        image = per_sample(i, checked_image, images[i], "filter")
        window = cp.asnumpy(windows[i]).astype(np.float32)
        dtype = per_sample(i, output_dtype, args, np.dtype(image.dtype))
        pads, out_hw = per_sample(i, filter_geometry, image.shape[:2], window, args)
        fill = 0.0
        if fills is not None:
            fill = per_sample(i, fill_value, [None, None, cp.asnumpy(fills[i])], np.dtype(image.dtype))
        result = correlate(image, window, pads, out_hw, args["border"], fill)
        out.append(saturate_cast_gpu(result, dtype))
    return None, out


@gpu_kernel("laplacian")
def laplacian_kernel(batch):
    out = []
    for i, (image, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True)):
        per_sample(i, checked_image, image, "laplacian")
        dtype = per_sample(i, output_dtype, args, np.dtype(image.dtype))
        window = per_sample(i, laplacian_window_2d, args)
        pads = [(window.shape[0] // 2,) * 2, (window.shape[1] // 2,) * 2]
        out.append(saturate_cast_gpu(correlate(image, window, pads, image.shape[:2], "reflect_101", 0.0), dtype))
    return None, out
