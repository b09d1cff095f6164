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
    """Top/left of a `crop`-long window placed at relative position `pos` in `extent`: DALI rounds half away from
    zero, so a window larger than the image centres to the same side as DALI's."""
    offset = pos * (extent - crop)
    return round_half_up(offset) if offset >= 0 else -round_half_up(-offset)


def crop_size(args: dict[str, Any], height: int, width: int) -> tuple[int, int]:
    """(h, w) of the crop window from `crop` or `crop_h`/`crop_w`; a missing extent means the whole axis. A
    fractional extent is truncated, as DALI's crop and crop_mirror_normalize do (30.5 -> 30)."""
    crop = args.get("crop")
    if crop:
        h, w = crop
    else:
        h, w = args.get("crop_h") or 0, args.get("crop_w") or 0
    return (int(h) if h else height), (int(w) if w else width)


def _requested_size(height: int, width: int, args: dict[str, Any]) -> tuple[np.float32, np.float32]:
    """The (h, w) that `resize` asks for an input of (height, width), before rounding, by DALI's rules and in its
    float32 arithmetic (so that sizes on a .5 boundary round the same way): resize_shorter is 'not_smaller' with
    the same extent on both axes, resize_longer 'not_larger'; in 'default' mode a missing extent takes the given
    one's scale, in 'stretch' mode it stays; max_size clamps each extent (default/stretch) or bounds the common
    scale."""
    f32 = np.float32
    shorter, longer = args.get("resize_shorter") or 0, args.get("resize_longer") or 0
    if shorter or longer:
        mode = "not_smaller" if shorter else "not_larger"
        wanted = [f32(shorter or longer)] * 2
    else:
        mode = args.get("mode") or "default"
        size = args.get("size")
        wanted = [f32(v) for v in (size if size else (args.get("resize_y") or 0, args.get("resize_x") or 0))]
    in_size = [f32(height), f32(width)]
    given = [w != 0 and i != 0 for w, i in zip(wanted, in_size, strict=True)]
    scale = [float(f32(w / i)) if i else 1.0 for w, i in zip(wanted, in_size, strict=True)]
    out = list(wanted)
    max_size = args.get("max_size")
    limits = [f32(max_size[0]), f32(max_size[-1])] if max_size else None
    if not any(given):
        out = list(in_size)
    elif mode in ("default", "stretch"):
        if mode == "default" and not all(given):
            common = abs(next(s for s, g in zip(scale, given, strict=True) if g))
            out = [o if g else f32(float(i) * common) for o, i, g in zip(out, in_size, given, strict=True)]
        elif not all(given):
            out = [o if g else i for o, i, g in zip(out, in_size, given, strict=True)]
        if limits:
            out = [lim if 0 < lim < abs(o) else o for o, lim in zip(out, limits, strict=True)]
    else:
        final = None
        for s, g in zip(scale, given, strict=True):
            if g:
                s = float(f32(abs(s)))
                if final is None or (s > final if mode == "not_smaller" else s < final):
                    final = s
        if limits:
            final = min([final] + [float(lim) / float(i) for lim, i in zip(limits, in_size, strict=True) if lim > 0])
        out = [o if g and abs(s) == final else f32(float(i) * final)
               for o, s, i, g in zip(out, scale, in_size, given, strict=True)]
    return tuple(out)


def resize_output_size(height: int, width: int, args: dict[str, Any]) -> tuple[int, int]:
    """The (h, w) that `resize` produces for an input of (height, width): the requested size rounded to nearest,
    at least 1."""
    return tuple(max(1, round_half_up(abs(float(o)))) for o in _requested_size(height, width, args))


def fixed_resize_size(args: dict[str, Any]) -> tuple[int, int] | None:
    """(h, w) when `resize` maps every input, whole, onto the same whole-pixel size (both extents given as positive
    whole numbers, mode default or stretch, no max_size): then `resize_plan` of any input is ((h, w), the whole
    image), and a batch needs no per-sample plan. None otherwise."""
    if args.get("resize_shorter") or args.get("resize_longer") or args.get("max_size"):
        return None
    if (args.get("mode") or "default") not in ("default", "stretch"):
        return None
    size = args.get("size")
    wanted = list(size) if size else [args.get("resize_y") or 0, args.get("resize_x") or 0]
    if len(wanted) != 2:
        return None
    out = []
    for value in wanted:
        value = float(np.float32(value))
        if not value > 0 or value != math.floor(value):
            return None
        out.append(int(value))
    return out[0], out[1]


def resize_plan(height: int, width: int, args: dict[str, Any]) -> tuple[int, int, tuple[float, float, float, float]]:
    """(out_h, out_w, source region (y0, x0, y1, x1)) of `resize`. With subpixel_scale (DALI's default) a
    fractional requested size keeps its exact scale: the source region shrinks or grows about its centre by
    rounded / requested, as DALI does; without it the whole image maps onto the rounded size."""
    requested = _requested_size(height, width, args)
    out_h, out_w = (max(1, round_half_up(abs(float(o)))) for o in requested)
    region = [0.0, 0.0, float(height), float(width)]
    if args.get("subpixel_scale", True):
        for axis, (size, want) in enumerate(zip((out_h, out_w), requested, strict=True)):
            want = abs(float(want))
            if want and size != want:
                adjustment = min(10.0, size / want)
                extent = (height, width)[axis]
                centre = extent / 2
                region[axis], region[axis + 2] = centre - centre * adjustment, centre + centre * adjustment
    return out_h, out_w, tuple(region)
