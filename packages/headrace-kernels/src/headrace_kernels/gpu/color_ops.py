"""GPU hsv, color_twist and brightness_contrast (kernels/color.cu): the CPU kernels' per-sample coefficients (the
same float32 numbers), applied to the whole batch in one launch."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.cpu.color_ops import (
    brightness_contrast_addend,
    check_color_space_input,
    color_conversion,
    hsv_matrix,
    type_range,
)
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
from headrace_kernels.gpu.runtime import function, module
from headrace_kernels.registry import gpu_kernel

MODE_MATRIX, MODE_SCALE = 0, 1
RECORD = np.dtype([("in", "<u8"), ("out", "<u8"), ("pixels", "<i8"), ("mode", "<i4"), ("m", "<f4", (9,)),
                   ("scale", "<f4"), ("offset", "<f4")], align=True)
assert RECORD.itemsize == 72, RECORD.itemsize


def _rgb_check(image, index: int, op: str) -> None:
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{op} expects HWC images with 3 channels, got shape {tuple(image.shape)}")


def _coefficients(op: str, args: dict, in_dtype: np.dtype) -> tuple[int, np.ndarray, float, float]:
    """(mode, 3x3 matrix, scale, offset) of one sample, computed as the CPU kernel computes them."""
    if op == "hsv":
        return MODE_MATRIX, hsv_matrix(args["hue"], args["saturation"], args["value"]), 1.0, 0.0
    top = type_range(in_dtype)
    half = 0.5 * top if in_dtype.kind == "f" else math.ceil(0.5 * top)
    if op == "color_twist":
        scale = args["brightness"] * args["contrast"]
        offset = args["brightness"] * (1 - args["contrast"]) * half
        return MODE_MATRIX, scale * hsv_matrix(args["hue"], args["saturation"], 1.0), 1.0, offset
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else in_dtype
    center = half if args["contrast_center"] is None else args["contrast_center"]
    brightness, contrast = np.float32(args["brightness"]), np.float32(args["contrast"])
    offset = brightness_contrast_addend(args["brightness_shift"], type_range(dtype), brightness, contrast, center)
    return MODE_SCALE, np.eye(3), brightness * contrast, offset


def color(op: str, samples: list, args_list: list[dict]):
    """hsv / color_twist / brightness_contrast of every sample; returns (dense or None, list)."""
    images, in_dtype = contiguous_samples(samples, op)
    n = len(images)
    rec = np.zeros(n, RECORD)
    for i, (image, args) in enumerate(zip(images, args_list, strict=True)):
        if op != "brightness_contrast":
            per_sample(i, _rgb_check, image, i, op)
        mode, matrix, scale, offset = per_sample(i, _coefficients, op, args, in_dtype)
        rec["mode"][i], rec["m"][i] = mode, matrix.astype(np.float32).ravel()
        rec["scale"][i], rec["offset"][i] = np.float32(scale), np.float32(offset)
        rec["pixels"][i] = image.size // 3 if mode == MODE_MATRIX else image.size
    dtype = args_list[0].get("dtype") if args_list else None
    write, final = output_type(in_dtype if dtype is None else numpy_dtype(dtype), op)
    outputs = Outputs([image.shape for image in images], write)
    rec["in"] = [image.data.ptr for image in images]
    rec["out"] = outputs.pointers
    if n and rec["pixels"].max() > 0:
        kernel = module("color.cu", kernel_expressions("color_affine")).get_function(
            f"color_affine<{CTYPES[images[0].dtype.name]}, {CTYPES[write.name]}>")
        kernel((min(blocks(rec["pixels"].max(), 256), 4096), n), (256,), (upload(rec),))
    return outputs.result(final)


@gpu_kernel("hsv", "brightness_contrast", "color_twist")
class ColorKernel:
    """hsv, brightness_contrast and color_twist: one linear map per sample, one launch."""

    def __init__(self, setup):
        self.op = setup.op

    def run(self, batch):
        return color(self.op, batch.samples(), batch.sample_args())


CSC_RECORD = np.dtype([("in", "<u8"), ("out", "<u8"), ("pixels", "<i8"), ("mode", "<i4"), ("in_channels", "<i4"),
                       ("out_channels", "<i4"), ("src", "<i4", (3,)), ("dst", "<i4", (3,)), ("pre", "<f4", (3,)),
                       ("m", "<f4", (9,)), ("bias", "<f4", (3,)), ("weights", "<i4", (3,))], align=True)
assert CSC_RECORD.itemsize == 136, CSC_RECORD.itemsize  # kernels/color_space.cu's CscSample


def _csc_record(rec, image, args: dict) -> tuple[int, ...]:
    """Fill one sample's record from the CPU kernel's ColorConversion; returns the output shape."""
    conversion = color_conversion(args["image_type"], args["output_type"])
    check_color_space_input(image.shape, image.dtype, conversion, args["image_type"])
    rec["pixels"] = image.size // conversion.in_channels
    rec["mode"], rec["in_channels"], rec["out_channels"] = conversion.mode, conversion.in_channels, \
        conversion.out_channels
    rec["src"], rec["dst"], rec["weights"] = conversion.src, conversion.dst, conversion.weights
    rec["pre"], rec["bias"] = np.float32(conversion.pre), np.float32(conversion.bias)
    rec["m"] = np.asarray(conversion.m, np.float32).ravel()
    return (*image.shape[:-1], conversion.out_channels)


@gpu_kernel("color_space_conversion")
def color_space_conversion(batch):
    """Every sample's colour space conversion in one launch of kernels/color_space.cu, bit-exact with the CPU's."""
    images, _ = contiguous_samples(batch.samples(), "color_space_conversion", convert=False)
    rec = np.zeros(len(images), CSC_RECORD)
    shapes = [per_sample(i, _csc_record, rec[i], image, args)
              for i, (image, args) in enumerate(zip(images, batch.sample_args(), strict=True))]
    outputs = Outputs(shapes, np.dtype(np.uint8))
    rec["in"] = [image.data.ptr for image in images]
    rec["out"] = outputs.pointers
    if len(images) and rec["pixels"].max() > 0:
        kernel = function("color_space.cu", "color_space_convert")
        kernel((min(blocks(rec["pixels"].max(), 256), 4096), len(images)), (256,), (upload(rec),))
    return outputs.result()
