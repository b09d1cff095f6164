"""CPU kernels of bb_flip, coord_flip, bbox_paste, bbox_rotate and box_encoder: float32 numpy arithmetic in DALI's
order of operations, so that results match DALI's CPU operators bit for bit (box_encoder's offsets up to logf's
last bit). box_encoder's matching (boxes x anchors) is compiled by numba, GIL released, and pinned by tests to
encode_boxes_reference, its numpy form. The helpers here are shared with the GPU kernels and with random_bbox_crop."""

from __future__ import annotations

import math
import threading

import numba
import numpy as np

from headrace_kernels.cpu.warp_ops import rotated_size
from headrace_kernels.registry import cpu_kernel

F32 = np.float32
ONE = F32(1.0)


def float_boxes(sample, op: str, coords: int = 4, what: str = "input 0 (boxes)") -> np.ndarray:
    """The sample as float32 rows of `coords` values; a ValueError naming the op and the input otherwise."""
    boxes = np.asarray(sample)
    if boxes.dtype != np.float32:
        raise ValueError(f"{op}: {what} must be float32, got {boxes.dtype}")
    if boxes.size % coords:
        raise ValueError(f"{op}: {what} must hold boxes of {coords} coordinates (a multiple of {coords} values), got "
                         f"shape {boxes.shape}")
    return boxes.reshape(-1, coords)


def box_rows(sample, op: str, coords: int | None = None, what: str = "input 0 (boxes)") -> np.ndarray:
    """A 2D float32 [N, coords] sample (an empty [0, coords] one included); a ValueError naming the op otherwise."""
    boxes = np.asarray(sample)
    if boxes.dtype != np.float32:
        raise ValueError(f"{op}: {what} must be float32, got {boxes.dtype}")
    if boxes.ndim != 2 or (coords is not None and boxes.shape[1] != coords):
        want = f"[N, {coords}]" if coords is not None else "[N, 4] or [N, 6]"
        raise ValueError(f"{op}: {what} must be {want} boxes, got shape {boxes.shape}")
    return boxes


def label_rows(sample, count: int, op: str) -> np.ndarray:
    """Int32 labels, one row per box ([N] or [N, k]); a ValueError naming the op and input 1 otherwise."""
    labels = np.asarray(sample)
    if labels.dtype != np.int32:
        raise ValueError(f"{op}: input 1 (labels) must be int32, got {labels.dtype}")
    if labels.ndim not in (1, 2) or labels.shape[0] != count:
        raise ValueError(f"{op}: input 1 (labels) must have one row per box ({count}), got shape {labels.shape}")
    return labels


def split_layout(layout: str) -> tuple[list[int], list[int], bool]:
    """(index of each start coordinate, index of each end-or-extent coordinate, extents?) of a box layout such as
    'xyXY', 'yxHW' or 'xyzXYZ', by axis (x, y, z)."""
    ndim = len(layout) // 2
    axes = "xyz"[:ndim]
    starts = [layout.index(a) for a in axes]
    extents = "WHD"[:ndim]
    shaped = any(c in layout for c in extents)
    ends = [layout.index(c) for c in (extents if shaped else axes.upper())]
    return starts, ends, shaped


def read_corners(rows: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) float32 [N, D] corners of boxes in `layout` (hi = start + extent for start-and-shape layouts)."""
    starts, ends, shaped = split_layout(layout)
    lo = rows[:, starts]
    hi = rows[:, ends]
    return lo, (lo + hi if shaped else hi)


def write_corners(lo: np.ndarray, hi: np.ndarray, layout: str) -> np.ndarray:
    """Boxes in `layout` from float32 corners (the extent hi - lo for start-and-shape layouts)."""
    starts, ends, shaped = split_layout(layout)
    out = np.empty((lo.shape[0], len(layout)), dtype=F32)
    out[:, starts] = lo
    out[:, ends] = hi - lo if shaped else hi
    return out


def flag(value) -> bool:
    """A per-sample int flag (scalar or one-element array) as a bool."""
    if isinstance(value, int):  # bool included: what the executor gives a per-sample argument
        return bool(value)
    return bool(np.asarray(value).reshape(-1)[0]) if np.size(value) else False


def scalar(value, name: str) -> float:
    """A per-sample float argument (scalar or one-element array) as a float; a ValueError naming it otherwise."""
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    if array.size != 1:
        raise ValueError(f"argument '{name}' takes one value per sample, got {array.size}")
    return float(array[0])


# bb_flip

def flip_boxes(boxes: np.ndarray, ltrb: bool, horizontal: bool, vertical: bool) -> np.ndarray:
    """bb_flip of float32 [N, 4] boxes: on a flipped axis lo' = 1 - hi, hi' = 1 - lo (DALI's arithmetic; xyWH
    boxes go through their corners, extents included: (y + h) - y is written back for h)."""
    if ltrb:  # the corners are the columns: a copy with the flipped axes' columns swapped and mirrored
        out = boxes.copy()
        for axis, flipped in ((0, horizontal), (1, vertical)):
            if flipped:
                out[:, axis] = ONE - boxes[:, axis + 2]
                out[:, axis + 2] = ONE - boxes[:, axis]
        return out
    layout = "xyWH"
    lo, hi = read_corners(boxes, layout)
    for axis, flipped in ((0, horizontal), (1, vertical)):
        if flipped:
            lo[:, axis], hi[:, axis] = ONE - hi[:, axis], ONE - lo[:, axis]
    return write_corners(lo, hi, layout)


@cpu_kernel("bb_flip")
def bb_flip(inputs, args, ctx):
    source = np.asarray(inputs[0])
    boxes = float_boxes(source, "bb_flip")
    return flip_boxes(boxes, args["ltrb"], flag(args["horizontal"]), flag(args["vertical"])).reshape(source.shape)


# coord_flip

def coord_axes(layout: str, ncoords: int) -> str:
    """The axis letter of each coordinate of a row; a ValueError naming `layout` when it does not fit."""
    names = layout or "xyz"[:ncoords]
    if ncoords not in (1, 2, 3) or len(names) != ncoords or set(names) - set("xyz") or len(set(names)) != ncoords:
        raise ValueError(f"coord_flip: argument 'layout' {layout!r} does not describe rows of {ncoords} coordinates "
                         "(letters x, y, z, each once; rows of 1 to 3)")
    return names


def flip_plan(args: dict, ncoords: int) -> list[tuple[int, float]]:
    """(coordinate index, mirror 2 * center) of each flipped coordinate of coord_flip."""
    plan = []
    for index, axis in enumerate(coord_axes(args["layout"], ncoords)):
        if flag(args[f"flip_{axis}"]):
            plan.append((index, float(F32(2.0) * F32(scalar(args[f"center_{axis}"], f"center_{axis}")))))
    return plan


@cpu_kernel("coord_flip")
def coord_flip(inputs, args, ctx):
    points = np.asarray(inputs[0])
    if points.dtype != np.float32:
        raise ValueError(f"coord_flip: input 0 (coordinates) must be float32, got {points.dtype}")
    if points.ndim != 2:
        raise ValueError(f"coord_flip: input 0 (coordinates) must be [N, D] points, got shape {points.shape}")
    out = points.copy()
    for index, mirror in flip_plan(args, points.shape[1]):
        out[:, index] = F32(mirror) - points[:, index]
    return out


# bbox_paste

def paste_offsets(ratio: float, paste_x: float, paste_y: float) -> tuple[np.float32, np.float32, np.float32]:
    """(scale, x offset, y offset) of bbox_paste in float32; an offset is nudged down until scale + offset <= 1,
    so boxes inside [0, 1] stay inside (DALI's)."""
    if not ratio >= 1:
        raise ValueError(f"bbox_paste: argument 'ratio' must be at least 1, got {ratio}")
    ratio32 = F32(ratio)
    scale = ONE / ratio32
    multiplier = (ratio32 - ONE) / ratio32
    offsets = []
    for place in (paste_x, paste_y):
        offset = F32(place) * multiplier
        if scale + offset > ONE:
            offset = ONE - scale
            while scale + offset > ONE:
                offset = np.nextafter(offset, F32(-1.0))
        offsets.append(F32(offset))
    return scale, offsets[0], offsets[1]


def paste_boxes(boxes: np.ndarray, ltrb: bool, scale, offset_x, offset_y) -> np.ndarray:
    """bbox_paste of float32 [N, 4] boxes with the float32 plan of paste_offsets."""
    out = np.empty_like(boxes)
    out[:, 0] = boxes[:, 0] * scale + offset_x
    out[:, 1] = boxes[:, 1] * scale + offset_y
    out[:, 2:] = boxes[:, 2:] * scale
    if ltrb:
        out[:, 2] += offset_x
        out[:, 3] += offset_y
    return out


def paste_plan(args: dict) -> tuple[np.float32, np.float32, np.float32]:
    return paste_offsets(scalar(args["ratio"], "ratio"), scalar(args["paste_x"], "paste_x"),
                         scalar(args["paste_y"], "paste_y"))


@cpu_kernel("bbox_paste")
def bbox_paste(inputs, args, ctx):
    source = np.asarray(inputs[0])
    boxes = float_boxes(source, "bbox_paste")
    return paste_boxes(boxes, args["ltrb"], *paste_plan(args)).reshape(source.shape)


# box_encoder

def anchor_boxes(anchors) -> np.ndarray:
    """The `anchors` argument as float32 [M, 4] ltrb boxes; a ValueError naming it otherwise."""
    values = np.asarray(anchors if anchors is not None else [], dtype=F32)
    if values.size == 0 or values.size % 4:
        raise ValueError(f"box_encoder: argument 'anchors' must hold 4 values (ltrb) per anchor, got {values.size}")
    return values.reshape(-1, 4)


def iou_matrix(boxes: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """IoU (float32 [N, M]) of ltrb boxes with anchors: intersection volume / (volume a + volume b - it), 0 where
    they do not overlap."""
    # width and height of the overlaps as [N, M] arrays each (the same float32 steps as an [N, M, 2] broadcast,
    # in a fraction of its time)
    width = np.minimum(boxes[:, None, 2], anchors[None, :, 2]) - np.maximum(boxes[:, None, 0], anchors[None, :, 0])
    height = np.minimum(boxes[:, None, 3], anchors[None, :, 3]) - np.maximum(boxes[:, None, 1], anchors[None, :, 1])
    overlaps = (width > 0) & (height > 0)
    inter = np.where(overlaps, width * height, F32(0.0))
    box_area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    anchor_area = (anchors[:, 2] - anchors[:, 0]) * (anchors[:, 3] - anchors[:, 1])
    union = box_area[:, None] + anchor_area[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(overlaps, inter / union, F32(0.0)).astype(F32)


def last_argmax(values: np.ndarray, axis: int) -> np.ndarray:
    """Index of the largest value along `axis`, the last one on ties (DALI's `>=` scans)."""
    flipped = np.flip(values, axis=axis)
    return values.shape[axis] - 1 - np.argmax(flipped, axis=axis)


def match_anchors(ious: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(best box of each anchor, its IoU) after giving every box its best anchor (IoU set to 2)."""
    ious = ious.copy()
    best_anchor = last_argmax(ious, 1)
    ious[np.arange(ious.shape[0]), best_anchor] = F32(2.0)
    best_box = last_argmax(ious, 0)
    return best_box, ious[best_box, np.arange(ious.shape[1])]


def center_extent(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(center, extent) float32 of ltrb boxes, as DALI's Box::centroid and extent."""
    return (boxes[:, :2] + boxes[:, 2:]) * F32(0.5), boxes[:, 2:] - boxes[:, :2]


def encode_offsets(box_center, box_extent, anchor_center, anchor_extent, args: dict) -> np.ndarray:
    """SSD offsets [N, 4] (float32): ((c * s - ac * s) / (ae * s) - mean) / std, (log(e / ae) - mean) / std."""
    scale = F32(args["scale"])
    means, stds = np.asarray(args["means"], dtype=F32), np.asarray(args["stds"], dtype=F32)
    bc, be, ac, ae = box_center * scale, box_extent * scale, anchor_center * scale, anchor_extent * scale
    out = np.empty((bc.shape[0], 4), dtype=F32)
    out[:, :2] = ((bc - ac) / ae - means[:2]) / stds[:2]
    with np.errstate(divide="ignore", invalid="ignore"):
        out[:, 2:] = (np.log(be / ae) - means[2:]) / stds[2:]
    return out


def encode_boxes_reference(boxes: np.ndarray, labels: np.ndarray, anchors: np.ndarray, args: dict):
    """box_encoder of one sample in numpy arrays ([N, M] IoUs): the readable reference of encode_boxes."""
    criteria = F32(args["criteria"])
    anchor_center, anchor_extent = center_extent(anchors)
    if args["offset"]:
        out = np.zeros((anchors.shape[0], 4), dtype=F32)
    else:
        out = np.concatenate([anchor_center, anchor_extent], axis=1)
    out_labels = np.zeros(anchors.shape[0], dtype=np.int32)
    if boxes.shape[0] == 0:
        return out, out_labels
    best_box, best_iou = match_anchors(iou_matrix(boxes, anchors))
    matched = np.nonzero(best_iou > criteria)[0]
    box_center, box_extent = center_extent(boxes[best_box[matched]])
    if args["offset"]:
        out[matched] = encode_offsets(box_center, box_extent, anchor_center[matched], anchor_extent[matched], args)
    else:
        out[matched] = np.concatenate([box_center, box_extent], axis=1)
    out_labels[matched] = labels.reshape(labels.shape[0], -1)[best_box[matched], 0]
    return out, out_labels


@numba.njit(nogil=True, cache=True)
def _match_and_encode(boxes, anchors, criteria, offset, scale, means, stds, labels, out,
                      out_labels):  # pragma: no cover - compiled
    """encode_boxes_reference's matching and encoding into `out` / `out_labels` (set to the anchors' own boxes and 0
    by the caller), in its float32 operations, one anchor at a time: the IoU matrix, each box's best anchor (the
    last on ties) set to 2, each anchor's best box (the last on ties) kept above `criteria`. With `offset` the
    extents' columns get be / ae, whose log the caller takes (numpy's log, as the reference). Returns the matched
    anchors' indices."""
    count, total = boxes.shape[0], anchors.shape[0]
    ious = np.empty((count, total), np.float32)
    half = np.float32(0.5)
    for n in range(count):
        b0, b1, b2, b3 = boxes[n, 0], boxes[n, 1], boxes[n, 2], boxes[n, 3]
        box_area = (b2 - b0) * (b3 - b1)
        best, best_at = np.float32(-1.0), 0
        for m in range(total):
            width = min(b2, anchors[m, 2]) - max(b0, anchors[m, 0])
            height = min(b3, anchors[m, 3]) - max(b1, anchors[m, 1])
            value = np.float32(0.0)
            if width > 0 and height > 0:
                inter = width * height
                anchor_area = (anchors[m, 2] - anchors[m, 0]) * (anchors[m, 3] - anchors[m, 1])
                value = inter / (box_area + anchor_area - inter)
            ious[n, m] = value
            if value >= best:
                best, best_at = value, m
        ious[n, best_at] = np.float32(2.0)
    matched = np.empty(total, np.int64)
    found = 0
    for m in range(total):
        best, best_at = np.float32(-1.0), 0
        for n in range(count):
            if ious[n, m] >= best:
                best, best_at = ious[n, m], n
        if not best > criteria:
            continue
        matched[found] = m
        found += 1
        out_labels[m] = labels[best_at]
        bc0 = (boxes[best_at, 0] + boxes[best_at, 2]) * half
        bc1 = (boxes[best_at, 1] + boxes[best_at, 3]) * half
        be0 = boxes[best_at, 2] - boxes[best_at, 0]
        be1 = boxes[best_at, 3] - boxes[best_at, 1]
        if not offset:
            out[m, 0], out[m, 1], out[m, 2], out[m, 3] = bc0, bc1, be0, be1
            continue
        ac0 = (anchors[m, 0] + anchors[m, 2]) * half
        ac1 = (anchors[m, 1] + anchors[m, 3]) * half
        ae0 = (anchors[m, 2] - anchors[m, 0]) * scale
        ae1 = (anchors[m, 3] - anchors[m, 1]) * scale
        out[m, 0] = ((bc0 * scale - ac0 * scale) / ae0 - means[0]) / stds[0]
        out[m, 1] = ((bc1 * scale - ac1 * scale) / ae1 - means[1]) / stds[1]
        out[m, 2] = (be0 * scale) / ae0
        out[m, 3] = (be1 * scale) / ae1
    return matched[:found]


def encode_boxes(boxes: np.ndarray, labels: np.ndarray, anchors: np.ndarray, args: dict):
    """box_encoder of one sample: (float32 [M, 4] encoded boxes, int32 [M] labels); encode_boxes_reference's
    results, matched by the compiled loop (GIL released)."""
    out = np.zeros((anchors.shape[0], 4), dtype=F32) if args["offset"] else anchor_xywh(anchors).copy()
    out_labels = np.zeros(anchors.shape[0], dtype=np.int32)
    if boxes.shape[0] == 0:
        return out, out_labels
    means, stds = np.asarray(args["means"], dtype=F32), np.asarray(args["stds"], dtype=F32)
    matched = _match_and_encode(np.ascontiguousarray(boxes), np.ascontiguousarray(anchors), F32(args["criteria"]),
                                bool(args["offset"]), F32(args["scale"]), means, stds,
                                np.ascontiguousarray(labels.reshape(labels.shape[0], -1)[:, 0]), out, out_labels)
    if args["offset"] and matched.size:
        with np.errstate(divide="ignore", invalid="ignore"):
            out[matched, 2:] = (np.log(out[matched, 2:]) - means[2:]) / stds[2:]
    return out, out_labels


def check_encoder_args(args: dict) -> None:
    """box_encoder's argument checks (DALI's): criteria in [0, 1]; means and stds of 4 values, stds non-zero."""
    if not 0.0 <= args["criteria"] <= 1.0:
        raise ValueError(f"box_encoder: argument 'criteria' must be in [0, 1], got {args['criteria']}")
    if any(s == 0 for s in args["stds"]):
        raise ValueError(f"box_encoder: argument 'stds' must not hold zeros, got {args['stds']}")


@cpu_kernel("box_encoder")
def box_encoder(inputs, args, ctx):
    check_encoder_args(args)
    boxes = box_rows(inputs[0], "box_encoder", 4)
    labels = label_rows(inputs[1], boxes.shape[0], "box_encoder")
    return encode_boxes(boxes, labels, cached_anchor_boxes(args["anchors"]), args)


_ANCHORS: dict[int, tuple[object, np.ndarray]] = {}
_ANCHORS_LOCK = threading.Lock()
_XYWH: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def anchor_xywh(anchors: np.ndarray) -> np.ndarray:
    """The (center, extent) rows of ltrb `anchors` (what box_encoder gives an unmatched anchor), made once per
    read-only anchors array (cached_anchor_boxes gives a node the same one every sample; 40 us a sample for
    SSD300's)."""
    if anchors.flags.writeable:  # might change between calls: not cached
        return np.concatenate(center_extent(anchors), axis=1)
    found = _XYWH.get(id(anchors))
    if found is not None and found[0] is anchors:
        return found[1]
    xywh = np.concatenate(center_extent(anchors), axis=1)
    xywh.flags.writeable = False
    with _ANCHORS_LOCK:
        if len(_XYWH) >= 16:
            _XYWH.clear()
        _XYWH[id(anchors)] = (anchors, xywh)
    return xywh


def cached_anchor_boxes(anchors) -> np.ndarray:
    """anchor_boxes of a node's `anchors` list, made once per list (SSD300's 8732 anchors take 0.5 ms to convert;
    the list is the node's own argument, the same object every batch). The entry holds the list, so its id is not
    reused while cached."""
    key = id(anchors)
    with _ANCHORS_LOCK:
        found = _ANCHORS.get(key)
        if found is not None and found[0] is anchors:
            return found[1]
    boxes = anchor_boxes(anchors)
    boxes.flags.writeable = False
    with _ANCHORS_LOCK:
        if len(_ANCHORS) >= 16:
            _ANCHORS.clear()
        _ANCHORS[key] = (anchors, boxes)
    return boxes


# bbox_rotate

def _shape_index(shape_layout: str, letter: str) -> int:
    index = shape_layout.find(letter)
    if index < 0:
        raise ValueError(f"bbox_rotate: argument 'shape_layout' {shape_layout!r} must name H and W")
    return index


def rotate_canvas(args: dict) -> tuple[tuple[float, float], tuple[float, float], float]:
    """((in w, in h), (canvas w, canvas h), angle in degrees) of bbox_rotate for one sample's arguments."""
    angle = scalar(args["angle"], "angle")
    shape = [int(v) for v in np.asarray(args["input_shape"]).reshape(-1)]
    layout = args["shape_layout"]
    h_at, w_at = _shape_index(layout, "H"), _shape_index(layout, "W")
    if len(shape) <= max(h_at, w_at):
        raise ValueError(f"bbox_rotate: argument 'input_shape' {shape} is shorter than shape_layout {layout!r}")
    in_h, in_w = shape[h_at], shape[w_at]
    if in_h <= 0 or in_w <= 0:
        raise ValueError(f"bbox_rotate: argument 'input_shape' must be positive, got {shape}")
    size = [float(v) for v in np.asarray(args["size"] if args["size"] is not None else []).reshape(-1)]
    if args["keep_size"]:
        if size:
            raise ValueError("bbox_rotate: argument 'size' excludes keep_size")
        canvas = (float(in_w), float(in_h))
    elif size:
        if len(size) != 2:
            raise ValueError(f"bbox_rotate: argument 'size' takes two values (H, W), got {len(size)}")
        canvas = (float(math.floor(size[1])), float(math.floor(size[0])))
    else:
        out_h, out_w = rotated_size(in_h, in_w, angle)
        canvas = (float(out_w), float(out_h))
    return (float(in_w), float(in_h)), canvas, angle


def rotate_boxes(boxes: np.ndarray, args: dict) -> tuple[np.ndarray, np.ndarray]:
    """bbox_rotate of float32 [N, 4] boxes: (rotated boxes, indices of the boxes kept)."""
    (in_w, in_h), (out_w, out_h), degrees = rotate_canvas(args)
    ltrb = args["bbox_layout"] == "xyXY"
    normalized = args["bbox_normalized"]
    lo, hi = read_corners(boxes, "xyXY" if ltrb else "xyWH")
    xs = np.stack([lo[:, 0], hi[:, 0], lo[:, 0], hi[:, 0]], axis=1)
    ys = np.stack([lo[:, 1], lo[:, 1], hi[:, 1], hi[:, 1]], axis=1)
    if normalized:
        xs, ys = (xs - F32(0.5)) * F32(in_w), (ys - F32(0.5)) * F32(in_h)
    else:
        xs, ys = xs - F32(in_w) / F32(2), ys - F32(in_h) / F32(2)
    old_w, old_h = xs[:, 1] - xs[:, 0], ys[:, 2] - ys[:, 0]
    radians = F32(F32(degrees) * F32(math.pi / 180))
    cos, sin = F32(math.cos(radians)), F32(math.sin(radians))
    xs, ys = xs * cos + ys * sin, -xs * sin + ys * cos
    xs, ys = xs + F32(out_w) / F32(2), ys + F32(out_h) / F32(2)
    out = np.stack([xs.min(axis=1), ys.min(axis=1), xs.max(axis=1), ys.max(axis=1)], axis=1).astype(F32)
    if args["mode"] != "expand":
        new_w, new_h = out[:, 2] - out[:, 0], out[:, 3] - out[:, 1]
        swapped = (old_w < old_h) ^ (new_w < new_h)
        diff_w = np.where(swapped, new_w - old_h, new_w - old_w) * F32(0.5)
        diff_h = np.where(swapped, new_h - old_w, new_h - old_h) * F32(0.5)
        if args["mode"] == "halfway":
            diff_w, diff_h = diff_w * F32(0.5), diff_h * F32(0.5)
        out[:, 0] += diff_w
        out[:, 1] += diff_h
        out[:, 2] -= diff_w
        out[:, 3] -= diff_h
    old_area = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])
    clipped = np.empty_like(out)
    clipped[:, 0::2] = np.clip(out[:, 0::2], F32(0.0), F32(out_w))
    clipped[:, 1::2] = np.clip(out[:, 1::2], F32(0.0), F32(out_h))
    new_area = (clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = np.nonzero(new_area / old_area >= F32(args["remove_threshold"]))[0]
    out = clipped[keep]
    if not ltrb:
        out[:, 2:] -= out[:, :2]
    if normalized:
        out *= np.array([ONE / F32(out_w), ONE / F32(out_h)] * 2, dtype=F32)
    return out, keep


def check_rotate_args(args: dict) -> None:
    """bbox_rotate's argument checks: remove_threshold in [0, 1]."""
    if not 0.0 <= args["remove_threshold"] <= 1.0:
        raise ValueError(f"bbox_rotate: argument 'remove_threshold' must be in [0, 1], got "
                         f"{args['remove_threshold']}")


@cpu_kernel("bbox_rotate")
def bbox_rotate(inputs, args, ctx):
    check_rotate_args(args)
    boxes = box_rows(inputs[0], "bbox_rotate", 4)
    out, keep = rotate_boxes(boxes, args)
    if len(inputs) < 2:
        return out
    labels = label_rows(inputs[1], boxes.shape[0], "bbox_rotate")
    return out, labels[keep]
