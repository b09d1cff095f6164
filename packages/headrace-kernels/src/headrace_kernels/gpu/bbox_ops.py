"""GPU bb_flip, coord_flip, bbox_paste and box_encoder as CuPy array operations over the whole batch (the samples'
rows concatenated, per-row parameters from each sample's arguments), in the CPU kernels' float32 order of
operations; box_encoder's IoU matching is one (samples x boxes x anchors) array computation. bbox_rotate and
random_bbox_crop, which DALI has on the CPU only, run the CPU kernels' code on the host (random_bbox_crop from each
sample's own stream, so CPU and GPU choose the same windows) and upload the results."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.bbox_crop_ops import bbox_crop_sample, ssd_crop_sample
from headrace_kernels.cpu.bbox_ops import (
    F32,
    anchor_boxes,
    check_encoder_args,
    check_rotate_args,
    flag,
    flip_plan,
    label_rows,
    paste_plan,
    read_corners,
    rotate_boxes,
)
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import SampleFailureError, gpu_kernel


def _host_samples(batch, k: int) -> list[np.ndarray]:
    """Input k's samples on the host (a CPU input as it is, a GPU one copied)."""
    value = batch.value(k)
    if isinstance(value, list | tuple):
        return [np.asarray(v) for v in value]
    cp = cupy()
    return [cp.asnumpy(s) for s in value.samples()]


def _rows(samples: list, op: str, coords: int, two_d: bool = False):
    """(all samples' rows as one float32 [R, coords] device array, row count per sample)."""
    cp = cupy()
    counts = []
    for i, sample in enumerate(samples):
        if sample.dtype != np.float32:
            raise SampleFailureError(i, f"{op}: input 0 must be float32, got {sample.dtype}")
        if two_d and sample.ndim != 2:
            raise SampleFailureError(i, f"{op}: input 0 must be [N, D] rows, got shape {tuple(sample.shape)}")
        if sample.size % coords:
            raise SampleFailureError(i, f"{op}: input 0 must hold rows of {coords} values, got shape "
                                        f"{tuple(sample.shape)}")
        counts.append(sample.size // coords)
    if not samples or sum(counts) == 0:
        return cp.zeros((0, coords), dtype=cp.float32), counts
    flat = cp.concatenate([cp.ascontiguousarray(s).reshape(-1) for s in samples]).reshape(-1, coords)
    return flat, counts


def _per_row(values: list, counts: list[int], dtype) -> object:
    """One value per sample repeated over the sample's rows, as a device column."""
    return cupy().asarray(np.repeat(np.asarray(values, dtype=dtype), counts))[:, None]


def _split(rows, counts: list[int], samples: list):
    """Rows back into samples of the inputs' shapes: (dense, None) when the shapes agree, else (None, list)."""
    shapes = [tuple(s.shape) for s in samples]
    ends = np.cumsum(counts)
    flat = rows.reshape(-1)
    width = rows.shape[1]
    parts = [flat[(end - count) * width:end * width].reshape(shape)
             for end, count, shape in zip(ends, counts, shapes, strict=True)]
    if parts and len(set(shapes)) == 1:
        return cupy().stack(parts), None
    return None, parts


@gpu_kernel("bb_flip")
def bb_flip_kernel(batch):
    """Corners of every box of the batch flipped where its sample asks (1 - hi, 1 - lo), as the CPU kernel."""
    cp = cupy()
    samples = batch.samples()
    rows, counts = _rows(samples, "bb_flip", 4)
    args = batch.sample_args()
    layout = "xyXY" if batch.args["ltrb"] else "xyWH"
    lo, hi = read_corners(rows, layout)
    one = F32(1.0)
    for axis, name in ((0, "horizontal"), (1, "vertical")):
        flips = _per_row([flag(a[name]) for a in args], counts, np.bool_)[:, 0]
        new_lo = cp.where(flips, one - hi[:, axis], lo[:, axis])
        new_hi = cp.where(flips, one - lo[:, axis], hi[:, axis])
        lo[:, axis], hi[:, axis] = new_lo, new_hi
    out = cp.empty_like(rows)
    out[:, :2] = lo
    out[:, 2:] = hi if layout == "xyXY" else hi - lo
    return _split(out, counts, samples)


@gpu_kernel("coord_flip")
def coord_flip_kernel(batch):
    """Flipped coordinates of every point of the batch: 2 * center - c where its sample flips that axis."""
    cp = cupy()
    samples = batch.samples()
    ncoords = {int(s.shape[1]) for s in samples if s.ndim == 2}
    if len(ncoords) > 1:
        raise SampleFailureError(0, f"coord_flip on the GPU needs one row length per batch, got {sorted(ncoords)}")
    width = ncoords.pop() if ncoords else 1
    rows, counts = _rows(samples, "coord_flip", width, two_d=True)
    out = rows.copy()
    plans = [per_sample(i, flip_plan, args, width) for i, args in enumerate(batch.sample_args())]
    for index in range(width):
        flips = _per_row([any(j == index for j, _ in plan) for plan in plans], counts, np.bool_)[:, 0]
        mirrors = _per_row([next((m for j, m in plan if j == index), 0.0) for plan in plans], counts, F32)[:, 0]
        out[:, index] = cp.where(flips, mirrors - rows[:, index], rows[:, index])
    return _split(out, counts, samples)


@gpu_kernel("bbox_paste")
def bbox_paste_kernel(batch):
    """Every box of the batch scaled by 1 / ratio and moved by its sample's offsets, as the CPU kernel."""
    samples = batch.samples()
    rows, counts = _rows(samples, "bbox_paste", 4)
    plans = [per_sample(i, paste_plan, args) for i, args in enumerate(batch.sample_args())]
    scale = _per_row([p[0] for p in plans], counts, F32)
    offset_x = _per_row([p[1] for p in plans], counts, F32)[:, 0]
    offset_y = _per_row([p[2] for p in plans], counts, F32)[:, 0]
    out = rows * scale
    out[:, 0] += offset_x
    out[:, 1] += offset_y
    if batch.args["ltrb"]:
        out[:, 2] += offset_x
        out[:, 3] += offset_y
    return _split(out, counts, samples)


def encode_batch(boxes: list, labels: list, anchors: np.ndarray, args: dict):
    """box_encoder of a batch on the GPU: the IoU of every (sample, box, anchor) at once (padded boxes -1), each
    box's best anchor forced to IoU 2, each anchor's best box (the last on ties, as the CPU), then the encoding."""
    cp = cupy()
    n, m = len(boxes), anchors.shape[0]
    most = max((b.shape[0] for b in boxes), default=0)
    padded = cp.zeros((n, max(most, 1), 4), dtype=cp.float32)
    padded_labels = cp.zeros((n, max(most, 1)), dtype=cp.int32)
    valid = np.zeros((n, max(most, 1)), dtype=bool)
    for i, (sample, label) in enumerate(zip(boxes, labels, strict=True)):
        count = sample.shape[0]
        if count:
            padded[i, :count] = sample
            padded_labels[i, :count] = label.reshape(count, -1)[:, 0]
            valid[i, :count] = True
    valid = cp.asarray(valid)
    anchor = cp.asarray(anchors)
    lo = cp.maximum(padded[:, :, None, :2], anchor[None, None, :, :2])
    hi = cp.minimum(padded[:, :, None, 2:], anchor[None, None, :, 2:])
    extent = hi - lo
    overlaps = cp.all(extent > 0, axis=-1)
    inter = cp.where(overlaps, extent[..., 0] * extent[..., 1], cp.float32(0))
    box_area = (padded[..., 2] - padded[..., 0]) * (padded[..., 3] - padded[..., 1])
    anchor_area = (anchor[:, 2] - anchor[:, 0]) * (anchor[:, 3] - anchor[:, 1])
    union = box_area[:, :, None] + anchor_area[None, None, :] - inter
    ious = cp.where(overlaps, inter / cp.where(overlaps, union, cp.float32(1)), cp.float32(0))
    ious = cp.where(valid[:, :, None], ious, cp.float32(-1))
    best_anchor = m - 1 - cp.argmax(ious[:, :, ::-1], axis=2)  # (n, boxes)
    forced = cp.arange(m)[None, None, :] == best_anchor[:, :, None]
    ious = cp.where(forced & valid[:, :, None], cp.float32(2), ious)
    rows = ious.shape[1]
    best_box = rows - 1 - cp.argmax(ious[:, ::-1, :], axis=1)  # (n, anchors)
    best_iou = cp.take_along_axis(ious, best_box[:, None, :], axis=1)[:, 0, :]
    matched = (best_iou > cp.float32(args["criteria"])) & valid.any(axis=1)[:, None]
    chosen = cp.take_along_axis(padded, best_box[:, :, None], axis=1)  # (n, anchors, 4)
    half = cp.float32(0.5)
    box_center, box_extent = (chosen[..., :2] + chosen[..., 2:]) * half, chosen[..., 2:] - chosen[..., :2]
    anchor_center, anchor_extent = (anchor[:, :2] + anchor[:, 2:]) * half, anchor[:, 2:] - anchor[:, :2]
    if args["offset"]:
        scale = cp.float32(args["scale"])
        means, stds = cp.asarray(args["means"], dtype=cp.float32), cp.asarray(args["stds"], dtype=cp.float32)
        bc, ac, ae = box_center * scale, anchor_center * scale, anchor_extent * scale
        be = cp.where(matched[..., None], box_extent * scale, ae)  # unmatched anchors: no log of 0 (unused)
        centers = ((bc - ac) / ae - means[:2]) / stds[:2]
        extents = (cp.log(be / ae) - means[2:]) / stds[2:]
        encoded = cp.concatenate([centers, extents], axis=-1)
        fallback = cp.zeros((m, 4), dtype=cp.float32)
    else:
        encoded = cp.concatenate([box_center, box_extent], axis=-1)
        fallback = cp.concatenate([anchor_center, anchor_extent], axis=-1)
    out = cp.where(matched[..., None], encoded, fallback[None])
    out_labels = cp.where(matched, cp.take_along_axis(padded_labels, best_box, axis=1), cp.int32(0))
    return cp.ascontiguousarray(out.astype(cp.float32)), cp.ascontiguousarray(out_labels.astype(cp.int32))


@gpu_kernel("box_encoder")
def box_encoder_kernel(batch):
    """Both outputs, dense: encoded boxes (N, M, 4) and labels (N, M)."""
    args = batch.args
    per_sample(0, check_encoder_args, args)
    anchors = per_sample(0, anchor_boxes, args["anchors"])
    boxes, labels = batch.samples(0), batch.samples(1)
    for i, (sample, label) in enumerate(zip(boxes, labels, strict=True)):
        if sample.dtype != np.float32 or sample.ndim != 2 or sample.shape[1] != 4:
            raise SampleFailureError(i, f"box_encoder: input 0 (boxes) must be float32 [N, 4], got {sample.dtype} "
                                        f"{tuple(sample.shape)}")
        if label.dtype != np.int32 or label.ndim not in (1, 2) or label.shape[0] != sample.shape[0]:
            raise SampleFailureError(i, f"box_encoder: input 1 (labels) must be int32 with one row per box "
                                        f"({sample.shape[0]}), got {label.dtype} {tuple(label.shape)}")
    out, out_labels = encode_batch(boxes, labels, anchors, args)
    return (out, None), (out_labels, None)


def _upload_outputs(results: list[tuple]) -> tuple:
    """Per-sample host results (tuples of arrays) as one GPU result per output: (dense or None, list)."""
    cp = cupy()
    outputs = []
    for k in range(len(results[0]) if results else 0):
        host = [np.ascontiguousarray(r[k]) for r in results]
        if len({h.shape for h in host}) == 1:
            outputs.append((cp.asarray(np.stack(host)), None))
        else:
            outputs.append((None, [cp.asarray(h) for h in host]))
    return tuple(outputs)


@gpu_kernel("bbox_rotate")
def bbox_rotate_kernel(batch):
    """The CPU kernel's rotation of each sample's boxes, on the host (DALI has it on the CPU only), uploaded."""
    boxes = _host_samples(batch, 0)
    labels = _host_samples(batch, 1) if batch.num_inputs() > 1 else None
    results = []
    for i, args in enumerate(batch.sample_args()):
        per_sample(i, check_rotate_args, args)
        sample = boxes[i]
        if sample.dtype != np.float32 or sample.ndim != 2 or sample.shape[1] != 4:
            raise SampleFailureError(i, f"bbox_rotate: input 0 (boxes) must be float32 [N, 4], got {sample.dtype} "
                                        f"{sample.shape}")
        out, keep = per_sample(i, rotate_boxes, sample, args)
        if labels is None:
            results.append((out,))
        else:
            results.append((out, per_sample(i, label_rows, labels[i], sample.shape[0], "bbox_rotate")[keep]))
    uploaded = _upload_outputs(results)
    return uploaded if labels is not None else uploaded[0]


@gpu_kernel("random_bbox_crop")
def random_bbox_crop_kernel(batch):
    """The CPU kernel's search per sample, on the host from the sample's own stream, uploaded."""
    inputs = [_host_samples(batch, k) for k in range(batch.num_inputs())]
    results = [per_sample(i, bbox_crop_sample, [inp[i] for inp in inputs], args, batch.rng(i))
               for i, args in enumerate(batch.sample_args())]
    return _upload_outputs(results)


@gpu_kernel("ssd_random_crop")
def ssd_random_crop_kernel(batch):
    """Each sample's window chosen on the host from its own stream (the CPU's), the image cut on the GPU."""
    cp = cupy()
    images = batch.samples(0)
    boxes, labels = _host_samples(batch, 1), _host_samples(batch, 2)
    out_images, out_boxes, out_labels = [], [], []
    for i, args in enumerate(batch.sample_args()):
        image = images[i]
        pixels, kept, classes = per_sample(i, ssd_crop_sample, tuple(image.shape), boxes[i], labels[i],
                                           args["num_attempts"], batch.rng(i))
        if pixels is not None:
            x0, y0, x1, y1 = pixels
            image = image[y0:y1, x0:x1]
        out_images.append(cp.ascontiguousarray(image))
        out_boxes.append(cp.asarray(kept))
        out_labels.append(cp.asarray(classes))
    return (None, out_images), (None, out_boxes), (None, out_labels)
