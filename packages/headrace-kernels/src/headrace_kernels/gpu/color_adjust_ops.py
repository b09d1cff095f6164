"""GPU brightness, contrast, hue and saturation: the batch kernel of brightness_contrast and hsv (kernels/color.cu,
float32 without fused multiply-adds) fed the CPU kernels' coefficients, so GPU and CPU give the same numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace_kernels.cpu.color_adjust_ops import affine_coefficients, check_image, check_rgb, hsv_args
from headrace_kernels.cpu.color_ops import type_range
from headrace_kernels.dtypes import dali_number
from headrace_kernels.gpu.color_ops import color
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.registry import gpu_kernel


def scale_args(args: dict[str, Any], in_dtype: np.dtype) -> dict[str, Any]:
    """brightness_contrast's arguments that make its launch compute in * multiplier + addend with the CPU kernel's
    float32 multiplier and addend (contrast centre 0, the addend given as a shift of the output's range)."""
    multiplier, addend, out = affine_coefficients(args, in_dtype)
    return {"brightness": multiplier, "contrast": np.float32(1.0), "contrast_center": 0.0,
            "brightness_shift": float(addend) / type_range(out), "dtype": dali_number(out)}


@gpu_kernel("brightness", "contrast")
class BrightnessOrContrast:
    """One brightness_contrast launch for the batch, with the CPU kernel's coefficients."""

    def __init__(self, setup):
        self.op = setup.op

    def run(self, batch):
        samples = batch.samples()
        for i, sample in enumerate(samples):
            per_sample(i, check_image, tuple(sample.shape), self.op)
        in_dtype = np.dtype(samples[0].dtype) if samples else np.dtype(np.float32)
        return color("brightness_contrast", samples, [scale_args(a, in_dtype) for a in batch.sample_args()])


@gpu_kernel("hue", "saturation")
class HueOrSaturation:
    """hsv's launch with value 1 and the input's element type kept; FHWC / DHWC samples as rows of pixels."""

    def __init__(self, setup):
        self.op = setup.op

    def run(self, batch):
        samples = batch.samples()
        for i, sample in enumerate(samples):
            per_sample(i, check_rgb, tuple(sample.shape), self.op)
        shapes = [tuple(s.shape) for s in samples]
        dense, listed = color("hsv", [s.reshape(-1, 1, 3) for s in samples],
                              [hsv_args(a) for a in batch.sample_args()])
        if dense is not None and len(set(shapes)) == 1:
            return dense.reshape(len(shapes), *shapes[0]), None
        outs = list(dense) if dense is not None else listed  # equal pixel counts need not mean equal shapes
        return None, [out.reshape(shape) for out, shape in zip(outs, shapes, strict=True)]
