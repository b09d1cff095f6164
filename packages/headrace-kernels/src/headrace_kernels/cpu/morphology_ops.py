"""CPU kernels of experimental.median_blur / dilate / erode and equalize on HW / HWC images: the border made by
padding (numpy), then OpenCV over the padded image (or numpy where OpenCV has no such filter). Window geometry, the
padding and the equalization table are shared with the GPU kernels."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from headrace_kernels.registry import cpu_kernel

BORDER_PADS = {"replicate": "edge", "reflect": "symmetric", "reflect_101": "reflect", "wrap": "wrap"}
"""DALI's (CV-CUDA's) border names -> numpy.pad's (and cupy.pad's) modes; 'constant' pads with a neutral value."""


def checked_image(image: Any, op: str) -> Any:
    """An HW or HWC sample of a numeric type, else a ValueError naming the op."""
    if image.ndim not in (2, 3):
        raise ValueError(f"{op} expects HW or HWC images, got shape {tuple(image.shape)}")
    if np.dtype(image.dtype).kind not in "iuf":
        raise ValueError(f"{op} expects numeric images, got {image.dtype}")
    return image


def window_hw(args: dict, name: str, odd: bool) -> tuple[int, int]:
    """(height, width) of argument `name`, given as one value or (width, height)."""
    values = [int(v) for v in np.asarray(args[name]).ravel()]
    if len(values) == 1:
        values *= 2
    if len(values) != 2:
        raise ValueError(f"argument '{name}' needs 1 or 2 values (width, height), got {len(values)}")
    width, height = values
    if width < 1 or height < 1 or (odd and (width % 2 == 0 or height % 2 == 0)):
        raise ValueError(f"argument '{name}' must be {'odd and ' if odd else ''}positive, got {values}")
    return height, width


def median_pads(args: dict) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """(window (height, width), pads (before, after) for H and W) of median_blur: centred, odd."""
    height, width = window_hw(args, "window_size", odd=True)
    return (height, width), [(height // 2,) * 2, (width // 2,) * 2]


def morphology_pads(args: dict) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """(element (height, width), pads for H and W) of dilate / erode: the mask grown for `iterations`, as OpenCV."""
    height, width = window_hw(args, "mask_size", odd=False)
    anchor = [int(v) for v in np.asarray(args["anchor"]).ravel()]
    anchor = anchor * 2 if len(anchor) == 1 else anchor
    if len(anchor) != 2:
        raise ValueError(f"argument 'anchor' needs 1 or 2 values (x, y), got {len(anchor)}")
    ax, ay = (width // 2 if anchor[0] == -1 else anchor[0]), (height // 2 if anchor[1] == -1 else anchor[1])
    if not (0 <= ax < width and 0 <= ay < height):
        raise ValueError(f"argument 'anchor' {anchor} must lie within the mask (width {width}, height {height}) or "
                         "be -1")
    times = int(args.get("iterations", 1))
    if times < 1:
        raise ValueError(f"argument 'iterations' must be at least 1, got {times}")
    height, width = times * (height - 1) + 1, times * (width - 1) + 1
    ay, ax = times * ay, times * ax
    return (height, width), [(ay, height - 1 - ay), (ax, width - 1 - ax)]


def neutral(dtype: np.dtype, maximum: bool) -> float:
    """The value that never wins a maximum (`maximum`) or a minimum: the type's lowest or highest."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return -np.inf if maximum else np.inf
    info = np.iinfo(dtype)
    return info.min if maximum else info.max


def pad_image(xp: Any, image: Any, pads: list[tuple[int, int]], border: str, constant: float) -> Any:
    """`image` (numpy or CuPy, per `xp`) padded over H and W by the rule `border` ('constant': with `constant`)."""
    widths = [*pads, *([(0, 0)] if image.ndim == 3 else [])]
    if border == "constant":
        return xp.pad(image, widths, mode="constant", constant_values=constant)
    return xp.pad(image, widths, mode=BORDER_PADS[border])


def _planes(image: np.ndarray) -> list[np.ndarray]:
    return [image] if image.ndim == 2 or image.shape[2] <= 4 else [image[..., c] for c in range(image.shape[2])]


def _joined(planes: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    return (planes[0] if len(planes) == 1 else np.stack(planes, axis=-1)).reshape(shape)


def window_rank(image: np.ndarray, window: tuple[int, int], rank: str) -> np.ndarray:
    """out[y, x] = max / min / median of padded `image` over window[0] x window[1] starting at (y, x) (numpy)."""
    out_h, out_w = image.shape[0] - window[0] + 1, image.shape[1] - window[1] + 1
    views = np.lib.stride_tricks.sliding_window_view(image, window, axis=(0, 1))[:out_h, :out_w]
    flat = views.reshape(*views.shape[:-2], -1)
    if rank == "max":
        return flat.max(axis=-1)
    if rank == "min":
        return flat.min(axis=-1)
    return np.partition(flat, flat.shape[-1] // 2, axis=-1)[..., flat.shape[-1] // 2]


def median_blur(image: np.ndarray, args: dict) -> np.ndarray:
    window, pads = median_pads(args)
    square = window[0] == window[1]
    if square and (image.dtype == np.uint8 or (window[0] <= 5 and image.dtype in (np.uint16, np.float32))):
        return _joined([cv2.medianBlur(np.ascontiguousarray(p), window[0]) for p in _planes(image)], image.shape)
    return window_rank(pad_image(np, image, pads, "replicate", 0), window, "median")


def morphology(image: np.ndarray, args: dict, maximum: bool) -> np.ndarray:
    window, pads = morphology_pads(args)
    padded = pad_image(np, image, pads, args["border_mode"], neutral(image.dtype, maximum))
    if image.dtype in (np.uint8, np.uint16, np.int16, np.float32, np.float64):
        element = np.ones(window, np.uint8)
        apply = cv2.dilate if maximum else cv2.erode
        planes = [apply(np.ascontiguousarray(p), element, anchor=(0, 0), borderType=cv2.BORDER_REPLICATE)
                  for p in _planes(padded)]
        return _joined(planes, padded.shape)[:image.shape[0], :image.shape[1]]
    return window_rank(padded, window, "max" if maximum else "min")


def equalize_lut(histogram: np.ndarray) -> np.ndarray:
    """The uint8 table of OpenCV's equalizeHist for a 256-bin histogram: 0 up to the first used level, then the
    cumulative count past it scaled by 255 / (count - that level's count) in float32, rounded half to even."""
    histogram = np.asarray(histogram, dtype=np.int64)
    total = int(histogram.sum())
    first = int(np.argmax(histogram > 0)) if total else 0
    if total == 0 or histogram[first] == total:
        return np.arange(256, dtype=np.uint8)  # one level only: OpenCV leaves the image as it is
    scale = np.float32(255.0) / np.float32(total - histogram[first])
    lut = np.zeros(256, np.float32)
    lut[first + 1:] = np.cumsum(histogram[first + 1:]).astype(np.float32) * scale
    return np.clip(np.rint(lut), 0, 255).astype(np.uint8)


def check_equalize(image: Any, op: str = "equalize") -> Any:
    """A uint8 HW / HWC image, else a ValueError naming the op."""
    checked_image(image, op)
    if image.dtype != np.uint8:
        raise ValueError(f"{op} expects uint8 images, got {image.dtype}")
    return image


@cpu_kernel("experimental.median_blur")
def median_blur_op(inputs, args, ctx):
    return median_blur(checked_image(np.asarray(inputs[0]), "median_blur"), args)


@cpu_kernel("experimental.dilate")
def dilate(inputs, args, ctx):
    return morphology(checked_image(np.asarray(inputs[0]), "dilate"), args, maximum=True)


@cpu_kernel("experimental.erode")
def erode(inputs, args, ctx):
    return morphology(checked_image(np.asarray(inputs[0]), "erode"), args, maximum=False)


@cpu_kernel("equalize", "experimental.equalize")
def equalize(inputs, args, ctx):
    image = check_equalize(np.asarray(inputs[0]))
    if image.ndim == 2:
        return cv2.equalizeHist(np.ascontiguousarray(image))
    return np.stack([cv2.equalizeHist(np.ascontiguousarray(image[..., c])) for c in range(image.shape[2])], axis=-1)
