"""CPU kernel of experimental.warp_perspective: OpenCV's warpPerspective on float32 data with the matrix moved to
OpenCV's pixel-centre origin, rounded to the input type (as DALI's CPU operator gives). The geometry and fill are
shared with the GPU kernel."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from headrace_kernels.registry import cpu_kernel

INTERP = {0: cv2.INTER_NEAREST, 1: cv2.INTER_LINEAR, 2: cv2.INTER_CUBIC}
BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT,
           "reflect_101": cv2.BORDER_REFLECT_101, "wrap": cv2.BORDER_WRAP}
_HALF = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])


def checked_image(image: Any, op: str = "warp_perspective") -> Any:
    """An HW or HWC sample of a numeric type, else a ValueError naming the op."""
    if image.ndim not in (2, 3):
        raise ValueError(f"{op} expects HW or HWC images, got shape {tuple(image.shape)}")
    if np.dtype(image.dtype).kind not in "iuf":
        raise ValueError(f"{op} expects numeric images, got {image.dtype}")
    return image


def perspective_geometry(height: int, width: int, args: dict, matrix=None) -> tuple[np.ndarray, int, int]:
    """(output-to-input 3x3 matrix in OpenCV's centred coordinates, out_h, out_w) from the argument or the input."""
    matrix = args.get("matrix") if matrix is None else matrix
    if matrix is None:
        raise ValueError("give the matrix (argument 'matrix' or the second input)")
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.size != 9:
        raise ValueError(f"argument 'matrix' needs 9 values (3x3), got shape {matrix.shape}")
    matrix = matrix.reshape(3, 3)
    if not args.get("inverse_map", True):
        if abs(np.linalg.det(matrix)) < 1e-12:
            raise ValueError(f"argument 'matrix' {matrix.tolist()} is not invertible (inverse_map=False)")
        matrix = np.linalg.inv(matrix)
    if args.get("pixel_origin", "corner") == "corner":
        matrix = np.linalg.inv(_HALF) @ matrix @ _HALF
    size = args.get("size")
    if size:
        out_h, out_w = (int(round(float(v))) for v in np.asarray(size).ravel())
    else:
        out_h, out_w = height, width
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"argument 'size' gives an empty output {out_h}x{out_w}")
    return matrix, out_h, out_w


def fill_values(args: dict, channels: int) -> list[float]:
    """The constant border's value per channel: fill_value's one value repeated, or one per channel; default 0."""
    fill = args.get("fill_value")
    if not fill:
        return [0.0] * channels
    fill = [float(v) for v in fill]
    if len(fill) == 1:
        return fill * channels
    if len(fill) != channels:
        raise ValueError(f"argument 'fill_value' needs 1 or {channels} values (the channels), got {len(fill)}")
    return fill


def to_type(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float32 results into the input's type: integers rounded to nearest (even on ties) and clamped."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(values), info.min, info.max).astype(dtype)


@cpu_kernel("experimental.warp_perspective")
def warp_perspective(inputs, args, ctx):
    image = checked_image(np.asarray(inputs[0]))
    matrix, out_h, out_w = perspective_geometry(image.shape[0], image.shape[1], args,
                                                inputs[1] if len(inputs) > 1 else None)
    channels = 1 if image.ndim == 2 else image.shape[2]
    fill = fill_values(args, channels)
    source = image.astype(np.float32)
    if channels <= 4:
        groups = [(source, fill)]
    else:
        groups = [(source[..., c], [fill[c]]) for c in range(channels)]
    flags = INTERP[int(args["interp_type"])] | cv2.WARP_INVERSE_MAP
    border = BORDERS[args["border_mode"]]
    warped = [cv2.warpPerspective(plane, matrix, (out_w, out_h), flags=flags, borderMode=border,
                                  borderValue=tuple(values) + (0.0,) * (4 - len(values)))
              for plane, values in groups]
    out = warped[0] if len(warped) == 1 else np.stack(warped, axis=-1)
    return to_type(out.reshape((out_h, out_w) + image.shape[2:]), image.dtype)
