"""CPU kernels of rotate and warp_affine: OpenCV's warpAffine on float32 data, with DALI's coordinate convention
(pixel centres at +0.5) and its border rule (fill_value, else repeat the edge)."""

from __future__ import annotations

import math

import cv2
import numpy as np

from headrace_kernels.cpu.color_ops import round_saturate
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

_INTERP = {0: cv2.INTER_NEAREST, 1: cv2.INTER_LINEAR, 2: cv2.INTER_CUBIC}


def _image(inputs, op: str) -> np.ndarray:
    image = np.asarray(inputs[0])
    if image.ndim not in (2, 3):
        raise ValueError(f"{op} expects HW or HWC images, got shape {image.shape}")
    return image


def warp(image: np.ndarray, out_to_in: np.ndarray, out_h: int, out_w: int, args) -> np.ndarray:
    """Resample `image` at out_to_in @ (x, y, 1) for every output pixel centre, in +0.5-centred coordinates."""
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"output size {out_h}x{out_w} is empty")
    linear, shift = out_to_in[:, :2], out_to_in[:, 2]
    centred = np.hstack([linear, (shift + linear @ np.array([0.5, 0.5]) - 0.5)[:, None]])
    fill = args["fill_value"]
    border = cv2.BORDER_REPLICATE if fill is None else cv2.BORDER_CONSTANT
    source = image.astype(np.float32)
    channels = 1 if image.ndim == 2 else image.shape[2]
    planes = [source] if channels <= 4 else [source[..., c] for c in range(channels)]
    flags = _INTERP[int(args["interp_type"])] | cv2.WARP_INVERSE_MAP
    warped = [cv2.warpAffine(p, centred, (out_w, out_h), flags=flags, borderMode=border,
                             borderValue=(float(fill or 0),) * 4) for p in planes]
    out = warped[0] if len(warped) == 1 else np.stack(warped, axis=-1)
    out = out.reshape((out_h, out_w) + image.shape[2:])
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else image.dtype
    return round_saturate(out, dtype)


def rotated_size(height: int, width: int, degrees: float) -> tuple[int, int]:
    """The smallest (height, width) that holds the rotated image, with the parity of the input extent it mostly
    comes from (height, or width past 45 degrees), so that the centre stays on the pixel grid, as DALI does."""
    angle = math.radians(degrees)
    cos, sin = abs(math.cos(angle)), abs(math.sin(angle))
    out_w, out_h = width * cos + height * sin, width * sin + height * cos
    parity = (width, height) if sin > cos else (height, width)
    sized = []
    for extent, original in zip((out_h, out_w), parity, strict=True):
        size = math.ceil(extent - 1e-6)
        if (size - original) % 2:
            size += 1
        sized.append(max(size, 1))
    return sized[0], sized[1]


def rotation_geometry(height: int, width: int, args: dict) -> tuple[np.ndarray, int, int]:
    """(output-to-input 2x3 matrix, out_h, out_w) of `rotate` for an image of (height, width): counter-clockwise
    on screen (y down), input = R (output - out centre) + in centre. Shared with the GPU kernel."""
    if args["size"] is not None:
        out_h, out_w = (int(round(v)) for v in args["size"])
    elif args["keep_size"]:
        out_h, out_w = height, width
    else:
        out_h, out_w = rotated_size(height, width, args["angle"])
    angle = math.radians(args["angle"])
    cos, sin = math.cos(angle), math.sin(angle)
    linear = np.array([[cos, -sin], [sin, cos]])
    shift = np.array([width / 2, height / 2]) - linear @ np.array([out_w / 2, out_h / 2])
    return np.hstack([linear, shift[:, None]]), out_h, out_w


def affine_geometry(height: int, width: int, args: dict, matrix=None) -> tuple[np.ndarray, int, int]:
    """(output-to-input 2x3 matrix, out_h, out_w) of `warp_affine`: the matrix from the second input or the
    argument, inverted unless `inverse_map`. Shared with the GPU kernel."""
    matrix = args["matrix"] if matrix is None else matrix
    if matrix is None:
        raise ValueError("give the matrix (argument or second input)")
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.size != 6:
        raise ValueError(f"the matrix needs 6 values (2x3), got shape {matrix.shape}")
    matrix = matrix.reshape(2, 3)
    if not args["inverse_map"]:
        full = np.vstack([matrix, [0, 0, 1]])
        if abs(np.linalg.det(full)) < 1e-12:
            raise ValueError(f"the matrix {matrix.tolist()} is not invertible")
        matrix = np.linalg.inv(full)[:2]
    out_h, out_w = (int(round(v)) for v in args["size"]) if args["size"] is not None else (height, width)
    return matrix, out_h, out_w


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
