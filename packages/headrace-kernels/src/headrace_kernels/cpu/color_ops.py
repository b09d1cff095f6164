"""CPU kernels of hsv, brightness_contrast and color_twist: one affine map per sample, computed in float32 and
rounded half away from zero into integer outputs (as DALI's colour ops do)."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
YIQ_TO_RGB = np.linalg.inv(RGB_TO_YIQ)


def hsv_matrix(hue: float, saturation: float, value: float) -> np.ndarray:
    """The 3x3 RGB map that rotates hue by `hue` degrees and scales saturation and value, through YIQ."""
    angle = math.radians(hue)
    rotate = np.array([[1, 0, 0], [0, math.cos(angle), math.sin(angle)], [0, -math.sin(angle), math.cos(angle)]])
    return value * YIQ_TO_RGB @ rotate @ np.diag([1.0, saturation, saturation]) @ RGB_TO_YIQ


def type_range(dtype: np.dtype) -> float:
    """The largest value of an integer type; 1 for floats."""
    return float(np.iinfo(dtype).max) if dtype.kind in "iu" else 1.0


def round_saturate(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Into `dtype`: floats as they are, integers rounded half away from zero and clamped to the type's range."""
    if dtype.kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.trunc(values + np.copysign(0.5, values)), info.min, info.max).astype(dtype)


def _rgb(inputs, op: str) -> np.ndarray:
    image = np.asarray(inputs[0])
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{op} expects HWC images with 3 channels, got shape {image.shape}")
    return image


def _apply(image: np.ndarray, matrix: np.ndarray, offset: float, args) -> np.ndarray:
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else image.dtype
    pixels = image.astype(np.float32)
    weights = matrix.astype(np.float32)
    out = np.empty(pixels.shape, np.float32)
    for c in range(3):  # written out, not `@`: a BLAS product's rounding depends on the BLAS build and threads
        out[..., c] = (pixels[..., 0] * weights[c, 0] + pixels[..., 1] * weights[c, 1]
                       + pixels[..., 2] * weights[c, 2] + np.float32(offset))
    return round_saturate(out, dtype)


@cpu_kernel("hsv")
def hsv(inputs, args, ctx):
    image = _rgb(inputs, "hsv")
    return _apply(image, hsv_matrix(args["hue"], args["saturation"], args["value"]), 0.0, args)


@cpu_kernel("color_twist")
def color_twist(inputs, args, ctx):
    image = _rgb(inputs, "color_twist")
    scale = args["brightness"] * args["contrast"]
    center = 0.5 * type_range(image.dtype) if image.dtype.kind == "f" else math.ceil(0.5 * type_range(image.dtype))
    offset = args["brightness"] * (1 - args["contrast"]) * center
    return _apply(image, scale * hsv_matrix(args["hue"], args["saturation"], 1.0), offset, args)


@cpu_kernel("brightness_contrast")
def brightness_contrast(inputs, args, ctx):
    image = np.asarray(inputs[0])
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else image.dtype
    top = type_range(image.dtype)
    center = args["contrast_center"]
    if center is None:
        center = 0.5 * top if image.dtype.kind == "f" else math.ceil(0.5 * top)
    brightness, contrast = np.float32(args["brightness"]), np.float32(args["contrast"])
    offset = np.float32(args["brightness_shift"] * type_range(dtype) + brightness * center * (1 - contrast))
    out = image.astype(np.float32) * (brightness * contrast) + offset
    return round_saturate(out, dtype)
