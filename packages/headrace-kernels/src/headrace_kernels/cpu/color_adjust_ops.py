"""CPU kernels of brightness, contrast, hue and saturation. brightness and contrast are one affine map per sample
whose coefficients are computed as DALI computes them (float32, in DALI's order), so ties round as DALI's do; hue
and saturation are hsv's kernel with the other factors at their identity and the input's type kept."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace_kernels.cpu.color_ops import hsv, round_saturate, type_range
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

_F = np.float32


def output_dtype(args: dict[str, Any], in_dtype: np.dtype) -> np.dtype:
    """The `dtype` argument's type, else the input's."""
    return numpy_dtype(args["dtype"]) if args.get("dtype") is not None else np.dtype(in_dtype)


def half_range(dtype: np.dtype) -> float:
    """The default contrast centre: 2**(bits - 1) for unsigned, 2**(bits - 2) for signed integers, 0.5 for floats."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        return 0.5
    return float(1 << (8 * dtype.itemsize - (dtype.kind == "i") - 1))


def affine_coefficients(args: dict[str, Any], in_dtype: np.dtype) -> tuple[np.float32, np.float32, np.dtype]:
    """(multiplier, addend, output type) of out = in * multiplier + addend for a brightness or contrast node:
    addend = shift * range + brightness * (center - contrast * center), each step rounded to float32."""
    out = output_dtype(args, in_dtype)
    brightness, shift = _F(args.get("brightness", 1.0)), _F(args.get("brightness_shift", 0.0))
    contrast = _F(args.get("contrast", 1.0))
    center = args.get("contrast_center")
    center = _F(half_range(in_dtype) if center is None else center)
    addend = _F(shift * _F(type_range(out))) + _F(brightness * _F(center - _F(contrast * center)))
    return _F(brightness * contrast), _F(addend), out


def hsv_args(args: dict[str, Any]) -> dict[str, Any]:
    """hsv's arguments for a hue or saturation node (value 1; the output type the input's unless `dtype`)."""
    return {"hue": args.get("hue", 0.0), "saturation": args.get("saturation", 1.0), "value": 1.0,
            "dtype": args.get("dtype")}


def check_rgb(shape: tuple[int, ...], op: str) -> None:
    """hue and saturation read three channels, last, of HWC images or FHWC / DHWC sequences and volumes."""
    if len(shape) not in (3, 4) or shape[-1] != 3:
        raise ValueError(f"{op} expects HWC (or FHWC, DHWC) images with 3 channels, got shape {tuple(shape)}")


def check_image(shape: tuple[int, ...], op: str) -> None:
    """brightness and contrast read HWC images or FHWC / DHWC sequences and volumes (any number of channels)."""
    if len(shape) not in (3, 4):
        raise ValueError(f"{op} expects HWC (or FHWC, DHWC) images, got shape {tuple(shape)}")


@cpu_kernel("brightness", "contrast")
def brightness_or_contrast(inputs, args, ctx):
    image = np.asarray(inputs[0])
    check_image(image.shape, "brightness" if "brightness" in args else "contrast")
    multiplier, addend, dtype = affine_coefficients(args, image.dtype)
    values = image.astype(np.float32)
    values *= multiplier  # two float32 roundings, no fused multiply-add: as DALI's CPU kernel
    values += addend
    return round_saturate(values, dtype)


@cpu_kernel("hue", "saturation")
def hue_or_saturation(inputs, args, ctx):
    image = np.asarray(inputs[0])
    check_rgb(image.shape, "hue" if "hue" in args else "saturation")
    flat = image.reshape(-1, 1, 3)  # every pixel on its own: frames and slices need no loop
    return hsv([flat], hsv_args(args), ctx).reshape(image.shape)
