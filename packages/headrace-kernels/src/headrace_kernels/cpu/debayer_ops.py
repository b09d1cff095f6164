"""CPU kernel of debayer / experimental.debayer: OpenCV's demosaicing (cvtColor Bayer*2RGB, as DALI's CPU operator),
and the bilinear rule written out for numpy and CuPy (`bilinear_debayer`), which the GPU kernel runs and which gives
OpenCV's bilinear result exactly."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from headrace_kernels.registry import cpu_kernel

_SUFFIX = {"bilinear_ocv": "RGB", "default_npp": "RGB", "edgeaware_ocv": "RGB_EA", "vng_ocv": "RGB_VNG",
           "gray_ocv": "GRAY"}
_PATTERNS = {(0, 0): "BG", (0, 1): "GB", (1, 0): "GR", (1, 1): "RG"}


def debayer_setup(raw: Any, args: dict) -> tuple[Any, tuple[int, int], str]:
    """(HW raw image, blue position (row, column), algorithm) from one image, else a ValueError naming the op and
    the argument."""
    if raw.ndim == 3 and raw.shape[2] == 1:
        raw = raw[..., 0]
    if raw.ndim != 2:
        raise ValueError(f"debayer expects HW images or HWC images of 1 channel, got shape {tuple(raw.shape)}")
    if raw.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"debayer expects uint8 or uint16 images, got {raw.dtype}")
    if min(raw.shape) < 2 or raw.shape[0] % 2 or raw.shape[1] % 2:
        raise ValueError(f"debayer expects an even height and width (whole 2x2 tiles, as DALI), got "
                         f"{raw.shape[0]}x{raw.shape[1]}")
    blue = tuple(int(v) for v in np.asarray(args["blue_position"]).ravel())
    if blue not in _PATTERNS:
        raise ValueError(f"argument 'blue_position' must be two values of 0 or 1 (row, column), got {list(blue)}")
    algorithm = args.get("algorithm") or "bilinear_ocv"
    if algorithm not in _SUFFIX:
        raise ValueError(f"argument 'algorithm' must be one of {sorted(_SUFFIX)}, got {algorithm!r}")
    if algorithm == "vng_ocv" and raw.dtype != np.uint8:
        raise ValueError(f"argument 'algorithm' 'vng_ocv' takes uint8 images only, got {raw.dtype}")
    return raw, blue, algorithm


def frames_and_args(sample: Any, args: dict, layout: str) -> list[tuple[Any, dict]]:
    """(image, arguments) per frame of a sequence (layout FHW / FHWC; blue_position one pair, or one per frame as
    fn.per_frame gives it), or the one image of a sample of another layout."""
    if not layout.startswith("F"):
        return [(sample, args)]
    if sample.ndim not in (3, 4):
        raise ValueError(f"debayer expects FHW or FHWC sequences, got shape {tuple(sample.shape)}")
    blue = np.asarray(args["blue_position"]).ravel()
    if blue.size % 2 or blue.size // 2 not in (1, sample.shape[0]):
        raise ValueError(f"argument 'blue_position' needs one (row, column) pair or one per frame "
                         f"({sample.shape[0]}), got {blue.size} values")
    pairs = blue.reshape(-1, 2)
    return [(sample[f], {**args, "blue_position": pairs[f % len(pairs)]}) for f in range(sample.shape[0])]


def opencv_debayer(raw: np.ndarray, blue: tuple[int, int], algorithm: str) -> np.ndarray:
    """OpenCV's demosaicing of HW `raw`, as HWC."""
    code = getattr(cv2, f"COLOR_Bayer{_PATTERNS[blue]}2{_SUFFIX[algorithm]}")
    out = cv2.cvtColor(np.ascontiguousarray(raw), code)
    return out if out.ndim == 3 else out[..., None]


def bilinear_debayer(xp: Any, raw: Any, blue: tuple[int, int]) -> Any:
    """OpenCV's bilinear demosaicing (numpy or CuPy, per `xp`) of an image of at least 3x3: every missing colour the
    rounded mean of its 2 or 4 nearest sensors of that colour, the outermost rows and columns copied from their
    neighbours."""
    h, w = raw.shape
    p = xp.pad(raw.astype(xp.int32), 1, mode="reflect")
    centre = p[1:-1, 1:-1]
    cross = (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] + 2) // 4
    diagonal = (p[:-2, :-2] + p[:-2, 2:] + p[2:, :-2] + p[2:, 2:] + 2) // 4
    horizontal = (p[1:-1, :-2] + p[1:-1, 2:] + 1) // 2
    vertical = (p[:-2, 1:-1] + p[2:, 1:-1] + 1) // 2
    row = (xp.arange(h)[:, None] - 1) % 2  # position within the tile that starts at (1, 1)
    col = (xp.arange(w)[None, :] - 1) % 2
    is_blue = (row == blue[0]) & (col == blue[1])
    is_red = (row == 1 - blue[0]) & (col == 1 - blue[1])
    is_green = ~(is_blue | is_red)
    on_blue_row = is_green & (row == blue[0])
    green = xp.where(is_green, centre, cross)
    bl = xp.where(is_blue, centre, xp.where(is_red, diagonal, xp.where(on_blue_row, horizontal, vertical)))
    red = xp.where(is_red, centre, xp.where(is_blue, diagonal, xp.where(on_blue_row, vertical, horizontal)))
    out = xp.stack([red, green, bl], axis=-1)
    out[0], out[-1] = out[1], out[-2]
    out[:, 0], out[:, -1] = out[:, 1], out[:, -2]
    return out.astype(raw.dtype)


@cpu_kernel("debayer", "experimental.debayer")
def debayer(inputs, args, ctx):
    layout = ctx.input_layouts[0] if ctx.input_layouts else ""
    frames = [opencv_debayer(*debayer_setup(frame, frame_args))
              for frame, frame_args in frames_and_args(np.asarray(inputs[0]), args, layout)]
    return frames[0] if not layout.startswith("F") else np.stack(frames)
