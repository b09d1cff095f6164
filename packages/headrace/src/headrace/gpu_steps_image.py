"""GPU steps of the image adjustments: gaussian_blur, hsv, brightness_contrast, color_twist, rotate, warp_affine,
erase and paste. Each runs batch-wise on the pipeline's stream through headrace_kernels.gpu (kernels/filter.cu,
color.cu, warp.cu, region.cu), per-sample arguments and argument inputs included. Importing this module (gpu_stage
does) adds them to gpu_stage's step table."""

from __future__ import annotations

import numpy as np

from headrace.batch import TensorListGPU
from headrace.gpu_stage import _STEPS, _BatchInfo, _samples, _Step


class _ImageAdjust(_Step):
    """One of the ops in IMAGE_STEPS: its samples and per-sample arguments to the batch kernel of its kind."""

    def run(self, values: dict, info: _BatchInfo):
        from headrace_kernels.gpu import color_ops, filter_ops, region_ops, warp_ops

        samples = _samples(self.input_value(values))
        args = self.sample_args(values, len(samples))
        name = self.node.schema.name
        if name == "gaussian_blur":
            return self.outputs(filter_ops.gaussian_blur(samples, args))
        if name in ("hsv", "brightness_contrast", "color_twist"):
            return self.outputs(color_ops.color(name, samples, args))
        if name in ("rotate", "warp_affine"):
            return self.outputs(warp_ops.warp(name, samples, args, self._matrices(values)))
        if name == "erase":
            return self.outputs(region_ops.erase(samples, args))
        return self.outputs(region_ops.paste(samples, args))

    def _matrices(self, values: dict) -> list | None:
        """warp_affine's second input (the matrices) on the host, if it has one."""
        if len(self.inputs) < 2:
            return None
        matrices = values[self.inputs[1]]
        if isinstance(matrices, TensorListGPU):
            matrices = matrices.as_cpu()
        return [np.asarray(m) for m in matrices]


IMAGE_OPS = ("gaussian_blur", "hsv", "brightness_contrast", "color_twist", "rotate", "warp_affine", "erase", "paste")
_STEPS.update(dict.fromkeys(IMAGE_OPS, _ImageAdjust))
