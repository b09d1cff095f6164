"""Geometry shared by the CPU and GPU kernels: output sizes of resize, crop anchors and random crop windows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def random_crop_window(height: int, width: int, area: list[float], aspect: list[float], attempts: int,
                       rng: np.random.Generator) -> tuple[int, int, int, int]:
    """An Inception-style random window (y, x, h, w): area fraction uniform, aspect ratio log-uniform.

    After `attempts` misses it falls back to the largest centred window whose ratio lies in `aspect`.
    """
    area_lo, area_hi = (area[0], area[-1])
    log_lo, log_hi = math.log(aspect[0]), math.log(aspect[-1])
    total = height * width
    for _ in range(max(attempts, 0)):
        target = total * rng.uniform(area_lo, area_hi)
        ratio = math.exp(rng.uniform(log_lo, log_hi))
        w = round_half_up(math.sqrt(target * ratio))
        h = round_half_up(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            y = int(rng.integers(0, height - h + 1))
            x = int(rng.integers(0, width - w + 1))
            return y, x, h, w
    ratio = width / height
    if ratio < aspect[0]:
        w, h = width, min(height, max(1, round_half_up(width / aspect[0])))
    elif ratio > aspect[-1]:
        h, w = height, min(width, max(1, round_half_up(height * aspect[-1])))
    else:
        h, w = height, width
    return (height - h) // 2, (width - w) // 2, h, w


def crop_anchor(extent: int, crop: int, pos: float) -> int:
    """Top/left of a `crop`-long window placed at relative position `pos` in `extent` (DALI's rule)."""
    return round_half_up(pos * (extent - crop))


def crop_size(args: dict[str, Any], height: int, width: int) -> tuple[int, int]:
    """(h, w) of the crop window from `crop` or `crop_h`/`crop_w`; a missing extent means the whole axis."""
    crop = args.get("crop")
    if crop:
        h, w = crop
    else:
        h, w = args.get("crop_h") or 0, args.get("crop_w") or 0
    return (round_half_up(h) if h else height), (round_half_up(w) if w else width)


def resize_output_size(height: int, width: int, args: dict[str, Any]) -> tuple[int, int]:
    """The (h, w) that `resize` produces for an input of (height, width), following DALI's arguments."""
    mode = args.get("mode") or "default"
    shorter, longer = args.get("resize_shorter") or 0, args.get("resize_longer") or 0
    if shorter or longer:
        if shorter:
            scale = shorter / min(height, width)
        else:
            scale = longer / max(height, width)
        out_h, out_w = height * scale, width * scale
    else:
        size = args.get("size")
        want_h, want_w = (size[0], size[1]) if size else (args.get("resize_y") or 0, args.get("resize_x") or 0)
        if not want_h and not want_w:
            raise ValueError("resize needs resize_x, resize_y, size, resize_shorter or resize_longer")
        if want_h and want_w:
            if mode == "not_larger":
                scale = min(want_h / height, want_w / width)
                out_h, out_w = height * scale, width * scale
            elif mode == "not_smaller":
                scale = max(want_h / height, want_w / width)
                out_h, out_w = height * scale, width * scale
            else:
                out_h, out_w = want_h, want_w
        elif want_h:
            out_h, out_w = want_h, width * want_h / height
        else:
            out_h, out_w = height * want_w / width, want_w
    max_size = args.get("max_size")
    if max_size:
        max_h, max_w = (max_size[0], max_size[-1])
        scale = min(1.0, max_h / out_h if max_h else 1.0, max_w / out_w if max_w else 1.0)
        out_h, out_w = out_h * scale, out_w * scale
    return max(1, round_half_up(out_h)), max(1, round_half_up(out_w))
