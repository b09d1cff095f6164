"""GPU clahe: OpenCV's algorithm (clahe_plane) on CuPy arrays, per sample and plane. With luma_only on RGB, the
conversion to and from CIE Lab is OpenCV's on the host (its 8-bit Lab tables), the equalization of L on the GPU."""

from __future__ import annotations

import cv2
import numpy as np

from headrace_kernels.cpu.clahe_ops import clahe_plane, clahe_setup
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _one(image, args: dict):
    cp = cupy()
    tiles_x, tiles_y, clip_limit, luma = clahe_setup(image, args)
    if luma:
        lab = cv2.cvtColor(np.ascontiguousarray(cp.asnumpy(image)), cv2.COLOR_RGB2LAB)
        lab[..., 0] = cp.asnumpy(clahe_plane(cp, cp.asarray(lab[..., 0]), tiles_x, tiles_y, clip_limit))
        return cp.asarray(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB))
    if image.ndim == 2:
        return clahe_plane(cp, image, tiles_x, tiles_y, clip_limit)
    return cp.stack([clahe_plane(cp, cp.ascontiguousarray(image[..., c]), tiles_x, tiles_y, clip_limit)
                     for c in range(image.shape[2])], axis=-1)


@gpu_kernel("clahe")
def clahe_kernel(batch):
    return None, [per_sample(i, _one, image, args)
                  for i, (image, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True))]
