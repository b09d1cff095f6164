"""CPU kernels of rotate and warp_affine, computed the way DALI's CPU operators compute them so that the outputs
agree bit for bit: a float32 output-to-input matrix (pixel centres at +0.5), source positions accumulated along each
row in float32 (as DALI's affine warp does, restarting every 256 pixels), nearest = the pixel the position falls in
(ties go to the right / lower pixel), bilinear blended in float32 as DALI's sampler does, and integer outputs rounded
half away from zero. The GPU kernel (kernels/warp.cu) takes the same matrices and repeats the same float32 steps."""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numba
import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

F32 = np.float32
TILE = 256  # DALI's CPU warp recomputes the row position every TILE pixels (tile start += TILE * d/dx)
INT_MIN = -(2 ** 31)
INTERP_NN, INTERP_LINEAR, INTERP_CUBIC = 0, 1, 2


def _libm_trig():
    """cosf and sinf of the C library, which DALI calls: they differ from the correctly rounded values in about
    1% of the angles, and one ulp of the matrix moves many source positions. Correctly rounded values otherwise."""
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        cosf, sinf = libm.cosf, libm.sinf
        for f in (cosf, sinf):
            f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
        return cosf, sinf
    except (OSError, AttributeError):
        return (lambda t: math.cos(t)), (lambda t: math.sin(t))


_COSF, _SINF = _libm_trig()


def radians_f32(degrees: float) -> np.float32:
    """DALI's deg2rad: float32 degrees times float32(pi / 180), in float32."""
    return F32(F32(degrees) * F32(math.pi / 180))


def cos_sin_f32(degrees: float) -> tuple[np.float32, np.float32]:
    """cos and sin of DALI's float32 radians, as the C library's cosf / sinf give them (DALI's rotation2D)."""
    theta = radians_f32(degrees)
    return F32(_COSF(theta)), F32(_SINF(theta))


def output_size(size, op: str = "warp") -> tuple[int, int]:
    """A literal `size` (height, width) as DALI reads it: float32, rounded half away from zero, at least 1."""
    values = [float(F32(v)) for v in size]
    if len(values) != 2 or any(not v > 0 for v in values):
        raise ValueError(f"{op}: `size` must be two positive extents (height, width), got {list(size)}")
    return tuple(max(1, int(math.floor(v + 0.5))) for v in values)


def rotated_size(height: int, width: int, degrees: float) -> tuple[int, int]:
    """DALI's canvas for rotate without size / keep_size: the rotated bounding box (less 0.01, rounded up), each
    extent given the parity of the input extent it mostly comes from (height, or width past 45 degrees, decided on
    the float32 angle), so that the centre stays on the pixel grid."""
    angle = float(radians_f32(degrees))
    cos, sin = abs(math.cos(angle)), abs(math.sin(angle))
    out_w = math.ceil(cos * width + sin * height - 1e-2)
    out_h = math.ceil(cos * height + sin * width - 1e-2)
    parity_w, parity_h = (width % 2, height % 2) if sin <= cos else (height % 2, width % 2)
    return out_h + ((out_h % 2) ^ parity_h), out_w + ((out_w % 2) ^ parity_w)


def rotation_matrix(height: int, width: int, out_h: int, out_w: int, degrees: float) -> np.ndarray:
    """The float32 2x3 output-to-input matrix of rotate (counter-clockwise on screen): input = R (output - out
    centre) + in centre, multiplied out in float32 in DALI's order."""
    cos, sin = cos_sin_f32(degrees)
    half = F32(0.5)
    ox, oy, ix, iy = F32(out_w) * half, F32(out_h) * half, F32(width) * half, F32(height) * half
    shift_x = (cos * -ox + (-sin) * -oy) + ix
    shift_y = (sin * -ox + cos * -oy) + iy
    return np.array([[cos, -sin, shift_x], [sin, cos, shift_y]], F32)


def rotation_geometry(height: int, width: int, args: dict) -> tuple[np.ndarray, int, int]:
    """(float32 output-to-input 2x3 matrix, out_h, out_w) of `rotate` for an image of (height, width). Shared with
    the GPU kernel."""
    if args["size"] is not None:
        out_h, out_w = output_size(args["size"], "rotate")
    elif args["keep_size"]:
        out_h, out_w = height, width
    else:
        out_h, out_w = rotated_size(height, width, args["angle"])
    return rotation_matrix(height, width, out_h, out_w, args["angle"]), out_h, out_w


def invert_affine(matrix: np.ndarray) -> np.ndarray:
    """The inverse of a float32 2x3 affine matrix, in float32 as DALI inverts it (adjugate / determinant)."""
    a, b, c, d = matrix[0, 0], matrix[0, 1], matrix[1, 0], matrix[1, 1]
    det = a * d - b * c
    if det == 0 or not np.isfinite(det):
        raise ValueError(f"warp_affine: the matrix {matrix.tolist()} is not invertible (inverse_map=False)")
    inv = np.array([[d / det, -b / det], [-c / det, a / det]], F32)
    tx, ty = matrix[0, 2], matrix[1, 2]
    shift = [tx * -inv[0, 0] + ty * -inv[0, 1], tx * -inv[1, 0] + ty * -inv[1, 1]]
    return np.hstack([inv, np.array(shift, F32)[:, None]])


def affine_geometry(height: int, width: int, args: dict, matrix=None) -> tuple[np.ndarray, int, int]:
    """(float32 output-to-input 2x3 matrix, out_h, out_w) of `warp_affine`: the matrix from the second input or the
    argument (read as float32), inverted unless `inverse_map`. Shared with the GPU kernel."""
    matrix = args["matrix"] if matrix is None else matrix
    if matrix is None:
        raise ValueError("warp_affine: give the matrix (argument `matrix` or a second input)")
    matrix = np.asarray(matrix, dtype=F32)
    if matrix.size != 6:
        raise ValueError(f"warp_affine: the matrix needs 6 values (2x3), got shape {matrix.shape}")
    matrix = matrix.reshape(2, 3)
    if not args["inverse_map"]:
        matrix = invert_affine(matrix)
    out_h, out_w = output_size(args["size"], "warp_affine") if args["size"] is not None else (height, width)
    return matrix, out_h, out_w


def source_positions(matrix: np.ndarray, out_h: int, out_w: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 (x, y) input positions (pixel centres at +0.5) of every output pixel: the row's first pixel centre
    mapped, then d/dx added pixel after pixel, the start moved on by TILE * d/dx every TILE pixels."""
    rows = np.arange(out_h, dtype=F32) + F32(0.5)
    half = F32(0.5)
    out = []
    for r in range(2):
        step = matrix[r, 0]
        start = (matrix[r, 2] + matrix[r, 0] * half) + matrix[r, 1] * rows
        positions = np.empty((out_h, out_w), F32)
        for x0 in range(0, out_w, TILE):
            n = min(TILE, out_w - x0)
            steps = np.full((out_h, n), step, F32)
            steps[:, 0] = start
            np.add.accumulate(steps, axis=1, dtype=F32, out=positions[:, x0:x0 + n])
            start = start + F32(TILE) * step
        out.append(positions)
    return out[0], out[1]


def floor_int(values: np.ndarray) -> np.ndarray:
    """C's (int)floorf on x86 as int64: NaN and values outside int32 give INT_MIN (cvttss2si's answer)."""
    floored = np.floor(values)
    valid = (floored >= INT_MIN) & (floored < -INT_MIN)
    return np.where(valid, floored, INT_MIN).astype(np.int64)


@numba.njit(nogil=True, cache=True)
def _floor_int(v):
    """floor_int of one float32."""
    f = np.floor(v)
    if f >= -2147483648.0 and f < 2147483648.0:
        return np.int64(f)
    return np.int64(-2147483648)


@numba.njit(nogil=True, cache=True)
def _store(v, integer, lo, hi):
    """A float32 result as DALI's ConvertSat writes it: into integers rounded half away from zero and clamped to
    [lo, hi] (NaN gives 0), floats as they are. Returned as float64; the caller's store casts it."""
    if not integer:
        return np.float64(v)
    if v != v:
        return 0.0
    r = np.floor(np.float64(v) + 0.5) if v >= 0 else np.ceil(np.float64(v) - 0.5)
    return min(max(r, lo), hi)


@numba.njit(nogil=True, cache=True)
def _warp_loop(image, matrix, out, linear, use_border, border, integer, lo, hi):
    """DALI's CPU affine warp of an HWC image into `out` (HWC): per row, the first pixel centre mapped through the
    float32 `matrix`, then d/dx added pixel by pixel (the start moved on by TILE * d/dx every TILE pixels). Nearest:
    the pixel at floor(position), `image` and `border` (border[0]) already in out's type. Linear: DALI's blend in
    float32, `border` the input type's border value as float32, stored by _store(integer, lo, hi)."""
    height, width, channels = image.shape
    out_h, out_w = out.shape[0], out.shape[1]
    half, one = np.float32(0.5), np.float32(1.0)
    step_x, step_y = matrix[0, 0], matrix[1, 0]
    tile_x, tile_y = np.float32(TILE) * step_x, np.float32(TILE) * step_y
    for oy in range(out_h):
        centre_y = np.float32(oy) + half
        row_x = (matrix[0, 2] + matrix[0, 0] * half) + matrix[0, 1] * centre_y
        row_y = (matrix[1, 2] + matrix[1, 0] * half) + matrix[1, 1] * centre_y
        for first in range(0, out_w, TILE):
            sx, sy = row_x, row_y
            for ox in range(first, min(first + TILE, out_w)):
                if not linear:
                    xi, yi = _floor_int(sx), _floor_int(sy)
                    inside = xi >= 0 and xi < width and yi >= 0 and yi < height
                    xc, yc = min(max(xi, 0), width - 1), min(max(yi, 0), height - 1)
                    for c in range(channels):
                        out[oy, ox, c] = border[0] if use_border and not inside else image[yc, xc, c]
                else:
                    x, y = sx - half, sy - half
                    x0, y0 = _floor_int(x), _floor_int(y)
                    qx, qy = x - np.float32(x0), y - np.float32(y0)
                    px = one - qx
                    xa, xb = min(max(x0, 0), width - 1), min(max(x0 + 1, 0), width - 1)
                    ya, yb = min(max(y0, 0), height - 1), min(max(y0 + 1, 0), height - 1)
                    in_xa, in_xb = x0 >= 0 and x0 < width, x0 + 1 >= 0 and x0 + 1 < width
                    in_ya, in_yb = y0 >= 0 and y0 < height, y0 + 1 >= 0 and y0 + 1 < height
                    for c in range(channels):
                        v00 = np.float32(image[ya, xa, c])
                        v01 = np.float32(image[ya, xb, c])
                        v10 = np.float32(image[yb, xa, c])
                        v11 = np.float32(image[yb, xb, c])
                        if use_border:
                            if not (in_xa and in_ya):
                                v00 = border[0]
                            if not (in_xb and in_ya):
                                v01 = border[0]
                            if not (in_xa and in_yb):
                                v10 = border[0]
                            if not (in_xb and in_yb):
                                v11 = border[0]
                        top = v00 * px + v01 * qx
                        bottom = v10 * px + v11 * qx
                        out[oy, ox, c] = _store(top + (bottom - top) * qy, integer, lo, hi)
                sx = sx + step_x
                sy = sy + step_y
            row_x = row_x + tile_x
            row_y = row_y + tile_y


class _Taps:
    """Reads pixels at integer positions: outside the image the border value, or the edge pixel repeated."""

    def __init__(self, image: np.ndarray, border):
        self.height, self.width = image.shape[:2]
        self.flat = image.reshape(self.height * self.width, -1)
        self.border = border

    def __call__(self, xi: np.ndarray, yi: np.ndarray) -> np.ndarray:
        index = np.clip(yi, 0, self.height - 1) * self.width + np.clip(xi, 0, self.width - 1)
        values = self.flat[index]
        if self.border is not None:
            outside = (xi < 0) | (xi >= self.width) | (yi < 0) | (yi >= self.height)
            values[outside] = self.border
        return values


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """OpenCV's cubic convolution weights (A = -0.75) for the 4 taps around offset t, in float32 (the GPU's order)."""
    a = F32(-0.75)
    t1, u = t + F32(1), F32(1) - t
    w0 = ((a * t1 - F32(5) * a) * t1 + F32(8) * a) * t1 - F32(4) * a
    w1 = ((a + F32(2)) * t - (a + F32(3))) * t * t + F32(1)
    w2 = ((a + F32(2)) * u - (a + F32(3))) * u * u + F32(1)
    return [w0, w1, w2, ((F32(1) - w0) - w1) - w2]


def _cubic(image: np.ndarray, matrix: np.ndarray, out_h: int, out_w: int, border) -> np.ndarray:
    """Cubic resampling (beyond DALI, which has none here) at the same positions, in float32: 4x4 taps around
    floor(position - 0.5), rows weighed first."""
    sx, sy = source_positions(matrix, out_h, out_w)
    taps = _Taps(image, border)
    x, y = sx - F32(0.5), sy - F32(0.5)
    xi, yi = floor_int(x), floor_int(y)
    wx = _cubic_weights((x - xi.astype(F32))[..., None])
    wy = _cubic_weights((y - yi.astype(F32))[..., None])
    out = np.zeros((out_h, out_w, image.shape[2]), F32)
    for j in range(4):
        row = np.zeros_like(out)
        for k in range(4):
            row = row + taps(xi - 1 + k, yi - 1 + j).astype(F32) * wx[k]
        out = out + row * wy[j]
    return out


def border_value(fill, interp: int, in_dtype: np.dtype, out_dtype: np.dtype) -> np.ndarray | None:
    """fill_value as DALI's samplers see it (one element), or None: for nearest, converted to the output type; for
    the interpolating modes, to the output type and then to the input's. Shared with the GPU kernel."""
    if fill is None:
        return None
    value = saturate_cast(np.array([fill], np.float64), out_dtype)
    return value if interp == INTERP_NN else saturate_cast(value, in_dtype)


def resample(image: np.ndarray, matrix: np.ndarray, out_h: int, out_w: int, interp: int, fill,
             out_dtype: np.dtype) -> np.ndarray:
    """The HWC image sampled through the float32 `matrix` with DALI's samplers, in out_dtype."""
    image = np.ascontiguousarray(image)
    matrix = np.ascontiguousarray(matrix, dtype=F32)
    border = border_value(fill, interp, image.dtype, out_dtype)
    if interp == INTERP_NN:  # pixels convert straight to the output type
        out = np.empty((out_h, out_w, image.shape[2]), out_dtype)
        source = image if image.dtype == out_dtype else np.ascontiguousarray(saturate_cast(image, out_dtype))
        _warp_loop(source, matrix, out, False, border is not None,
                   np.zeros(1, out_dtype) if border is None else border, False, 0.0, 0.0)
        return out
    if interp == INTERP_CUBIC:
        return saturate_cast(_cubic(image, matrix, out_h, out_w, None if border is None else border[0]), out_dtype)
    direct = out_dtype.kind in "iu" and out_dtype.itemsize <= 4 or out_dtype in (np.float32, np.float64)
    out = np.empty((out_h, out_w, image.shape[2]), out_dtype if direct else F32)
    integer = out.dtype.kind in "iu"
    lo, hi = (float(np.iinfo(out.dtype).min), float(np.iinfo(out.dtype).max)) if integer else (0.0, 0.0)
    _warp_loop(image, matrix, out, True, border is not None,
               np.zeros(1, F32) if border is None else border.astype(F32), integer, lo, hi)
    return out if direct else saturate_cast(out, out_dtype)


def warp(image: np.ndarray, matrix: np.ndarray, out_h: int, out_w: int, args) -> np.ndarray:
    """`image` (HW or HWC) resampled through the float32 output-to-input `matrix` onto an out_h x out_w canvas."""
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"output size {out_h}x{out_w} is empty")
    if image.size == 0:
        raise ValueError(f"cannot warp an empty image of shape {image.shape}")
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else image.dtype
    hwc = image if image.ndim == 3 else image[..., None]
    out = resample(hwc, matrix, out_h, out_w, int(args["interp_type"]), args["fill_value"], np.dtype(dtype))
    return out.reshape((out_h, out_w) + image.shape[2:])


def _image(inputs, op: str) -> np.ndarray:
    image = np.asarray(inputs[0])
    if image.ndim not in (2, 3):
        raise ValueError(f"{op} expects HW or HWC images, got shape {image.shape}")
    return image


@cpu_kernel("rotate")
def rotate(inputs, args, ctx):
    image = _image(inputs, "rotate")
    matrix, out_h, out_w = rotation_geometry(image.shape[0], image.shape[1], args)
    return warp(image, matrix, out_h, out_w, args)


@cpu_kernel("warp_affine")
def warp_affine(inputs, args, ctx):
    image = _image(inputs, "warp_affine")
    matrix, out_h, out_w = affine_geometry(image.shape[0], image.shape[1], args, inputs[1] if len(inputs) > 1 else None)
    return warp(image, matrix, out_h, out_w, args)
