"""CPU kernels of jitter, water, sphere, grid_mask and jpeg_compression_distortion, with DALI's geometry: a
displacement filter reads output pixel (x, y) at a source point, nearest-neighbour as floor(point), linear with
pixel centres at +0.5 and `fill_value` outside. The geometry (source points, jitter draws, grid masks) is computed
here on the host in float32 and shared with the GPU kernels, whose `remap` is this module's, run on CuPy."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.registry import SampleContext, cpu_kernel

INTERP_NN, INTERP_LINEAR = 0, 1
F32 = np.float32


def image_of(sample, op: str) -> Any:
    """An HW or HWC sample of numbers (numpy or CuPy), as HWC; a ValueError naming the op otherwise."""
    if sample.ndim not in (2, 3):
        raise ValueError(f"{op} expects HWC (or HW) images, got shape {tuple(sample.shape)}")
    if np.dtype(sample.dtype).kind not in "iuf":
        raise ValueError(f"{op} expects numeric images, got {sample.dtype}")
    return sample if sample.ndim == 3 else sample[:, :, None]


def fill_of(value: float, dtype: np.dtype) -> np.ndarray:
    """`fill_value` in the image's element type (integers: truncated and saturated, as C converts it)."""
    dtype = np.dtype(dtype)
    return saturate_cast(np.asarray(value if dtype.kind == "f" else np.trunc(value)), dtype)


def interpolation(args: dict) -> int:
    interp = int(args["interp_type"])
    if interp not in (INTERP_NN, INTERP_LINEAR):
        raise ValueError(f"argument 'interp_type': only INTERP_NN and INTERP_LINEAR are supported, got {interp}")
    return interp


def water_points(h: int, w: int, args: dict) -> tuple[np.ndarray, np.ndarray]:
    """water's source points (x, y) of every output pixel, float32 (H, W) each."""
    y, x = np.mgrid[0:h, 0:w].astype(F32)
    xs = x + F32(args["ampl_x"]) * np.sin(F32(args["freq_x"]) * y + F32(args["phase_x"]))
    ys = y + F32(args["ampl_y"]) * np.cos(F32(args["freq_y"]) * x + F32(args["phase_y"]))
    return xs.astype(F32), ys.astype(F32)


def sphere_points(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """sphere's source points: each pixel centre moved from the image centre by its distance over the half extent."""
    mid_x, mid_y = F32(w * 0.5), F32(h * 0.5)
    radius = F32(max(int(mid_x), int(mid_y), 1))  # DALI truncates the larger half extent to an int
    y, x = np.mgrid[0:h, 0:w].astype(F32)
    true_x, true_y = x + F32(0.5) - mid_x, y + F32(0.5) - mid_y
    rad = np.sqrt(true_x * true_x + true_y * true_y) / radius
    return (mid_x + rad * true_x).astype(F32), (mid_y + rad * true_y).astype(F32)


def jitter_points(h: int, w: int, args: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """jitter's source pixels: each pixel moved by whole numbers in [-(n//2), n - n//2) per axis, clamped to the
    image; float32 pixel corners (exact), so `remap` reads them as they are."""
    n = int(args["nDegree"])
    if n < 1:
        raise ValueError(f"argument 'nDegree' must be at least 1, got {n}")
    low = -(n >> 1)
    moves = rng.integers(low, low + n, size=(2, h, w), dtype=np.int64)
    y, x = np.mgrid[0:h, 0:w]
    return np.clip(x + moves[0], 0, w - 1).astype(F32), np.clip(y + moves[1], 0, h - 1).astype(F32)


def grid_keep(h: int, w: int, args: dict) -> np.ndarray:
    """grid_mask's (H, W) mask: 1 where the pixel is kept, 0 inside a black square (float32 as DALI computes it)."""
    tile, ratio = int(args["tile"]), float(args["ratio"])
    if tile <= 0:
        raise ValueError(f"argument 'tile' must be positive, got {tile}")
    angle = F32(args["angle"])
    dx, dy = F32(np.cos(angle)) / F32(tile), F32(np.sin(angle)) / F32(tile)
    sx, sy = F32(args["shift_x"]) / F32(tile), F32(args["shift_y"]) / F32(tile)
    y, x = np.mgrid[0:h, 0:w].astype(F32)
    fx = x * dx - y * dy - sx
    fy = x * dy + y * dx - sy
    return ((fx - np.floor(fx) >= F32(ratio)) | (fy - np.floor(fy) >= F32(ratio))).astype(np.uint8)


def remap(xp, image, xs, ys, interp: int, fill):
    """Output pixel (y, x) read at (xs, ys) from the HWC `image` (numpy or CuPy, as `xp`): nearest is the pixel at
    floor(point), linear blends the four around point - 0.5 in float32; `fill` outside. Returns the image's type
    for nearest, float32 for linear."""
    h, w = image.shape[:2]

    def taps(yy, xx):
        inside = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
        values = image[xp.clip(yy, 0, h - 1), xp.clip(xx, 0, w - 1)]
        return xp.where(inside[..., None], values, fill)

    def whole(v):  # floor, bounded before the integer conversion (a point may lie far outside)
        return xp.clip(xp.floor(v), -2, max(h, w) + 1).astype(xp.int32)

    if interp == INTERP_NN:
        return taps(whole(ys), whole(xs))
    x, y = (xs - 0.5).astype(xp.float32), (ys - 0.5).astype(xp.float32)
    x0, y0 = whole(x), whole(y)
    qx = (x - xp.floor(x))[..., None].astype(xp.float32)
    qy = (y - xp.floor(y))[..., None].astype(xp.float32)
    px = 1.0 - qx
    s00, s01 = taps(y0, x0).astype(xp.float32), taps(y0, x0 + 1).astype(xp.float32)
    s10, s11 = taps(y0 + 1, x0).astype(xp.float32), taps(y0 + 1, x0 + 1).astype(xp.float32)
    s0 = s00 * px + s01 * qx
    s1 = s10 * px + s11 * qx
    return s0 + (s1 - s0) * qy


def displaced(sample, points: tuple[np.ndarray, np.ndarray], args: dict, whole_pixels: bool = False) -> np.ndarray:
    """A displacement filter's output on the CPU: `sample` (HW or HWC) read at `points` (`whole_pixels`: points
    that are pixels, read as they are whatever the interpolation, as DALI reads jitter's)."""
    image = np.ascontiguousarray(sample if sample.ndim == 3 else sample[:, :, None])
    interp = INTERP_NN if whole_pixels else interpolation(args)
    out = remap(np, image, *points, interp, fill_of(args["fill_value"], image.dtype))
    return saturate_cast(out, image.dtype).reshape(sample.shape)


def applies(args: dict) -> bool:
    """The displacement filters' `mask`: 0 passes the sample through."""
    return int(args["mask"]) != 0


def jpeg_round_trip(image: np.ndarray, quality: int) -> np.ndarray:
    """An RGB uint8 HWC image encoded as a JPEG of `quality` (clamped to 1..100) and decoded, by OpenCV."""
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"jpeg_compression_distortion expects uint8 RGB HWC images, got {image.dtype} shape "
                         f"{tuple(image.shape)}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        return image.copy()
    quality = min(max(int(quality), 1), 100)
    ok, encoded = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError(f"OpenCV could not encode an image of shape {tuple(image.shape)} as JPEG")
    return cv2.cvtColor(cv2.imdecode(encoded, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


@cpu_kernel("jitter")
def jitter(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    image = image_of(np.asarray(inputs[0]), "jitter")
    if not applies(args):
        return np.array(inputs[0])
    return displaced(np.asarray(inputs[0]), jitter_points(image.shape[0], image.shape[1], args, ctx.rng), args,
                     whole_pixels=True)


@cpu_kernel("water")
def water(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    image = image_of(np.asarray(inputs[0]), "water")
    if not applies(args):
        return np.array(inputs[0])
    return displaced(np.asarray(inputs[0]), water_points(image.shape[0], image.shape[1], args), args)


@cpu_kernel("sphere")
def sphere(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    image = image_of(np.asarray(inputs[0]), "sphere")
    if not applies(args):
        return np.array(inputs[0])
    return displaced(np.asarray(inputs[0]), sphere_points(image.shape[0], image.shape[1]), args)


@cpu_kernel("grid_mask")
def grid_mask(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    sample = np.asarray(inputs[0])
    image = image_of(sample, "grid_mask")
    keep = grid_keep(image.shape[0], image.shape[1], args)
    return (image * keep[..., None].astype(image.dtype)).reshape(sample.shape)


@cpu_kernel("jpeg_compression_distortion")
def jpeg_compression_distortion(inputs: list, args: dict, ctx: SampleContext) -> np.ndarray:
    return jpeg_round_trip(np.asarray(inputs[0]), args["quality"])
