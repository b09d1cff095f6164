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


def _resize_request(args: dict[str, Any]) -> tuple[str, list[np.float32]]:
    """(mode, wanted (h, w) in float32) of resize's arguments: resize_shorter is 'not_smaller' with the same
    extent on both axes, resize_longer 'not_larger'; else `mode` with `size` or resize_y / resize_x."""
    f32 = np.float32
    shorter, longer = args.get("resize_shorter") or 0, args.get("resize_longer") or 0
    if shorter or longer:
        return ("not_smaller" if shorter else "not_larger"), [f32(shorter or longer)] * 2
    size = args.get("size")
    wanted = [f32(v) for v in (size if size else (args.get("resize_y") or 0, args.get("resize_x") or 0))]
    return args.get("mode") or "default", wanted


def _resize_limits(args: dict[str, Any]) -> list[np.float32] | None:
    """max_size as float32 (h, w) limits (one value bounds both), or None where not given."""
    max_size = args.get("max_size")
    return [np.float32(max_size[0]), np.float32(max_size[-1])] if max_size else None


def _requested_size(height: int, width: int, args: dict[str, Any]) -> tuple[np.float32, np.float32]:
    """The (h, w) that `resize` asks for an input of (height, width), before rounding, by DALI's rules and in its
    float32 arithmetic (so that sizes on a .5 boundary round the same way): resize_shorter is 'not_smaller' with
    the same extent on both axes, resize_longer 'not_larger'; in 'default' mode a missing extent takes the given
    one's scale, in 'stretch' mode it stays; max_size clamps each extent (default/stretch) or bounds the common
    scale."""
    f32 = np.float32
    mode, wanted = _resize_request(args)
    in_size = [f32(height), f32(width)]
    given = [w != 0 and i != 0 for w, i in zip(wanted, in_size, strict=True)]
    scale = [float(f32(w / i)) if i else 1.0 for w, i in zip(wanted, in_size, strict=True)]
    out = list(wanted)
    limits = _resize_limits(args)
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


def _common_scale(scale: np.ndarray, given: np.ndarray, mode: str, limits: list[np.float32] | None,
                  in_size: np.ndarray) -> np.ndarray:
    """The per-row scale of the not_smaller / not_larger modes, as `_requested_size` picks it: the larger (smaller)
    |scale| of the given axes, the first axis kept on ties, then bounded by max_size / extent. Comparisons run in
    the scalar loop's order, so NaN and ties fall the same way."""
    magnitude = np.abs(scale)
    final = np.where(given[:, 0], magnitude[:, 0], magnitude[:, 1])
    better = magnitude[:, 1] > final if mode == "not_smaller" else magnitude[:, 1] < final
    final = np.where(given[:, 0] & given[:, 1] & better, magnitude[:, 1], final)
    for axis, limit in enumerate(limits or ()):
        if limit > 0:
            bound = float(limit) / in_size[:, axis].astype(np.float64)
            final = np.where(bound < final, bound, final)
    return final


def _requested_sizes(in_size: np.ndarray, args: dict[str, Any]) -> np.ndarray:
    """`_requested_size` of every row of `in_size` ((n, 2) float32 heights and widths), in the same mix of float32
    and float64 steps, so each row is the scalar's to the bit. Rows with a zero extent are not meaningful here."""
    mode, wanted = _resize_request(args)
    if len(wanted) != 2:
        raise ValueError(f"resize needs 2 requested extents (y, x), got {len(wanted)}")
    want = np.array(wanted, np.float32)
    limits = _resize_limits(args)
    given = (want != 0) & (in_size != 0)
    scale = np.where(in_size != 0, (want / np.where(in_size != 0, in_size, 1)).astype(np.float64), 1.0)
    out = np.broadcast_to(want, in_size.shape)
    if mode in ("default", "stretch"):
        missing = given.any(axis=1, keepdims=True) & ~given
        if mode == "default":
            common = np.abs(np.where(given[:, :1], scale[:, :1], scale[:, 1:]))  # the first given axis's scale
            filled = (in_size.astype(np.float64) * common).astype(np.float32)
        else:
            filled = in_size
        out = np.where(missing, filled, out)
        if limits:
            bound = np.array(limits, np.float32)
            out = np.where((0 < bound) & (bound < np.abs(out)), bound, out)
    else:
        final = _common_scale(scale, given, mode, limits, in_size)[:, None]
        scaled = (in_size.astype(np.float64) * final).astype(np.float32)
        out = np.where(given & (np.abs(scale) == final), out, scaled)
    return np.where(given.any(axis=1, keepdims=True), out, in_size)


def resize_plans(heights: np.ndarray, widths: np.ndarray, args: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """`resize_plan` of every (height, width) at once: (n, 2) int64 output sizes and (n, 4) float64 source regions
    (y0, x0, y1, x1), equal bit for bit to the scalar's. Rows the arrays cannot hold the same way (a zero extent,
    a non-finite or huge requested size) go through `resize_plan` itself, and raise what it raises."""
    extents = np.stack([np.asarray(heights).ravel(), np.asarray(widths).ravel()], axis=1)
    with np.errstate(all="ignore"):
        want = np.abs(_requested_sizes(extents.astype(np.float32), args).astype(np.float64))
        scalar = (extents <= 0).any(axis=1) | ~(want < 2.0 ** 53).all(axis=1)
        want[scalar] = 1.0
        sizes = np.maximum(1.0, np.floor(want + 0.5))
        whole = extents.astype(np.float64)
        regions = np.concatenate([np.zeros_like(whole), whole], axis=1)
        if args.get("subpixel_scale", True):
            adjust = (want != 0) & (sizes != want)
            ratio = sizes / want
            centre = whole / 2
            span = centre * np.where(ratio < 10.0, ratio, 10.0)  # min(10.0, ratio) as Python takes it
            regions = np.concatenate([np.where(adjust, centre - span, 0.0), np.where(adjust, centre + span, whole)],
                                     axis=1)
    sizes = sizes.astype(np.int64)
    for i in np.nonzero(scalar)[0].tolist():
        height, width = extents[i].tolist()
        out_h, out_w, regions[i] = resize_plan(height, width, args)
        sizes[i] = out_h, out_w
    return sizes, regions
