"""GPU hsv, color_twist and brightness_contrast (kernels/color.cu): the CPU kernels' per-sample coefficients (the
same float32 numbers), applied to the whole batch in one launch."""

from __future__ import annotations

import math
import operator

import numpy as np

from headrace_kernels.cpu.color_ops import (
    brightness_contrast_addend,
    check_color_space_input,
    color_conversion,
    hsv_matrices,
    type_range,
)
from headrace_kernels.dtypes import CTYPES, numpy_dtype
from headrace_kernels.gpu.packing import (
    KERNEL_INPUTS,
    Outputs,
    blocks,
    contiguous_samples,
    kernel_expressions,
    output_type,
    per_sample,
    upload,
)
from headrace_kernels.gpu.ragged import direct_samples
from headrace_kernels.gpu.runtime import function, module
from headrace_kernels.registry import SampleFailureError, gpu_kernel

MODE_MATRIX, MODE_SCALE = 0, 1
RECORD = np.dtype([("in", "<u8"), ("out", "<u8"), ("pixels", "<i8"), ("mode", "<i4"), ("m", "<f4", (9,)),
                   ("scale", "<f4"), ("offset", "<f4")], align=True)
assert RECORD.itemsize == 72, RECORD.itemsize
_READ_DTYPES = frozenset(np.dtype(name) for name in KERNEL_INPUTS)


def _column(args_list: list[dict], name: str) -> np.ndarray:
    """Argument `name` of every sample as float64 [n]."""
    return np.fromiter(map(operator.itemgetter(name), args_list), np.float64, len(args_list))


def _coefficients(op: str, args_list: list[dict], in_dtype: np.dtype) -> tuple[int, np.ndarray, np.ndarray,
                                                                                np.ndarray]:
    """(mode, (n, 3, 3) matrices, scales [n], offsets [n]) of the batch, computed as the CPU kernel computes each
    sample's (the same float32 numbers), for the whole batch at once."""
    n = len(args_list)
    if op == "hsv":
        matrices = hsv_matrices(_column(args_list, "hue"), _column(args_list, "saturation"),
                                _column(args_list, "value"))
        return MODE_MATRIX, matrices, np.ones(n), np.zeros(n)
    top = type_range(in_dtype)
    half = 0.5 * top if in_dtype.kind == "f" else math.ceil(0.5 * top)
    brightness, contrast = _column(args_list, "brightness"), _column(args_list, "contrast")
    if op == "color_twist":
        scale = brightness * contrast
        offset = brightness * (1 - contrast) * half
        matrices = scale[:, None, None] * hsv_matrices(_column(args_list, "hue"), _column(args_list, "saturation"),
                                                       1.0)
        return MODE_MATRIX, matrices, np.ones(n), offset
    dtype = numpy_dtype(args_list[0]["dtype"]) if args_list[0].get("dtype") is not None else in_dtype
    center = np.fromiter((half if a["contrast_center"] is None else a["contrast_center"] for a in args_list),
                         np.float64, n)
    brightness, contrast = brightness.astype(np.float32), contrast.astype(np.float32)
    offset = brightness_contrast_addend(_column(args_list, "brightness_shift"), type_range(dtype), brightness,
                                        contrast, center)
    return MODE_SCALE, np.broadcast_to(np.eye(3), (n, 3, 3)), brightness * contrast, offset


def colour_maps(op: str, args_list: list[dict], in_dtype: np.dtype) -> tuple[int, np.ndarray, np.ndarray, np.ndarray,
                                                                           np.dtype, np.dtype]:
    """The affine map of every sample of a batch of `in_dtype` images through `op`, as the kernel applies it:
    (MODE_*, float32 matrices (n, 9), scales [n], offsets [n], the type written, the op's output type)."""
    n = len(args_list)
    mode, matrices, scale, offset = per_sample(0, _coefficients, op, args_list, in_dtype)
    return (mode, matrices.astype(np.float32).reshape(n, 9), scale.astype(np.float32), offset.astype(np.float32),
            *_output_types(op, args_list, in_dtype))


def _output_types(op: str, args_list: list[dict], in_dtype: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(the type the kernel writes, the op's output type): its `dtype` argument, else the input's."""
    dtype = args_list[0].get("dtype") if args_list else None
    return output_type(in_dtype if dtype is None else numpy_dtype(dtype), op)


def color(op: str, value, args_list: list[dict]):
    """hsv / color_twist / brightness_contrast of every sample of `value` (a GPU batch, or a list of device
    arrays); returns (dense or None, list)."""
    direct = direct_samples(value)
    if direct is not None and direct[0].dtype in _READ_DTYPES:
        array, shapes, addresses = direct
        in_dtype = read = np.dtype(array.dtype)
    else:  # other types are read as float32 copies (contiguous_samples); in_dtype stays the batch's own
        images, in_dtype = contiguous_samples(value.samples() if hasattr(value, "samples") else value, op)
        read = np.dtype(images[0].dtype) if images else in_dtype
        shapes = [image.shape for image in images]
        addresses = [image.data.ptr for image in images]
    n = len(shapes)
    if op != "brightness_contrast":
        for i, shape in enumerate(shapes):
            if len(shape) != 3 or shape[2] != 3:
                raise SampleFailureError(i, f"{op} expects HWC images with 3 channels, got shape {tuple(shape)}")
    rec = np.zeros(n, RECORD)
    if n:
        mode, rec["m"], rec["scale"], rec["offset"], write, final = colour_maps(op, args_list, in_dtype)
        rec["mode"] = mode
        sizes = np.array([math.prod(shape) for shape in shapes], np.int64)
        rec["pixels"] = sizes // 3 if mode == MODE_MATRIX else sizes
    else:
        write, final = _output_types(op, args_list, in_dtype)
    outputs = Outputs(shapes, write)
    rec["in"] = addresses
    rec["out"] = outputs.pointers
    if n and rec["pixels"].max() > 0:
        kernel = module("color.cu", kernel_expressions("color_affine")).get_function(
            f"color_affine<{CTYPES[read.name]}, {CTYPES[write.name]}>")
        kernel((min(blocks(rec["pixels"].max(), 256), 4096), n), (256,), (upload(rec),))
    return outputs.result(final)


@gpu_kernel("hsv", "brightness_contrast", "color_twist")
class ColorKernel:
    """hsv, brightness_contrast and color_twist: one linear map per sample, one launch."""

    def __init__(self, setup):
        self.op = setup.op

    def run(self, batch):
        return color(self.op, batch.input(0), batch.sample_args())


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
