"""CPU kernel of clahe: OpenCV's CLAHE (createCLAHE), on CIE Lab's L for RGB with luma_only, as DALI's CPU operator.
`clahe_plane` writes OpenCV's algorithm out for numpy and CuPy (the GPU kernel runs it); it gives OpenCV's result to
within one level where float32 rounding falls on a half."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from headrace_kernels.registry import cpu_kernel

LEVELS = 256


def clahe_setup(image: Any, args: dict) -> tuple[int, int, float, bool]:
    """(tiles_x, tiles_y, clip_limit, luma) for one sample, else a ValueError naming the op and the argument."""
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (1, 3)):
        raise ValueError(f"clahe expects HW images or HWC images of 1 or 3 channels, got shape {tuple(image.shape)}")
    if image.dtype != np.uint8:
        raise ValueError(f"clahe expects uint8 images, got {image.dtype}")
    tiles_x, tiles_y = int(args["tiles_x"]), int(args["tiles_y"])
    for name, tiles, extent in (("tiles_x", tiles_x, image.shape[1]), ("tiles_y", tiles_y, image.shape[0])):
        if tiles < 1 or tiles > extent:
            raise ValueError(f"argument '{name}' must be from 1 to the image's extent {extent}, got {tiles}")
    bins = int(args.get("bins") or LEVELS)
    if bins < 2 or bins & (bins - 1):
        raise ValueError(f"argument 'bins' must be a power of 2, got {bins}")
    luma = bool(args["luma_only"]) and image.ndim == 3 and image.shape[2] == 3
    return tiles_x, tiles_y, float(args["clip_limit"]), luma


def clahe_plane(xp: Any, plane: Any, tiles_x: int, tiles_y: int, clip_limit: float) -> Any:
    """OpenCV's CLAHE of one uint8 HW plane (numpy or CuPy, per `xp`): tile histograms of the plane padded
    (reflect-101, bottom and right) to whole tiles, clipped with the excess spread evenly, cumulated into tables, and
    each pixel's value looked up in its 4 nearest tiles' tables, blended bilinearly in float32."""
    h, w = plane.shape
    if h % tiles_y or w % tiles_x:
        padded = xp.pad(plane, ((0, tiles_y - h % tiles_y), (0, tiles_x - w % tiles_x)), mode="reflect")
    else:
        padded = plane
    th, tw = padded.shape[0] // tiles_y, padded.shape[1] // tiles_x
    area = th * tw
    tiles = padded.reshape(tiles_y, th, tiles_x, tw).transpose(0, 2, 1, 3).reshape(tiles_y * tiles_x, area)
    keys = tiles.astype(xp.int64) + (xp.arange(tiles_y * tiles_x, dtype=xp.int64) * LEVELS)[:, None]
    hist = xp.bincount(keys.ravel(), minlength=tiles_y * tiles_x * LEVELS).reshape(-1, LEVELS)
    if clip_limit > 0:
        limit = max(int(np.float32(clip_limit) * np.float32(area) / np.float32(LEVELS)), 1)
        clipped = xp.maximum(hist - limit, 0).sum(axis=1, keepdims=True)
        hist = xp.minimum(hist, limit) + clipped // LEVELS
        residual = clipped % LEVELS
        step = xp.maximum(LEVELS // xp.maximum(residual, 1), 1)
        levels = xp.arange(LEVELS)[None, :]
        hist = hist + ((levels % step == 0) & (levels // step < residual)).astype(hist.dtype)
    scale = np.float32(LEVELS - 1) / np.float32(area)
    luts = xp.clip(xp.rint(xp.cumsum(hist, axis=1).astype(xp.float32) * scale), 0, 255).astype(xp.float32)

    def axis(n: int, size: int, count: int) -> tuple[Any, Any, Any]:
        f = xp.arange(n, dtype=xp.float32) * (np.float32(1) / np.float32(size)) - np.float32(0.5)
        first = xp.floor(f)
        frac = f - first
        first = first.astype(xp.int64)
        return xp.maximum(first, 0), xp.minimum(first + 1, count - 1), frac

    y1, y2, ya = axis(h, th, tiles_y)
    x1, x2, xa = axis(w, tw, tiles_x)
    values = plane.astype(xp.int64)

    def lut(ty: Any, tx: Any) -> Any:
        return luts[ty[:, None] * tiles_x + tx[None, :], values]

    ya, xa = ya[:, None], xa[None, :]
    one = np.float32(1)
    top = lut(y1, x1) * (one - xa) + lut(y1, x2) * xa
    bottom = lut(y2, x1) * (one - xa) + lut(y2, x2) * xa
    out = top * (one - ya) + bottom * ya
    return xp.clip(xp.rint(out), 0, 255).astype(xp.uint8)


def opencv_clahe(image: np.ndarray, tiles_x: int, tiles_y: int, clip_limit: float, luma: bool) -> np.ndarray:
    """OpenCV's CLAHE of an HW / HWC uint8 image: on L of Lab (`luma`), else per channel."""
    clahe = cv2.createCLAHE(clipLimit=clip_limit, tileGridSize=(tiles_x, tiles_y))
    if luma:
        lab = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2LAB)
        lab[..., 0] = clahe.apply(np.ascontiguousarray(lab[..., 0]))
        return cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)
    if image.ndim == 2:
        return clahe.apply(np.ascontiguousarray(image))
    return np.stack([clahe.apply(np.ascontiguousarray(image[..., c])) for c in range(image.shape[2])], axis=-1)


@cpu_kernel("clahe")
def clahe(inputs, args, ctx):
    image = np.asarray(inputs[0])
    return opencv_clahe(image, *clahe_setup(image, args))
