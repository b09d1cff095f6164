"""CPU kernels of the segmentation helpers and crop-window generators (DALI's rules, numpy and one numba labelling
loop). Each op's work is a function of (inputs, args, rng) -> outputs that the GPU kernels call too, on the same
per-sample random streams, so CPU and GPU choose the same boxes, pixels and windows."""

from __future__ import annotations

import math

import numba
import numpy as np

from headrace_kernels.registry import cpu_kernel

_LABEL_KINDS = "biu"


# connected blobs

@numba.njit(nogil=True, cache=True)
def _blob_boxes(labels, shape, background):  # pragma: no cover - compiled
    """Boxes (start..., end...) of the face-connected blobs of equal, non-background labels of the flat `labels`
    of `shape`, in the raster order of each blob's first pixel."""
    ndim = shape.size
    size = labels.size
    strides = np.ones(ndim, np.int64)
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    seen = np.zeros(size, np.uint8)
    stack = np.empty(max(size, 1), np.int64)
    coord = np.empty(ndim, np.int64)
    boxes = np.empty((16, 2 * ndim), np.int64)
    count = 0
    for first in range(size):
        label = labels[first]
        if label == background or seen[first]:
            continue
        if count == boxes.shape[0]:
            grown = np.empty((2 * count, 2 * ndim), np.int64)
            grown[:count] = boxes
            boxes = grown
        for d in range(ndim):
            boxes[count, d] = shape[d]
            boxes[count, ndim + d] = 0
        seen[first] = 1
        stack[0] = first
        top = 1
        while top > 0:
            top -= 1
            p = stack[top]
            rest = p
            for d in range(ndim):
                coord[d] = rest // strides[d]
                rest -= coord[d] * strides[d]
                boxes[count, d] = min(boxes[count, d], coord[d])
                boxes[count, ndim + d] = max(boxes[count, ndim + d], coord[d] + 1)
            for d in range(ndim):
                if coord[d] > 0:
                    q = p - strides[d]
                    if not seen[q] and labels[q] == label:
                        seen[q] = 1
                        stack[top] = q
                        top += 1
                if coord[d] + 1 < shape[d]:
                    q = p + strides[d]
                    if not seen[q] and labels[q] == label:
                        seen[q] = 1
                        stack[top] = q
                        top += 1
        count += 1
    return boxes[:count].copy()


def blob_boxes(labels: np.ndarray, background: int) -> np.ndarray:
    """(n, 2 * ndim) int64 boxes (start then end) of the face-connected blobs of equal labels other than
    `background`, in raster order of their first pixels."""
    flat = np.ascontiguousarray(labels).reshape(-1).astype(np.int64, copy=False)
    return _blob_boxes(flat, np.array(labels.shape, np.int64), np.int64(background))


# random_object_bbox

def _check_labels(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.dtype.kind not in _LABEL_KINDS:
        raise ValueError(f"the input must be a label map of integers or bools, got {labels.dtype}")
    if labels.ndim < 1 or labels.ndim > 6:
        raise ValueError(f"the input must have 1 to 6 dimensions, got shape {labels.shape}")
    return labels


def class_setup(args: dict) -> tuple[int, list[int], np.ndarray | None]:
    """(background, classes, weights) from the arguments as DALI reads them; classes [] and weights None when the
    classes are to be the labels present."""
    explicit = args.get("background")
    background = 0 if explicit is None else int(np.asarray(explicit).reshape(-1)[0])
    ignore = args.get("ignore_class")
    classes = None if ignore or args.get("classes") is None else [int(c) for c in np.ravel(args["classes"])]
    weights = None if ignore or args.get("class_weights") is None else \
        np.asarray(args["class_weights"], np.float64).reshape(-1)
    if classes is not None:
        if background in classes:
            if explicit is not None:
                raise ValueError(f"argument 'classes': class label {background} coincides with the background "
                                 "label (give another background, or remove it from the classes)")
            background = min(classes) - 1
        if weights is not None and len(weights) != len(classes):
            raise ValueError(f"argument 'class_weights': {len(weights)} weights for {len(classes)} classes")
    elif weights is not None:
        classes, label = [], 0
        for _ in range(len(weights)):
            label += label == background
            classes.append(label)
            label += 1
    if weights is not None and (weights < 0).any():
        raise ValueError(f"argument 'class_weights': weights must not be negative, got {weights.tolist()}")
    if classes is not None and weights is None:
        weights = np.ones(len(classes))
    return background, classes or [], weights


def _threshold(args: dict, ndim: int) -> np.ndarray | None:
    if args.get("threshold") is None:
        return None
    threshold = np.asarray(args["threshold"], np.int64).reshape(-1)
    if threshold.size == 1:
        return np.repeat(threshold, ndim)
    if threshold.size != ndim:
        raise ValueError(f"argument 'threshold': one value or one per dimension ({ndim}), got {threshold.size}")
    return threshold


def pick_box(boxes: np.ndarray, args: dict, rng: np.random.Generator) -> int:
    """Index of the box drawn among those that pass `threshold`, of the `k_largest` by volume; -1 if none."""
    ndim = boxes.shape[1] // 2
    extents = boxes[:, ndim:] - boxes[:, :ndim]
    threshold = _threshold(args, ndim)
    kept = np.flatnonzero((extents >= threshold).all(axis=1)) if threshold is not None else np.arange(len(boxes))
    if kept.size == 0:
        return -1
    k = args.get("k_largest")
    if k and k < kept.size:
        volumes = extents[kept].prod(axis=1)
        kept = kept[np.argsort(-volumes, kind="stable")][:k]
    return int(kept[rng.integers(0, kept.size)])


def _foreground_box(labels: np.ndarray, args: dict, rng: np.random.Generator,
                    background: int, classes: list[int], weights: np.ndarray | None):
    """(box, class) of a drawn object, or None when no class has a blob that qualifies."""
    if args.get("ignore_class"):
        boxes = blob_boxes(labels, background)
        index = pick_box(boxes, args, rng) if len(boxes) else -1
        return None if index < 0 else (boxes[index], background)
    present = set(np.unique(labels).tolist()) - {background}
    if weights is None:
        classes = sorted(present)
        weights = np.ones(len(classes))
    weights = np.where([c in present for c in classes], weights, 0.0) if classes else np.zeros(0)
    while weights.sum() > 0:
        cdf = np.cumsum(weights)
        chosen = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(classes) - 1)
        while weights[chosen] == 0:  # a draw on a zero-width bin's edge
            chosen -= 1
        boxes = blob_boxes(labels == classes[chosen], 0)
        index = pick_box(boxes, args, rng) if len(boxes) else -1
        if index >= 0:
            return boxes[index], classes[chosen]
        weights[chosen] = 0.0
    return None


def random_object_bbox_of(inputs: list, args: dict, rng: np.random.Generator) -> tuple:
    """random_object_bbox's outputs for one sample."""
    labels = _check_labels(inputs[0])
    ndim = labels.ndim
    background, classes, weights = class_setup(args)
    picked = None
    if rng.random() < float(np.asarray(args["foreground_prob"]).reshape(-1)[0]):
        picked = _foreground_box(labels, args, rng, background, classes, weights)
    if picked is None:
        box, label = np.concatenate([np.zeros(ndim, np.int64), labels.shape]), background
    else:
        box, label = picked
    start, end = np.asarray(box[:ndim], np.int32), np.asarray(box[ndim:], np.int32)
    fmt = args["format"]
    outs = [np.concatenate([start, end])] if fmt == "box" else \
        [start, end - start] if fmt == "anchor_shape" else [start, end]
    if args["output_class"]:
        outs.append(np.array(label, np.int32))
    return tuple(outs)


@cpu_kernel("segmentation.random_object_bbox")
def random_object_bbox(inputs, args, ctx):
    outs = random_object_bbox_of(inputs, args, ctx.rng)
    return outs if len(outs) > 1 else outs[0]


# random_mask_pixel

def mask_foreground(mask: np.ndarray, args: dict):
    """The foreground test of random_mask_pixel as an elementwise function of the mask (numpy or CuPy), or None
    when `value` cannot occur in the mask's type (then no pixel is foreground, as in DALI)."""
    if args.get("value") is not None:
        value = int(np.asarray(args["value"]).reshape(-1)[0])
        if mask.dtype.kind == "f":
            raise ValueError(f"argument 'value': meant for integer masks, the mask is {mask.dtype} (use threshold)")
        if mask.dtype.kind in "iu":
            info = np.iinfo(mask.dtype)
            if not info.min <= value <= info.max:
                return None
        return lambda m: m == value
    threshold = float(np.asarray(args["threshold"]).reshape(-1)[0])
    return lambda m: m > threshold


def check_mask(mask) -> None:
    if mask.dtype.kind not in "biuf":
        raise ValueError(f"the mask must hold numbers, got {mask.dtype}")
    if mask.ndim < 1 or mask.size == 0:
        raise ValueError(f"the mask must have at least one dimension and one pixel, got shape {mask.shape}")


def any_pixel(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """A pixel drawn uniformly, axis by axis."""
    return np.array([rng.integers(0, n) for n in shape], np.int64)


@cpu_kernel("segmentation.random_mask_pixel")
def random_mask_pixel(inputs, args, ctx):
    mask = np.asarray(inputs[0])
    check_mask(mask)
    rng = ctx.rng
    if int(np.asarray(args["foreground"]).reshape(-1)[0]):
        test = mask_foreground(mask, args)
        if test is not None:
            flat = np.flatnonzero(test(mask))
            if flat.size:
                return np.array(np.unravel_index(int(flat[rng.integers(0, flat.size)]), mask.shape), np.int64)
    return any_pixel(mask.shape, rng)


# select_masks

def select_masks_of(inputs: list, args: dict, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """The selected masks' polygons (int32 rows) and their vertices: mask by mask in the order of mask_ids, each
    mask's polygons in their input order. (DALI 2.4 keeps only the last polygon of a mask that has several.)"""
    mask_ids = np.asarray(inputs[0])
    polygons, vertices = np.asarray(inputs[1]), np.asarray(inputs[2])
    if mask_ids.dtype.kind not in "iu" or mask_ids.ndim > 1:
        raise ValueError(f"the mask_ids input must be a 1D list of integers, got {mask_ids.dtype} of shape "
                         f"{mask_ids.shape}")
    mask_ids = mask_ids.reshape(-1)
    if len(set(mask_ids.tolist())) != mask_ids.size:
        raise ValueError(f"the mask_ids input must not repeat an id, got {mask_ids.tolist()}")
    if polygons.dtype.kind not in "iu" or polygons.ndim != 2 or polygons.shape[1] != 3:
        raise ValueError(f"the polygons input must be integer rows (mask_id, start_vertex, end_vertex), got "
                         f"{polygons.dtype} of shape {polygons.shape}")
    if vertices.ndim != 2:
        raise ValueError(f"the vertices input must be 2D (one row of coordinates per vertex), got shape "
                         f"{vertices.shape}")
    starts, ends = polygons[:, 1].astype(np.int64), polygons[:, 2].astype(np.int64)
    bad = np.flatnonzero((starts < 0) | (ends < starts) | (ends > len(vertices)))
    if bad.size:
        row = polygons[bad[0]].tolist()
        raise ValueError(f"the polygons input: polygon {int(bad[0])} {row} has a vertex range outside the "
                         f"{len(vertices)} vertices")
    rows = {int(m): [] for m in mask_ids.tolist()}
    for k, mask in enumerate(polygons[:, 0].tolist()):
        if mask in rows:
            rows[mask].append(k)
    absent = [m for m, found in rows.items() if not found]
    if absent:
        raise ValueError(f"the mask_ids input: selected mask id {absent[0]} is not present in the polygons input")
    keep = np.array([k for found in rows.values() for k in found], np.int64)
    ids = np.repeat(np.arange(mask_ids.size) if args["reindex_masks"] else mask_ids,
                    [len(found) for found in rows.values()])
    counts = ends[keep] - starts[keep]
    new_ends = np.cumsum(counts)
    out = np.empty((keep.size, 3), np.int32)
    out[:, 0], out[:, 1], out[:, 2] = ids, new_ends - counts, new_ends
    index = np.concatenate([np.arange(s, e) for s, e in zip(starts[keep], ends[keep], strict=True)]) \
        if keep.size else np.zeros(0, np.int64)
    return out, np.ascontiguousarray(vertices[index.astype(np.int64)])


@cpu_kernel("segmentation.select_masks")
def select_masks(inputs, args, ctx):
    return select_masks_of(inputs, args)


# roi_random_crop

def _vector(args: dict, name: str, ndim: int | None = None) -> np.ndarray:
    value = np.asarray(args[name], np.int64).reshape(-1)
    if ndim is not None and value.size != ndim:
        raise ValueError(f"argument '{name}': needs {ndim} values (one per dimension of crop_shape), got "
                         f"{value.size}")
    return value


def roi_random_crop_of(inputs: list, args: dict, rng: np.random.Generator) -> np.ndarray:
    """The window's start, axis by axis, by DALI's rule."""
    crop = _vector(args, "crop_shape")
    ndim = crop.size
    start = _vector(args, "roi_start", ndim)
    end = _vector(args, "roi_end", ndim) if args.get("roi_end") is not None else \
        start + _vector(args, "roi_shape", ndim)
    shape = None
    if args.get("in_shape") is not None:
        if inputs:
            raise ValueError("argument 'in_shape' cannot be given with an input (the input's shape is used)")
        shape = _vector(args, "in_shape", ndim)
    elif inputs:
        shape = np.array(np.shape(inputs[0]), np.int64)
        if shape.size != ndim:
            raise ValueError(f"argument 'crop_shape': {ndim} values for an input of {shape.size} dimensions")
    if (crop < 0).any() or (end < start).any():
        raise ValueError(f"arguments 'crop_shape' / 'roi_*': extents must not be negative (crop {crop.tolist()}, "
                         f"ROI {start.tolist()}..{end.tolist()})")
    if shape is not None:
        if (shape < crop).any():
            raise ValueError(f"argument 'crop_shape': the window {crop.tolist()} is larger than the input's shape "
                             f"{shape.tolist()}")
        if (start < 0).any() or (end > shape).any():
            raise ValueError(f"arguments 'roi_start' / 'roi_end' / 'roi_shape': the ROI {start.tolist()}.."
                             f"{end.tolist()} is outside the input's shape {shape.tolist()}")
    out = np.empty(ndim, np.int64)
    for d in range(ndim):
        extent = end[d] - start[d]
        if extent == crop[d]:
            out[d] = start[d]
        elif extent > crop[d]:
            high = end[d] - crop[d] if shape is None else min(shape[d] - crop[d], end[d] - crop[d])
            out[d] = rng.integers(start[d], high + 1)
        else:
            low = end[d] - crop[d] if shape is None else max(0, end[d] - crop[d])
            high = start[d] if shape is None else min(start[d], shape[d] - crop[d])
            out[d] = rng.integers(low, high + 1)
    return out


@cpu_kernel("roi_random_crop")
def roi_random_crop(inputs, args, ctx):
    return roi_random_crop_of(inputs, args, ctx.rng)


# random_crop_generator

def _roundf(value: float) -> int:
    """C's roundf for the non-negative values here: halves away from zero."""
    return int(math.floor(value + 0.5))


def crop_generator_window(height: int, width: int, args: dict, rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(y, x, h, w) by DALI's RandomCropGenerator rule, in its float32 arithmetic."""
    f32 = np.float32
    area = [f32(a) for a in args["random_area"]]
    aspect = [f32(a) for a in args["random_aspect_ratio"]]
    area_lo, area_hi = area[0], area[-1]
    min_ratio, max_ratio = aspect[0], aspect[-1]
    if not 0 < area_lo <= area_hi or not 0 < min_ratio <= max_ratio:
        raise ValueError(f"arguments 'random_area' / 'random_aspect_ratio': need positive, ordered ranges, got "
                         f"{args['random_area']} and {args['random_aspect_ratio']}")
    min_area = f32(height * width) * area_lo
    max_w = max(1, int(f32(height) * max_ratio))
    max_h = max(1, int(f32(width) * (f32(1) / min_ratio)))
    if height * max_w < min_area:  # the image is too wide for any ratio in range
        h, w = height, max_w
    elif width * max_h < min_area:  # too tall
        h, w = max_h, width
    else:
        log_lo, log_hi = math.log(min_ratio), math.log(max_ratio)
        for _ in range(int(args["num_attempts"])):
            target = f32(f32(rng.uniform(area_lo, area_hi)) * f32(height * width))
            ratio = f32(math.exp(rng.uniform(log_lo, log_hi)))
            w = max(1, _roundf(math.sqrt(f32(target * ratio))))
            h = max(1, _roundf(math.sqrt(f32(target / ratio))))
            if w <= width and h <= height and min_ratio <= f32(w) / f32(h) <= max_ratio:
                break
        else:
            ratio = f32(width) / f32(height)
            h, w = (height, max_w) if ratio > max_ratio else (max_h, width) if ratio < min_ratio else (height, width)
            scale = min(f32(1), f32(area_hi * f32(width * height)) / f32(w * h))
            w, h = max(1, int(w * math.sqrt(scale))), max(1, int(h * math.sqrt(scale)))
    x = int(rng.integers(0, width - w + 1))
    y = int(rng.integers(0, height - h + 1))
    return y, x, h, w


def random_crop_generator_of(inputs: list, args: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(anchor (y, x), shape (h, w)), int32, of a window of the image whose shape is the input."""
    shape = np.asarray(inputs[0])
    if shape.dtype.kind not in "iu" or shape.ndim != 1 or shape.size not in (2, 3):
        raise ValueError(f"the input must be an image's shape (HW or HWC: 2 or 3 integers), got {shape.dtype} of "
                         f"shape {shape.shape}")
    height, width = int(shape[0]), int(shape[1])
    if height <= 0 or width <= 0:
        return np.zeros(2, np.int32), np.zeros(2, np.int32)
    y, x, h, w = crop_generator_window(height, width, args, rng)
    return np.array([y, x], np.int32), np.array([h, w], np.int32)


@cpu_kernel("random_crop_generator")
def random_crop_generator(inputs, args, ctx):
    return random_crop_generator_of(inputs, args, ctx.rng)
