"""CPU kernel of random_bbox_crop: DALI's search for a crop window (a threshold drawn per try, windows drawn until
the boxes' IoU or overlap reaches it, the best window kept when attempts run out), drawn from the sample's own
stream, and the boxes kept and remapped to the window in float32 as DALI does. The kernel runs the search compiled
by numba (GIL released, ~10 us a sample); `find_window_reference` is the same search in numpy, one attempt at a time
(~0.2 ms), which tests pin the compiled one to, draw for draw. `crop_boxes` (window -> boxes) is deterministic and
shared with the tests."""

from __future__ import annotations

import dataclasses

import numba
import numpy as np
from numba import types
from numba.extending import overload

from headrace_kernels import philox
from headrace_kernels.columns import BatchColumns, Column
from headrace_kernels.cpu.bbox_ops import F32, box_rows, label_rows, read_corners, split_layout, write_corners
from headrace_kernels.registry import cpu_batch_kernel, cpu_kernel

OP = "random_bbox_crop"
SEARCH_LIMIT = 100_000
"""Attempts after which a search that DALI would run forever (no window can succeed, no total_num_attempts) uses
the best window so far."""


@dataclasses.dataclass(frozen=True)
class CropPlan:
    """What random_bbox_crop's arguments say, checked once per sample."""

    ndim: int
    layout: str
    options: tuple[float | None, ...]
    """The thresholds one is drawn from per try; None is 'no crop'."""
    scaling: tuple[float, float]
    aspect_ratios: tuple[tuple[float, float], ...]
    overlap: bool
    all_boxes: bool
    prune: float | None
    num_attempts: int
    total_attempts: int


def _pair(values, name: str) -> tuple[float, float]:
    low, high = float(values[0]), float(values[1])
    if not 0 <= low <= high:
        raise ValueError(f"{OP}: argument '{name}' must be a range with 0 <= min <= max, got [{low}, {high}]")
    return low, high


def crop_plan(args: dict, ncoords: int) -> CropPlan:
    """The plan of one sample whose boxes have `ncoords` coordinates; a ValueError naming the argument otherwise."""
    if ncoords not in (4, 6):
        raise ValueError(f"{OP}: input 0 (boxes) must have 4 (2D) or 6 (3D) coordinates per box, got {ncoords}")
    ndim = ncoords // 2
    layout = args["bbox_layout"]
    if layout is None:
        ltrb = True if args["ltrb"] is None else args["ltrb"]
        layout = ("xyXY" if ltrb else "xyWH") if ndim == 2 else ("xyzXYZ" if ltrb else "xyzWHD")
    if len(layout) != ncoords:
        raise ValueError(f"{OP}: argument 'bbox_layout' {layout!r} does not fit boxes of {ncoords} coordinates")
    thresholds = [float(t) for t in args["thresholds"]]
    if not thresholds or any(not 0.0 <= t <= 1.0 for t in thresholds):
        raise ValueError(f"{OP}: argument 'thresholds' must be values in [0, 1], got {thresholds}")
    fixed = args["crop_shape"] is not None
    allow_no_crop = args["allow_no_crop"]
    if allow_no_crop is None:
        allow_no_crop = not fixed
    if fixed and allow_no_crop:
        raise ValueError(f"{OP}: argument 'allow_no_crop' cannot be True with crop_shape")
    ratios = [float(v) for v in args["aspect_ratio"]]
    if len(ratios) not in (2, 6):
        raise ValueError(f"{OP}: argument 'aspect_ratio' takes 2 values (or 6 for 3D boxes), got {len(ratios)}")
    aspect = tuple(_pair(ratios[i:i + 2], "aspect_ratio") for i in range(0, len(ratios), 2))
    if args["num_attempts"] < 1:
        raise ValueError(f"{OP}: argument 'num_attempts' must be positive, got {args['num_attempts']}")
    total = args["total_num_attempts"]
    if total == 0 or total < -1:
        raise ValueError(f"{OP}: argument 'total_num_attempts' must be positive (or -1: no limit), got {total}")
    prune = args["bbox_prune_threshold"]
    if prune is not None and not 0.0 <= prune <= 1.0:
        raise ValueError(f"{OP}: argument 'bbox_prune_threshold' must be in [0, 1], got {prune}")
    return CropPlan(ndim, layout, tuple(thresholds) + ((None,) if allow_no_crop else ()),
                    _pair(args["scaling"], "scaling"), aspect, args["threshold_type"] == "overlap",
                    args["all_boxes_above_threshold"], prune, int(args["num_attempts"]), int(total))


def pixel_shapes(args: dict, ndim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(input_shape, crop_shape) as int64 [ndim] in x, y(, z) order (from shape_layout's), or None."""
    names = "WHD"[:ndim]
    layout = args["shape_layout"] or names
    if sorted(layout) != sorted(names):
        raise ValueError(f"{OP}: argument 'shape_layout' {layout!r} must be a permutation of {names!r}")
    order = [layout.index(c) for c in names]
    shapes = []
    for name in ("input_shape", "crop_shape"):
        value = args[name]
        if value is None:
            shapes.append(None)
            continue
        shape = np.asarray(value).reshape(-1)
        if shape.size != ndim:
            raise ValueError(f"{OP}: argument '{name}' must have {ndim} values ({layout}), got {shape.tolist()}")
        if np.any(shape <= 0):
            raise ValueError(f"{OP}: argument '{name}' must be positive, got {shape.tolist()}")
        shapes.append(shape.astype(np.int64)[order])
    return shapes[0], shapes[1]


def iou(lo, hi, box_lo, box_hi) -> np.ndarray:
    """IoU (float32) of the window (lo, hi) with each box: 0 where they do not overlap."""
    extent = np.minimum(hi, box_hi) - np.maximum(lo, box_lo)
    overlaps = np.all(extent > 0, axis=1)
    inter = np.where(overlaps, np.prod(extent, axis=1, dtype=F32), F32(0.0))
    union = np.prod(hi - lo, dtype=F32) + np.prod(box_hi - box_lo, axis=1, dtype=F32) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(overlaps, inter / union, F32(0.0)).astype(F32)


def covered(lo, hi, box_lo, box_hi) -> np.ndarray:
    """The fraction (float32) of each box's volume inside the window (lo, hi)."""
    extent = np.minimum(hi, box_hi) - np.maximum(lo, box_lo)
    inter = np.where(np.all(extent > 0, axis=1), np.prod(extent, axis=1, dtype=F32), F32(0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (inter / np.prod(box_hi - box_lo, axis=1, dtype=F32)).astype(F32)


def crop_boxes(box_lo: np.ndarray, box_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               prune: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, indices) of the boxes kept by the relative window (lo, hi), remapped to it and clipped to [0, 1]:
    those whose center is inside (lo <= c < hi), or with bbox_prune_threshold those with at least that fraction of
    their volume inside (some of it, for 0)."""
    if prune is None:
        center = (box_lo + box_hi) * F32(0.5)
        keep = np.all((center >= lo) & (center < hi), axis=1)
    else:
        fraction = covered(lo, hi, box_lo, box_hi)
        keep = (fraction >= F32(prune)) & (fraction > 0)
    indices = np.nonzero(keep)[0]
    extent = hi - lo
    start = (np.maximum(lo, box_lo[indices]) - lo) / extent
    end = (np.minimum(hi, box_hi[indices]) - lo) / extent
    return np.clip(start, F32(0.0), F32(1.0)), np.clip(end, F32(0.0), F32(1.0)), indices.astype(np.int32)


def _uniform(rng: np.random.Generator, low: float, high: float) -> np.float32:
    return F32(F32(low) + F32(rng.random(dtype=np.float32)) * (F32(high) - F32(low)))


def _fix_aspect(shape: np.ndarray, plan: CropPlan, scales: np.ndarray, rng: np.random.Generator) -> None:
    """Where an aspect ratio range is one value, make the extents keep it (in a random order of axes), then
    rescale so that the largest extent is unchanged (DALI's FixAspectRatios)."""
    ndim = plan.ndim
    fixed = np.zeros((ndim, ndim))
    k = 0
    for d0 in range(ndim):
        for d1 in range(d0 + 1, ndim):
            low, high = plan.aspect_ratios[k]
            if low == high and low > 0:  # in relative extents: ratio * extent(d1) / extent(d0) of the input
                relative = low * scales[d1] / scales[d0]
                fixed[d0, d1], fixed[d1, d0] = relative, 1.0 / relative
            k = (k + 1) % len(plan.aspect_ratios)
    if not fixed.any():
        return
    largest = shape.max()
    order = rng.permutation(ndim)
    for i0 in range(ndim):
        for i1 in range(i0 + 1, ndim):
            d0, d1 = order[i0], order[i1]
            if fixed[d1, d0] > 0:
                shape[d1] = shape[d0] * F32(fixed[d1, d0])
    shape *= F32(largest / shape.max()) if shape.max() > 0 else F32(1.0)


def _aspect_ok(shape: np.ndarray, plan: CropPlan, scales: np.ndarray) -> bool:
    k = 0
    for i in range(plan.ndim):
        for j in range(i + 1, plan.ndim):
            low, high = plan.aspect_ratios[k]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = float(shape[i]) * scales[i] / (float(shape[j]) * scales[j])
            if not low <= ratio <= high:
                return False
            k = (k + 1) % len(plan.aspect_ratios)
    return True


@dataclasses.dataclass
class Window:
    """A chosen window: in output units (relative, or pixels with crop_shape) and relative, with its boxes."""

    out_lo: np.ndarray
    out_hi: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    kept: tuple[np.ndarray, np.ndarray, np.ndarray]


def _draw_window(plan: CropPlan, rng: np.random.Generator, input_shape, crop_shape):
    """One try: (out lo, out hi, rel lo, rel hi), or None when its aspect ratio is out of range."""
    ndim = plan.ndim
    if crop_shape is not None:
        anchor = np.array([rng.integers(0, input_shape[d] - crop_shape[d] + 1) if input_shape[d] > crop_shape[d]
                           else 0 for d in range(ndim)], dtype=F32)
        size = crop_shape.astype(F32)
        scale = input_shape.astype(F32)
        lo = anchor / scale
        return anchor, anchor + size, lo, size / scale + lo
    scales = input_shape.astype(np.float64) if input_shape is not None else np.ones(ndim)
    shape = np.array([_uniform(rng, *plan.scaling) for _ in range(ndim)], dtype=F32)
    _fix_aspect(shape, plan, scales, rng)
    if not _aspect_ok(shape, plan, scales):
        return None
    lo = np.array([_uniform(rng, 0.0, 1.0 - float(shape[d])) for d in range(ndim)], dtype=F32)
    hi = lo + shape
    return lo, hi, lo, hi


def find_window_reference(box_lo: np.ndarray, box_hi: np.ndarray, plan: CropPlan, rng: np.random.Generator,
                input_shape, crop_shape) -> Window:
    """DALI's search: draw a threshold (or no crop), try num_attempts windows for it, again until one succeeds
    (its metric reaches the threshold and it keeps a box) or total_num_attempts run out (then the best so far).
    numpy, one attempt at a time: the readable reference that `find_window` (compiled) matches draw for draw."""
    ndim = plan.ndim
    count, best_metric = 0, -1.0
    zero = np.zeros(ndim, dtype=F32)
    chosen = Window(zero, zero, zero, zero, (np.zeros((0, ndim), F32), np.zeros((0, ndim), F32),
                                             np.zeros(0, np.int32)))
    success = False
    limit = plan.total_attempts if plan.total_attempts > 0 else SEARCH_LIMIT
    while not success and count < limit:
        threshold = plan.options[rng.integers(len(plan.options))]
        if threshold is None:
            hi = np.ones(ndim, dtype=F32) * (input_shape.astype(F32) if crop_shape is not None else F32(1.0))
            every = np.arange(box_lo.shape[0], dtype=np.int32)
            return Window(zero, hi, zero, np.ones(ndim, dtype=F32), (box_lo, box_hi, every))
        for _ in range(plan.num_attempts):
            count += 1
            window = _draw_window(plan, rng, input_shape, crop_shape)
            if window is None:
                continue
            out_lo, out_hi, lo, hi = window
            if box_lo.shape[0]:
                values = covered(lo, hi, box_lo, box_hi) if plan.overlap else iou(lo, hi, box_lo, box_hi)
                metric = float(values.min() if plan.all_boxes else values.max())
            else:
                metric = 0.0
            valid = metric >= threshold
            if metric <= best_metric and not valid:
                continue
            best_metric = metric
            chosen = Window(out_lo, out_hi, lo, hi, crop_boxes(box_lo, box_hi, lo, hi, plan.prune))
            success = valid and chosen.kept[2].size > 0
    return chosen


# The compiled search: the reference's steps in the same float32 (and float64) operations and the same draws from
# the sample's Generator (below: numpy's algorithms on the bit generator's 32-bit words), with the GIL released.
# error_model="numpy": a division by zero gives inf / nan as numpy's does, not an exception.

_NO_WINDOW, _NO_CROP, _WINDOW = 0, 1, 2


@numba.njit(inline="always")
def _min(a, b):  # pragma: no cover - compiled; np.minimum: nan if either is
    return a if a <= b or a != a else b


@numba.njit(inline="always")
def _max(a, b):  # pragma: no cover - compiled; np.maximum: nan if either is
    return a if a >= b or a != a else b


@numba.njit(inline="always")
def _clip01(value):  # pragma: no cover - compiled; np.clip(value, 0, 1): nan stays nan
    return np.float32(0.0) if value < 0 else (np.float32(1.0) if value > 1 else value)


@numba.njit(inline="always", error_model="numpy")
def _intersection(box_lo, box_hi, i, lo, hi):  # pragma: no cover - compiled
    """(intersection volume, volume, whether they overlap) of box i and the window (lo, hi), in float32 as the
    reference computes them axis by axis."""
    inter = np.float32(1.0)
    box_volume = np.float32(1.0)
    inside = True
    for d in range(box_lo.shape[1]):
        extent = _min(hi[d], box_hi[i, d]) - _max(lo[d], box_lo[i, d])
        inside = inside and extent > 0
        inter = extent if d == 0 else inter * extent
        side = box_hi[i, d] - box_lo[i, d]
        box_volume = side if d == 0 else box_volume * side
    return inter, box_volume, inside


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _metric(box_lo, box_hi, lo, hi, overlap, all_boxes):  # pragma: no cover - compiled
    """The reference's IoU or covered fraction of every box, reduced as values.min() / .max() (nan propagates)."""
    count, ndim = box_lo.shape
    volume = hi[0] - lo[0]
    for d in range(1, ndim):
        volume = volume * (hi[d] - lo[d])
    result = np.float32(0.0)
    for i in range(count):
        inter, box_volume, inside = _intersection(box_lo, box_hi, i, lo, hi)
        if not inside:
            inter = np.float32(0.0)
        if overlap:
            value = inter / box_volume
        elif inside:
            value = inter / (volume + box_volume - inter)
        else:
            value = np.float32(0.0)
        if i == 0 or value != value:
            result = value
        elif result == result:
            result = _min(result, value) if all_boxes else _max(result, value)
    return result


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _keeps(box_lo, box_hi, i, lo, hi, prune, use_prune):  # pragma: no cover - compiled
    """Whether crop_boxes keeps box i for the window (lo, hi)."""
    ndim = box_lo.shape[1]
    if use_prune:
        inter, box_volume, inside = _intersection(box_lo, box_hi, i, lo, hi)
        fraction = (inter if inside else np.float32(0.0)) / box_volume
        return fraction >= prune and fraction > 0
    keep = True
    for d in range(ndim):
        center = (box_lo[i, d] + box_hi[i, d]) * np.float32(0.5)
        keep = keep and center >= lo[d] and center < hi[d]
    return keep


# numpy's draws from the bit generator's 32-bit words, draw for draw; the words come from the one Generator method
# used (integers over the full 32-bit range is one word, next_uint32), or for a whole batch from philox's stream
# state of the sample (the same words). Numba has random, integers and permutation too, but each use of them costs
# seconds of compiling.

def _word(rng):  # pragma: no cover - compiled only (the overload below)
    """The next 32-bit word of a Generator or of a philox stream state (numpy's next_uint32), as uint64."""
    raise NotImplementedError("compiled only")


@overload(_word, jit_options={"nogil": True})
def _word_compiled(rng):  # pragma: no cover - typing
    if isinstance(rng, types.Array):
        return lambda rng: philox.next_word32(rng)
    return lambda rng: np.uint64(rng.integers(0, 4294967296))


@numba.njit(inline="always")
def _float32(rng):  # pragma: no cover - compiled
    """rng.random(dtype=np.float32): the word's top 24 bits times 2**-24."""
    return np.float32(_word(rng) >> np.uint64(8)) * np.float32(1.0 / 16777216.0)


@numba.njit(nogil=True, cache=True)
def _below(rng, high):  # pragma: no cover - compiled
    """rng.integers(0, high) for 1 <= high <= 2**32 - 1: numpy's Lemire rejection on 32-bit words (none drawn for
    high 1)."""
    if high <= 1:
        return 0
    bound = np.uint64(high)
    low32 = np.uint64(0xFFFFFFFF)
    product = _word(rng) * bound
    leftover = product & low32
    if leftover < bound:
        threshold = (low32 - (bound - np.uint64(1))) % bound
        while leftover < threshold:
            product = _word(rng) * bound
            leftover = product & low32
    return np.int64(product >> np.uint64(32))


@numba.njit(nogil=True, cache=True)
def _permutation(rng, n):  # pragma: no cover - compiled
    """rng.permutation(n) for n < 2**32: numpy's shuffle of arange(n), swapping each i (from the last) with j
    drawn by masked rejection on 32-bit words (random_interval)."""
    order = np.arange(n)
    for i in range(n - 1, 0, -1):
        mask = np.uint64(i)
        for shift in (1, 2, 4, 8, 16):
            mask |= mask >> np.uint64(shift)
        j = _word(rng) & mask
        while j > np.uint64(i):
            j = _word(rng) & mask
        order[i], order[np.int64(j)] = order[np.int64(j)], order[i]
    return order


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _random_shape(rng, scaling, aspect, scales, shape):  # pragma: no cover - compiled
    """The reference's draw of a window's extents with _fix_aspect and _aspect_ok: False when out of range."""
    ndim = shape.size
    for d in range(ndim):
        shape[d] = scaling[0] + _float32(rng) * (scaling[1] - scaling[0])  # scaling: low, high(, more)
    fixed = np.zeros((ndim, ndim))
    any_fixed = False
    k = 0
    for d0 in range(ndim):
        for d1 in range(d0 + 1, ndim):
            low, high = aspect[k, 0], aspect[k, 1]
            if low == high and low > 0:
                relative = low * scales[d1] / scales[d0]
                fixed[d0, d1], fixed[d1, d0] = relative, 1.0 / relative
                any_fixed = True
            k = (k + 1) % aspect.shape[0]
    if any_fixed:
        largest = shape.max()
        order = _permutation(rng, ndim)
        for i0 in range(ndim):
            for i1 in range(i0 + 1, ndim):
                d0, d1 = order[i0], order[i1]
                if fixed[d1, d0] > 0:
                    shape[d1] = shape[d0] * np.float32(fixed[d1, d0])
        top = shape.max()
        factor = largest / top if top > 0 else np.float32(1.0)
        for d in range(ndim):
            shape[d] = shape[d] * factor
    k = 0
    for i in range(ndim):
        for j in range(i + 1, ndim):
            ratio = np.float64(shape[i]) * scales[i] / (np.float64(shape[j]) * scales[j])
            if not aspect[k, 0] <= ratio <= aspect[k, 1]:
                return False
            k = (k + 1) % aspect.shape[0]
    return True


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _draw(rng, scaling, aspect, input_shape, crop_shape, draft):  # pragma: no cover - compiled
    """One try into `draft` (out lo, out hi, rel lo, rel hi rows), as the reference's _draw_window: False when its
    aspect ratio is out of range."""
    ndim = draft.shape[1]
    if crop_shape.size:
        for d in range(ndim):
            span = input_shape[d] - crop_shape[d]
            anchor = np.float32(_below(rng, span + 1)) if span > 0 else np.float32(0.0)
            size, scale = np.float32(crop_shape[d]), np.float32(input_shape[d])
            draft[0, d], draft[1, d] = anchor, anchor + size
            draft[2, d] = anchor / scale
            draft[3, d] = size / scale + draft[2, d]
        return True
    scales = np.ones(ndim)
    if input_shape.size:
        for d in range(ndim):
            scales[d] = np.float64(input_shape[d])
    shape = np.empty(ndim, np.float32)
    if not _random_shape(rng, scaling, aspect, scales, shape):
        return False
    zero = np.float32(0.0)
    for d in range(ndim):
        draft[2, d] = zero + _float32(rng) * (np.float32(1.0 - np.float64(shape[d])) - zero)
    for d in range(ndim):
        draft[3, d] = draft[2, d] + shape[d]
        draft[0, d], draft[1, d] = draft[2, d], draft[3, d]
    return True


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _search(box_lo, box_hi, thresholds, no_crop, scaling, aspect, overlap, all_boxes, prune, use_prune,
            num_attempts, limit, rng, input_shape, crop_shape, window):  # pragma: no cover - compiled
    """find_window_reference's loop: the chosen window into `window` (out lo, out hi, rel lo, rel hi rows) and what
    was chosen (_NO_WINDOW, _NO_CROP or _WINDOW)."""
    options = thresholds.size + (1 if no_crop else 0)
    draft = np.empty((4, window.shape[1]), np.float32)
    chosen = _NO_WINDOW
    count, best = 0, -1.0
    success = False
    while not success and count < limit:
        pick = _below(rng, options)
        if pick >= thresholds.size:
            return _NO_CROP
        threshold = thresholds[pick]
        for _ in range(num_attempts):
            count += 1
            if not _draw(rng, scaling, aspect, input_shape, crop_shape, draft):
                continue
            lo, hi = draft[2], draft[3]
            metric = np.float64(_metric(box_lo, box_hi, lo, hi, overlap, all_boxes)) if box_lo.shape[0] else 0.0
            valid = metric >= threshold
            if metric <= best and not valid:
                continue
            best = metric
            for r in range(4):
                for d in range(window.shape[1]):
                    window[r, d] = draft[r, d]
            chosen = _WINDOW
            success = False
            if valid:
                for i in range(box_lo.shape[0]):
                    if _keeps(box_lo, box_hi, i, lo, hi, prune, use_prune):
                        success = True
                        break
    return chosen


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _crop_sample(rows, layout, flags, reals, thresholds, aspect, pixels, rng):  # pragma: no cover - compiled
    """bbox_crop_sample_reference's work on boxes `rows` (the corners read by `layout`: start columns, then end or
    extent columns): (index of the first box outside [0, 1] or -1, anchor, shape, kept rows, their indices).
    flags: extents?, no crop allowed?, overlap?, all boxes?, prune?, num_attempts, attempt limit, input_shape?,
    crop_shape?; reals: scaling low, high, prune threshold; pixels: input_shape, crop_shape."""
    count, ncoords = rows.shape
    ndim = ncoords // 2
    shaped, use_prune = flags[0] != 0, flags[4] != 0
    anchor, extent = np.zeros(ndim, np.float32), np.zeros(ndim, np.float32)
    box_lo, box_hi = np.empty((count, ndim), np.float32), np.empty((count, ndim), np.float32)
    for i in range(count):
        outside = False
        for d in range(ndim):
            box_lo[i, d] = rows[i, layout[d]]
            box_hi[i, d] = box_lo[i, d] + rows[i, layout[ndim + d]] if shaped else rows[i, layout[ndim + d]]
            outside = outside or box_lo[i, d] < 0 or box_hi[i, d] > 1
        if outside:
            return i, anchor, extent, np.zeros((0, ncoords), np.float32), np.zeros(0, np.int32)
    no_shape = np.zeros(0, np.int64)
    window = np.zeros((4, ndim), np.float32)
    chosen = _search(box_lo, box_hi, thresholds, flags[1] != 0, reals, aspect, flags[2] != 0, flags[3] != 0,
                     reals[2], use_prune, flags[5], flags[6], rng, pixels[0] if flags[7] else no_shape,
                     pixels[1] if flags[8] else no_shape, window)
    indices = np.empty(count, np.int32)
    kept = 0
    if chosen == _NO_CROP:
        for d in range(ndim):
            extent[d] = np.float32(pixels[0, d]) if flags[8] else np.float32(1.0)
        for i in range(count):
            indices[i] = i
        kept = count
    elif chosen == _WINDOW:
        for d in range(ndim):
            anchor[d], extent[d] = window[0, d], window[1, d] - window[0, d]
        for i in range(count):
            if _keeps(box_lo, box_hi, i, window[2], window[3], reals[2], use_prune):
                indices[kept] = i
                kept += 1
    out = np.empty((kept, ncoords), np.float32)
    for k in range(kept):
        i = indices[k]
        for d in range(ndim):
            start, end = box_lo[i, d], box_hi[i, d]
            if chosen == _WINDOW:
                size = window[3, d] - window[2, d]
                start = _clip01((_max(window[2, d], start) - window[2, d]) / size)
                end = _clip01((_min(window[3, d], end) - window[2, d]) / size)
            out[k, layout[d]] = start
            out[k, layout[ndim + d]] = end - start if shaped else end
    return -1, anchor, extent, out, indices[:kept].copy()


@dataclasses.dataclass(frozen=True)
class CompiledPlan:
    """A sample's CropPlan as the compiled search's arguments (see _crop_sample)."""

    plan: CropPlan
    wide: bool
    """A crop_shape window with more than 2**32 - 1 anchors on an axis: drawn by the reference (the compiled draws
    are numpy's 32-bit ones)."""
    layout: np.ndarray
    flags: np.ndarray
    reals: np.ndarray
    thresholds: np.ndarray
    aspect: np.ndarray
    pixels: np.ndarray


def compiled_plan(args: dict, ncoords: int) -> CompiledPlan:
    """crop_plan and pixel_shapes of a sample, as the compiled search takes them; a ValueError naming the argument
    otherwise."""
    plan = crop_plan(args, ncoords)
    input_shape, crop_shape = pixel_shapes(args, plan.ndim)
    if crop_shape is not None and input_shape is None:
        raise ValueError(f"{OP}: argument 'crop_shape' needs input_shape")
    starts, ends, shaped = split_layout(plan.layout)
    pixels = np.zeros((2, plan.ndim), np.int64)
    for row, shape in enumerate((input_shape, crop_shape)):
        if shape is not None:
            pixels[row] = shape
    flags = [shaped, plan.options[-1] is None, plan.overlap, plan.all_boxes, plan.prune is not None,
             plan.num_attempts, plan.total_attempts if plan.total_attempts > 0 else SEARCH_LIMIT,
             input_shape is not None, crop_shape is not None]
    wide = crop_shape is not None and bool(np.any(input_shape - crop_shape >= 2**32 - 1))
    return CompiledPlan(plan, wide, np.array(starts + ends, np.int64), np.array(flags, np.int64),
                        np.array([*plan.scaling, plan.prune if plan.prune is not None else 0.0], F32),
                        np.array([t for t in plan.options if t is not None], np.float64),
                        np.array(plan.aspect_ratios, np.float64), pixels)


_PLANS: dict[tuple[int, int], tuple[dict, CompiledPlan]] = {}


def cached_plan(args: dict, ncoords: int) -> CompiledPlan:
    """compiled_plan, made once per arguments dict: the executor gives every sample of a node without argument
    inputs the node's own dict (the same object, never changed); the entry holds the dict, so its id is not reused
    while cached."""
    key = (id(args), ncoords)
    found = _PLANS.get(key)
    if found is not None and found[0] is args:
        return found[1]
    prepared = compiled_plan(args, ncoords)
    if len(_PLANS) >= 16:
        _PLANS.clear()
    _PLANS[key] = (args, prepared)
    return prepared


_ENTRY: list = []
"""The compiled _crop_sample (its arguments are of fixed kinds), called directly: without numba's typing of every
argument per call (a third of a sample's time)."""


def run_compiled(rows: np.ndarray, prepared: CompiledPlan, rng: np.random.Generator) -> tuple:
    """_crop_sample of float32 [N, 4 or 6] `rows` with the sample's plan."""
    view = np.ascontiguousarray(rows).view()
    view.flags.writeable = False  # one compiled kind, whether the input is writable or not
    args = (view, prepared.layout, prepared.flags, prepared.reals, prepared.thresholds, prepared.aspect,
            prepared.pixels, rng)
    if _ENTRY and view.flags.aligned and type(rng) is np.random.Generator:
        return _ENTRY[0](*args)
    result = _crop_sample(*args)
    compiled = _crop_sample.overloads.get(tuple(numba.typeof(a) for a in args))
    if compiled is not None:
        _ENTRY[:] = [compiled.entry_point]
    return result


def check_boxes(box_lo: np.ndarray, box_hi: np.ndarray) -> None:
    """DALI's bounds: every box inside [0, 1] (lo >= 0, hi <= 1)."""
    outside = np.nonzero(np.any((box_lo < 0) | (box_hi > 1), axis=1))[0]
    if outside.size:
        i = int(outside[0])
        raise ValueError(f"{OP}: input 0 (boxes): box {i} (corners {box_lo[i].tolist()}, {box_hi[i].tolist()}) is "
                         "outside [0, 1]; boxes are relative to the image")


def bbox_crop_sample_reference(inputs: list, args: dict, rng: np.random.Generator) -> tuple:
    """bbox_crop_sample's outputs, computed by find_window_reference (numpy, the GIL held): the reference."""
    boxes = box_rows(inputs[0], OP)
    plan = crop_plan(args, boxes.shape[1])
    labels = label_rows(inputs[1], boxes.shape[0], OP) if len(inputs) > 1 else None
    input_shape, crop_shape = pixel_shapes(args, plan.ndim)
    if crop_shape is not None and input_shape is None:
        raise ValueError(f"{OP}: argument 'crop_shape' needs input_shape")
    box_lo, box_hi = read_corners(boxes, plan.layout)
    check_boxes(box_lo, box_hi)
    window = find_window_reference(box_lo, box_hi, plan, rng, input_shape, crop_shape)
    kept_lo, kept_hi, indices = window.kept
    outputs = [window.out_lo.astype(F32), (window.out_hi - window.out_lo).astype(F32),
               write_corners(kept_lo, kept_hi, plan.layout)]
    if labels is not None:
        outputs.append(labels[indices])
    if args["output_bbox_indices"]:
        outputs.append(indices)
    return tuple(outputs)


def bbox_crop_sample(inputs: list, args: dict, rng: np.random.Generator) -> tuple:
    """All outputs of random_bbox_crop for one sample (shared with the GPU kernel, which draws on the host):
    bbox_crop_sample_reference's, draw for draw, by the compiled search."""
    boxes = box_rows(inputs[0], OP)
    prepared = cached_plan(args, boxes.shape[1])
    if prepared.wide:
        return bbox_crop_sample_reference(inputs, args, rng)
    labels = label_rows(inputs[1], boxes.shape[0], OP) if len(inputs) > 1 else None
    outside, anchor, shape, kept, indices = run_compiled(boxes, prepared, rng)
    if outside >= 0:
        check_boxes(*read_corners(boxes, prepared.plan.layout))
    outputs = [anchor, shape, kept]
    if labels is not None:
        outputs.append(labels[indices])
    if args["output_bbox_indices"]:
        outputs.append(indices)
    return tuple(outputs)


@cpu_kernel(OP)
def random_bbox_crop(inputs, args, ctx):
    return bbox_crop_sample(inputs, args, ctx.rng)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _crop_batch(rows, starts, layout, flags, reals, thresholds, aspect, pixels, seed, first, anchors, extents,
                kept, counts, indices):  # pragma: no cover - compiled
    """_crop_sample of every sample (its boxes rows[starts[s]:starts[s + 1]]) drawing from its own stream; the
    samples' kept rows and indices back to back, `counts` of them each. Returns the first sample with a box outside
    [0, 1], or -1."""
    state = np.zeros(philox.STATE_WORDS, np.uint64)
    at = 0
    for s in range(starts.size - 1):
        philox.seed_stream(state, np.uint64(seed), np.uint64(first + s))
        outside, anchor, extent, out, found = _crop_sample(rows[starts[s]:starts[s + 1]], layout, flags, reals,
                                                           thresholds, aspect, pixels, state)
        if outside >= 0:
            return s
        anchors[s] = anchor
        extents[s] = extent
        counts[s] = out.shape[0]
        kept[at:at + out.shape[0]] = out
        indices[at:at + out.shape[0]] = found
        at += out.shape[0]
    return -1


@cpu_batch_kernel(OP)
def random_bbox_crop_batch(inputs: list[list], args: dict, seed: int, first_sample: int,
                           size: int) -> BatchColumns | None:
    """random_bbox_crop of a whole batch in one compiled call (each sample from its own stream, as the per-sample
    kernel draws it), its outputs as columns over one array each; None, for the per-sample kernel and its errors,
    where a sample or an argument is not as the compiled search takes it."""
    try:
        rows = [box_rows(sample, OP) for sample in inputs[0]]
        ncoords = rows[0].shape[1] if rows else 0
        if not rows or any(boxes.shape[1] != ncoords for boxes in rows):
            return None
        prepared = cached_plan(args, ncoords)
        labels = [label_rows(sample, boxes.shape[0], OP) for sample, boxes in zip(inputs[1], rows, strict=True)] \
            if len(inputs) > 1 else None
    except ValueError:
        return None
    if prepared.wide:
        return None
    starts = np.zeros(size + 1, np.int64)
    np.cumsum([boxes.shape[0] for boxes in rows], out=starts[1:])
    concatenated = np.ascontiguousarray(np.concatenate(rows), F32)
    ndim = ncoords // 2
    anchors, extents = np.empty((size, ndim), F32), np.empty((size, ndim), F32)
    kept, counts = np.empty_like(concatenated), np.empty(size, np.int64)
    indices = np.empty(concatenated.shape[0], np.int32)
    if _crop_batch(concatenated, starts, prepared.layout, prepared.flags, prepared.reals, prepared.thresholds,
                   prepared.aspect, prepared.pixels, seed, first_sample, anchors, extents, kept, counts,
                   indices) >= 0:
        return None
    total = int(counts.sum())
    found = indices[:total]
    outputs = [Column.of_dense(anchors), Column.of_dense(extents), Column.of_rows(kept[:total], counts)]
    if labels is not None:
        if all(label.shape[1:] == labels[0].shape[1:] for label in labels):  # one array of all the rows
            outputs.append(Column.of_rows(np.concatenate(labels)[found + np.repeat(starts[:-1], counts)], counts))
        else:  # [N] and [N, k] labels in one batch
            ends = np.cumsum(counts).tolist()
            outputs.append([label[found[end - count:end]] for label, end, count
                            in zip(labels, ends, counts.tolist(), strict=True)])
    if args["output_bbox_indices"]:
        outputs.append(Column.of_rows(found, counts))
    return BatchColumns(outputs)


# ssd_random_crop (DALI's deprecated SSD crop: fixed thresholds, image cropped in the op)

SSD_OPTIONS = (-1.0, 0.1, 0.3, 0.5, 0.7, 0.9, None)
"""ssd_random_crop's choices: the least IoU of every box with the window (-1: any), or None for no crop."""


def _round_away(value: float) -> int:
    """std::llround: halves away from zero."""
    return int(np.floor(value + 0.5)) if value >= 0 else -int(np.floor(-value + 0.5))


def ssd_window(boxes: np.ndarray, num_attempts: int, rng: np.random.Generator):
    """(left, top, w, h) of the window ssd_random_crop chooses (doubles from float32 draws), with the indices of
    the boxes whose center is inside, or None for no crop."""
    if num_attempts < 1:
        raise ValueError(f"ssd_random_crop: argument 'num_attempts' must be positive, got {num_attempts}")
    area = (boxes[:, 3] - boxes[:, 1]) * (boxes[:, 2] - boxes[:, 0])
    centers = 0.5 * (boxes[:, :2].astype(np.float64) + boxes[:, 2:].astype(np.float64))
    while True:
        min_iou = SSD_OPTIONS[rng.integers(len(SSD_OPTIONS))]
        if min_iou is None:
            return None
        for _ in range(num_attempts):
            w, h = _uniform(rng, 0.3, 1.0), _uniform(rng, 0.3, 1.0)
            if w / h < F32(0.5) or w / h > F32(2.0):
                continue
            left, top = float(_uniform(rng, 0.0, 1.0 - float(w))), float(_uniform(rng, 0.0, 1.0 - float(h)))
            right, bottom = left + float(w), top + float(h)
            window = np.array([left, top, right, bottom], dtype=F32)
            delta = np.minimum(boxes[:, 2:], window[2:]) - np.maximum(boxes[:, :2], window[:2])
            inter = np.maximum(delta[:, 0], F32(0.0)) * np.maximum(delta[:, 1], F32(0.0))
            window_area = (window[3] - window[1]) * (window[2] - window[0])
            with np.errstate(divide="ignore", invalid="ignore"):
                ious = inter / (area + window_area - inter)
            if np.any(ious < F32(min_iou)):
                continue
            inside = np.nonzero((centers[:, 0] >= left) & (centers[:, 0] <= right) & (centers[:, 1] >= top)
                                & (centers[:, 1] <= bottom))[0]
            if inside.size:
                return (left, top, float(w), float(h)), inside


def ssd_crop_sample(shape: tuple[int, ...], boxes, labels, num_attempts: int, rng: np.random.Generator):
    """(pixel window (x0, y0, x1, y1) or None for no crop, boxes out, labels out) of ssd_random_crop for an image
    of `shape`."""
    op = "ssd_random_crop"
    if len(shape) != 3:
        raise ValueError(f"{op}: input 0 (image) must be HWC, got shape {tuple(shape)}")
    boxes = box_rows(boxes, op, 4, what="input 1 (boxes)")
    labels = np.asarray(labels)
    if labels.dtype != np.int32 or labels.ndim not in (1, 2) or labels.shape[0] != boxes.shape[0]:
        raise ValueError(f"{op}: input 2 (labels) must be int32 with one row per box ({boxes.shape[0]}), got "
                         f"{labels.dtype} {labels.shape}")
    chosen = ssd_window(boxes, num_attempts, rng)
    if chosen is None:
        return None, boxes.copy(), labels.copy()
    (left, top, w, h), inside = chosen
    shift = np.array([left, top, left, top])
    scale = np.array([w, h, w, h])
    out = np.clip((boxes[inside].astype(np.float64) - shift) / scale, 0.0, 1.0).astype(F32)
    height, width = shape[:2]
    pixels = (_round_away(left * width), _round_away(top * height), _round_away((left + w) * width),
              _round_away((top + h) * height))
    return pixels, out, labels.reshape(labels.shape[0], -1)[inside, 0]


@cpu_kernel("ssd_random_crop")
def ssd_random_crop(inputs, args, ctx):
    image = np.asarray(inputs[0])
    pixels, boxes, labels = ssd_crop_sample(image.shape, inputs[1], inputs[2], args["num_attempts"], ctx.rng)
    if pixels is not None:
        x0, y0, x1, y1 = pixels
        image = image[y0:y1, x0:x1]
    return np.ascontiguousarray(image), boxes, labels
