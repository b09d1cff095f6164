"""CPU kernel of gaussian_blur: separable float32 convolution (OpenCV), reflect-101 borders, as DALI."""

from __future__ import annotations

import math

import cv2
import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


def gaussian_window(window: int, sigma: float) -> np.ndarray:
    """Normalized 1D Gaussian of odd length `window` (float32)."""
    x = np.arange(window, dtype=np.float64) - (window - 1) / 2
    weights = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return (weights / weights.sum()).astype(np.float32)


def blur_parameters(sigma, window_size) -> list[tuple[int, float]]:
    """(window, sigma) for the H and W axes from the arguments (one value for both, or one per axis)."""
    if not sigma and not window_size:
        raise ValueError("give sigma or window_size")
    sigmas = list(sigma or [0.0])
    windows = list(window_size or [0])
    sigmas, windows = (sigmas * 2 if len(sigmas) == 1 else sigmas), (windows * 2 if len(windows) == 1 else windows)
    out = []
    for s, w in zip(sigmas, windows, strict=True):
        if s < 0:
            raise ValueError(f"sigma must not be negative, got {s}")
        if w <= 0:
            if s == 0:
                raise ValueError("give a positive sigma or window_size")
            w = 2 * math.ceil(3 * s) + 1
        if w % 2 == 0:
            raise ValueError(f"window_size must be odd, got {w}")
        if s == 0:
            s = 0.3 * ((w - 1) * 0.5 - 1) + 0.8
        out.append((int(w), float(s)))
    return out


@cpu_kernel("gaussian_blur")
def gaussian_blur(inputs, args, ctx):
    image = np.asarray(inputs[0])
    if image.ndim not in (2, 3):
        raise ValueError(f"gaussian_blur expects HW or HWC samples, got shape {image.shape}")
    (wy, sy), (wx, sx) = blur_parameters(args["sigma"], args["window_size"])
    ky, kx = gaussian_window(wy, sy), gaussian_window(wx, sx)
    source = image.astype(np.float32)
    planes = [source] if image.ndim == 2 or image.shape[2] <= 4 else [source[..., c] for c in range(image.shape[2])]
    blurred = [cv2.sepFilter2D(p, cv2.CV_32F, kx, ky, borderType=cv2.BORDER_REFLECT_101) for p in planes]
    out = blurred[0] if len(blurred) == 1 else np.stack(blurred, axis=-1)
    out = out.reshape(image.shape)
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else image.dtype
    return saturate_cast(out, dtype)
