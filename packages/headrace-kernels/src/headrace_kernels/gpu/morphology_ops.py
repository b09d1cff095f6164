"""GPU experimental.median_blur / dilate / erode and equalize with CuPy array operations, per sample: the CPU
kernels' window geometry and padding, then the maximum / minimum over the window's shifted views, or their sorted
middle (median); equalize: a histogram per channel (bincount), the CPU's table (equalize_lut), one gather."""

from __future__ import annotations

from typing import Any

from headrace_kernels.cpu.morphology_ops import (
    check_equalize,
    checked_image,
    equalize_lut,
    median_pads,
    morphology_pads,
    neutral,
    pad_image,
)
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _views(padded, window: tuple[int, int], out_hw: tuple[int, int]):
    """Every shifted view padded[i:i + out_h, j:j + out_w] of the window, row by row."""
    for i in range(window[0]):
        for j in range(window[1]):
            yield padded[i:i + out_hw[0], j:j + out_hw[1]]


def median(image: Any, args: dict) -> Any:
    cp = cupy()
    window, pads = median_pads(args)
    padded = pad_image(cp, image, pads, "replicate", 0)
    stacked = cp.stack(list(_views(padded, window, image.shape[:2])))
    return cp.sort(stacked, axis=0)[stacked.shape[0] // 2]


def extremum(image: Any, args: dict, maximum: bool) -> Any:
    cp = cupy()
    window, pads = morphology_pads(args)
    padded = pad_image(cp, image, pads, args["border_mode"], neutral(image.dtype, maximum))
    combine = cp.maximum if maximum else cp.minimum
    out = None
    for view in _views(padded, window, image.shape[:2]):
        out = view.copy() if out is None else combine(out, view)
    return out


def _per_sample(batch, op: str, compute):
    out = []
    for i, (image, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True)):
        per_sample(i, checked_image, image, op)
        out.append(per_sample(i, compute, image, args))
    return None, out


@gpu_kernel("experimental.median_blur")
def median_blur_kernel(batch):
    return _per_sample(batch, "median_blur", median)


@gpu_kernel("experimental.dilate")
def dilate_kernel(batch):
    return _per_sample(batch, "dilate", lambda image, args: extremum(image, args, True))


@gpu_kernel("experimental.erode")
def erode_kernel(batch):
    return _per_sample(batch, "erode", lambda image, args: extremum(image, args, False))


@gpu_kernel("equalize", "experimental.equalize")
def equalize_kernel(batch):
    cp = cupy()
    out = []
    for i, image in enumerate(batch.samples()):
        per_sample(i, check_equalize, image)
        channels = image.reshape(image.shape[0], image.shape[1], -1)
        planes = []
        for c in range(channels.shape[2]):
            plane = channels[..., c]
            histogram = cp.asnumpy(cp.bincount(plane.ravel(), minlength=256))
            planes.append(cp.asarray(equalize_lut(histogram))[plane.astype(cp.int32)])
        out.append(cp.stack(planes, axis=-1).reshape(image.shape))
    return None, out
