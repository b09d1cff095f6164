"""CPU kernels of hsv, brightness_contrast and color_twist: one affine map per sample, computed in float32 and
rounded half away from zero into integer outputs (as DALI's colour ops do)."""

from __future__ import annotations

import math

import numba
import numpy as np

from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
YIQ_TO_RGB = np.linalg.inv(RGB_TO_YIQ)


def _product(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x @ y of stacked 3x3 matrices, each sum written out left to right: the same bits for a sample whether it is
    computed alone or in a batch (a BLAS product's rounding depends on the build and the batch)."""
    return (x[..., :, 0, None] * y[..., None, 0, :] + x[..., :, 1, None] * y[..., None, 1, :]) \
        + x[..., :, 2, None] * y[..., None, 2, :]


def hsv_matrices(hue, saturation, value) -> np.ndarray:
    """(n, 3, 3) float64: per sample, the RGB map that rotates hue by `hue` degrees and scales saturation and value,
    through YIQ (value * YIQ_TO_RGB @ rotation @ diag(1, s, s) @ RGB_TO_YIQ); arguments of n values or scalars."""
    hue, saturation, value = np.broadcast_arrays(*(np.atleast_1d(np.asarray(a, np.float64))
                                                   for a in (hue, saturation, value)))
    angle = np.radians(hue)
    cos, sin = np.cos(angle), np.sin(angle)
    n = hue.shape[0]
    rotate = np.zeros((n, 3, 3))
    rotate[:, 0, 0], rotate[:, 1, 1], rotate[:, 1, 2], rotate[:, 2, 1], rotate[:, 2, 2] = 1.0, cos, sin, -sin, cos
    scale = np.zeros((n, 3, 3))
    scale[:, 0, 0], scale[:, 1, 1], scale[:, 2, 2] = 1.0, saturation, saturation
    first = value[:, None, None] * YIQ_TO_RGB
    return _product(_product(_product(first, rotate), scale), np.broadcast_to(RGB_TO_YIQ, (n, 3, 3)))


def hsv_matrix(hue: float, saturation: float, value: float) -> np.ndarray:
    """The 3x3 RGB map of one sample (hsv_matrices' numbers)."""
    return hsv_matrices(hue, saturation, value)[0]


def type_range(dtype: np.dtype) -> float:
    """The largest value of an integer type; 1 for floats."""
    return float(np.iinfo(dtype).max) if dtype.kind in "iu" else 1.0


def round_saturate(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Into `dtype`: floats as they are, integers rounded half away from zero and clamped to the type's range."""
    if dtype.kind == "f":
        return values.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    return np.clip(np.trunc(values + np.copysign(0.5, values)), info.min, info.max).astype(dtype)


def _rgb(inputs, op: str) -> np.ndarray:
    image = np.asarray(inputs[0])
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"{op} expects HWC images with 3 channels, got shape {image.shape}")
    return image


def _apply(image: np.ndarray, matrix: np.ndarray, offset: float, args) -> np.ndarray:
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else image.dtype
    weights = matrix.astype(np.float32)
    out = np.empty(image.shape, np.float32)
    if image.dtype == np.float16:  # numba has no half type: widened first (exactly), the map is float32 anyway
        image = image.astype(np.float32)
    _affine_rgb(np.ascontiguousarray(image).reshape(-1, 3), weights, np.float32(offset), out.reshape(-1, 3))
    return round_saturate(out, dtype)


def apply_reference(image: np.ndarray, matrix: np.ndarray, offset: float) -> np.ndarray:
    """The float32 map `_affine_rgb` computes, in numpy (the tests' reference for its bits)."""
    pixels = image.astype(np.float32)
    weights = matrix.astype(np.float32)
    out = np.empty(pixels.shape, np.float32)
    for c in range(3):
        out[..., c] = (pixels[..., 0] * weights[c, 0] + pixels[..., 1] * weights[c, 1]
                       + pixels[..., 2] * weights[c, 2] + np.float32(offset))
    return out


@numba.njit(nogil=True, cache=True)
def _affine_rgb(pixels, weights, offset, out):  # pragma: no cover - compiled
    """out = pixels @ weights.T + offset per pixel, in float32, each sum written out left to right (not a BLAS
    product, whose rounding depends on the build), with the GIL released."""
    for i in range(pixels.shape[0]):
        p0, p1, p2 = np.float32(pixels[i, 0]), np.float32(pixels[i, 1]), np.float32(pixels[i, 2])
        for c in range(3):
            out[i, c] = p0 * weights[c, 0] + p1 * weights[c, 1] + p2 * weights[c, 2] + offset


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
    offset = brightness_contrast_addend(args["brightness_shift"], type_range(dtype), brightness, contrast, center)
    out = image.astype(np.float32) * (brightness * contrast) + offset
    return round_saturate(out, dtype)


def brightness_contrast_addend(shift: float, out_range: float, brightness: float, contrast: float,
                               center: float) -> np.float32:
    """shift * range + brightness * (center - contrast * center), each step in float32 in DALI's order: values
    that fall on a tie then round as DALI's do (float64 here put some a level off)."""
    f = np.float32
    return f(f(f(shift) * f(out_range)) + f(f(brightness) * f(f(center) - f(f(contrast) * f(center)))))


# ---- color_space_conversion ----
# DALI's formulas (its CPU build, checked on every uint8 input): RGB <-> YCbCr and GRAY <-> Y are ITU-R BT.601
# (Y in 16..235) in float32, rounded half away from zero and saturated (round_saturate; on uint8 inputs no value
# lies where its float32 + 0.5 differs from std::round); RGB -> GRAY is OpenCV's fixed point
# (weights / 2**15, rounded); GRAY -> RGB and RGB <-> BGR copy channels. Same-space pairs are refused, as in DALI.

SPACES = {0: "RGB", 1: "BGR", 2: "GRAY", 3: "YCbCr"}  # types.DALIImageType values
CSC_AFFINE, CSC_FIXED, CSC_COPY = 0, 1, 2
_F = np.float32
_Y_FROM_RGB = (_F(0.25678823529), _F(0.50412941176), _F(0.09790588235))
_CB_FROM_RGB = (_F(-0.14822289945), _F(-0.29099278682), _F(0.43921568627))
_CR_FROM_RGB = (_F(0.43921568627), _F(-0.36778831435), _F(-0.07142737192))
_Y_SCALE = _F(255) / _F(219)  # BT.601 luma range 16..235 to gray 0..255
_ZERO = _F(0)
_GRAY_WEIGHTS = (9798, 19235, 3735)  # OpenCV's RGB -> gray in 15-bit fixed point (sum 2**15)


class ColorConversion:
    """One (image_type, output_type) pair as the CPU and GPU kernels run it. AFFINE: u[j] = in[src[j]] - pre[j]
    (0 past the input's channels), v[c] = ((m[c][0] u0 + m[c][1] u1) + m[c][2] u2) + bias[c] in float32, each step
    rounded (no FMA), out[k] = round_saturate(v[dst[k]]). FIXED: out = (sum weights[j] in[j] + 2**14) >> 15.
    COPY: out[k] = in[dst[k]]."""

    def __init__(self, mode: int, in_channels: int, out_channels: int, src=(0, 1, 2), dst=(0, 1, 2),
                 pre=(_ZERO,) * 3, m=((_ZERO,) * 3,) * 3, bias=(_ZERO,) * 3, weights=(0, 0, 0)):
        self.mode, self.in_channels, self.out_channels = mode, in_channels, out_channels
        self.src, self.dst, self.pre, self.m, self.bias, self.weights = src, dst, pre, m, bias, weights


def _csc_table() -> dict[tuple[str, str], ColorConversion]:
    rgb, bgr = (0, 1, 2), (2, 1, 0)
    to_ycbcr = (_Y_FROM_RGB, _CB_FROM_RGB, _CR_FROM_RGB)
    # DALI: ys = (y - 16) * 255/219; r = ys + 1.596 tr; g = (ys - 0.392 tb) - 0.813 tr; b = ys + 2.017 tb, where
    # tb, tr = cb - 128, cr - 128. A subtraction is the addition of the negated product, and an added 0 * u leaves
    # the sum unchanged, so the one AFFINE form gives DALI's numbers bit for bit.
    to_rgb = ((_Y_SCALE, _ZERO, _F(1.5960267848)), (_Y_SCALE, -_F(0.39176228842), -_F(0.81296764538)),
              (_Y_SCALE, _F(2.0172321417), _ZERO))
    offsets = (_F(16), _F(128), _F(128))  # of Y, Cb and Cr: added going to YCbCr, taken off coming from it
    luma = ((_F(219) / _F(255), _ZERO, _ZERO), (_ZERO,) * 3, (_ZERO,) * 3)
    table = {
        ("RGB", "BGR"): ColorConversion(CSC_COPY, 3, 3, dst=bgr),
        ("BGR", "RGB"): ColorConversion(CSC_COPY, 3, 3, dst=bgr),
        ("GRAY", "RGB"): ColorConversion(CSC_COPY, 1, 3, dst=(0, 0, 0)),
        ("GRAY", "BGR"): ColorConversion(CSC_COPY, 1, 3, dst=(0, 0, 0)),
        ("RGB", "GRAY"): ColorConversion(CSC_FIXED, 3, 1, weights=_GRAY_WEIGHTS),
        ("BGR", "GRAY"): ColorConversion(CSC_FIXED, 3, 1, weights=_GRAY_WEIGHTS[::-1]),
        ("GRAY", "YCbCr"): ColorConversion(CSC_AFFINE, 1, 3, m=luma, bias=offsets),
        ("YCbCr", "GRAY"): ColorConversion(CSC_AFFINE, 3, 1, pre=offsets,
                                           m=((_Y_SCALE, _ZERO, _ZERO), (_ZERO,) * 3, (_ZERO,) * 3)),
    }
    for space, order in (("RGB", rgb), ("BGR", bgr)):
        table[(space, "YCbCr")] = ColorConversion(CSC_AFFINE, 3, 3, src=order, m=to_ycbcr, bias=offsets)
        table[("YCbCr", space)] = ColorConversion(CSC_AFFINE, 3, 3, dst=order, pre=offsets, m=to_rgb)
    return table


COLOR_CONVERSIONS = _csc_table()


def color_conversion(image_type, output_type) -> ColorConversion:
    """The conversion from `image_type` to `output_type` (types.DALIImageType), or a ValueError listing DALI's."""
    source, target = SPACES.get(int(image_type), "ANY_DATA"), SPACES.get(int(output_type), "ANY_DATA")
    found = COLOR_CONVERSIONS.get((source, target))
    if found is None:
        pairs = ", ".join(f"{a}->{b}" for a, b in COLOR_CONVERSIONS)
        raise ValueError(f"color_space_conversion cannot convert {source} to {target} (supported: {pairs})")
    return found


def check_color_space_input(shape: tuple, dtype: np.dtype, conversion: ColorConversion, image_type) -> None:
    """DALI's input rules: uint8, channels last in HWC (or FHWC, DHWC, FDHWC), as many channels as image_type has."""
    if np.dtype(dtype) != np.uint8:
        raise ValueError(f"color_space_conversion accepts only uint8 images (as DALI), got {np.dtype(dtype).name}")
    if not 3 <= len(shape) <= 5 or shape[-1] != conversion.in_channels:
        raise ValueError(f"color_space_conversion expects channels-last images (HWC) with "
                         f"{conversion.in_channels} channel(s) for {SPACES[int(image_type)]}, got shape {tuple(shape)}")


def _affine(pixels: np.ndarray, conversion: ColorConversion) -> np.ndarray:
    """AFFINE on (N, channels) uint8 pixels, term by term in float32. Terms of coefficient 0 are left out (the GPU
    adds them: a sum plus +-0 is the same sum, and +-0 rounds to 0), and v rounds as round_saturate rounds it (for
    v >= 0: trunc(v + 0.5); a negative v gives 0 either way)."""
    used = [j for j in range(conversion.in_channels) if any(row[j] != 0 for row in conversion.m)]
    u = {j: pixels[:, conversion.src[j]].astype(np.float32) for j in used}
    for j in used:
        if conversion.pre[j] != 0:
            u[j] -= conversion.pre[j]
    out = np.empty((len(pixels), conversion.out_channels), np.uint8)
    for k in range(conversion.out_channels):
        row, bias = conversion.m[conversion.dst[k]], conversion.bias[conversion.dst[k]]
        v = np.zeros(len(pixels), np.float32)
        for j in used:
            if row[j] != 0:
                v += u[j] * row[j]
        v += bias
        v += _F(0.5)
        out[:, k] = np.clip(v, 0, 255)
    return out


@cpu_kernel("color_space_conversion")
def color_space_conversion(inputs, args, ctx):
    image = np.asarray(inputs[0])
    conversion = color_conversion(args["image_type"], args["output_type"])
    check_color_space_input(image.shape, image.dtype, conversion, args["image_type"])
    pixels = image.reshape(-1, conversion.in_channels)
    if conversion.mode == CSC_COPY:
        out = np.empty((len(pixels), conversion.out_channels), np.uint8)  # C order (fancy indexing gives F order)
        for k in range(conversion.out_channels):
            out[:, k] = pixels[:, conversion.dst[k]]
    elif conversion.mode == CSC_FIXED:
        w = [np.int32(x) for x in conversion.weights]
        wide = pixels.astype(np.int32)
        out = ((wide[:, 0] * w[0] + wide[:, 1] * w[1] + wide[:, 2] * w[2] + (1 << 14)) >> 15).astype(np.uint8)[:, None]
    elif conversion.in_channels == 1 or all(row[1] == 0 and row[2] == 0 for row in conversion.m):
        # the outputs depend on one channel (GRAY <-> YCbCr): convert its 256 values once, then look them up
        ramp = np.zeros((256, conversion.in_channels), np.uint8)
        ramp[:, conversion.src[0]] = np.arange(256)
        out = np.take(_affine(ramp, conversion), pixels[:, conversion.src[0]], axis=0)
    else:
        out = _affine(pixels, conversion)
    return np.ascontiguousarray(out).reshape(*image.shape[:-1], conversion.out_channels)
