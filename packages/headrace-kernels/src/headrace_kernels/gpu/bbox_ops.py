"""GPU bb_flip, coord_flip, bbox_paste and box_encoder over the whole batch at once: the samples' rows packed into
one device array (gpu/ragged.py), per-sample arguments repeated over their rows on the host and uploaded in one
asynchronous copy, a fixed number of CuPy array operations whatever the batch size (no per-sample launches, no host
synchronisation), and per-sample views of one output buffer; the CPU kernels' float32 order of operations.
bb_flip is one launch of kernels/bbox.cu, box_encoder two over the packed boxes (each box's best anchor, then each
anchor's best box of its sample and the encoding); a bb_flip read by box_encoder alone runs inside its step.
bbox_rotate and random_bbox_crop, which DALI has on the CPU only, run the CPU kernels' code on the host
(random_bbox_crop from each sample's own stream, so CPU and GPU choose the same windows): their output sizes depend
on the data, so they read the batch back in one copy (one synchronisation per batch) and upload each output in one
copy."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from headrace_kernels.cpu.bbox_crop_ops import bbox_crop_sample, ssd_crop_sample
from headrace_kernels.cpu.bbox_ops import (
    F32,
    cached_anchor_boxes,
    check_encoder_args,
    check_rotate_args,
    flag,
    flip_plan,
    label_rows,
    paste_plan,
    rotate_boxes,
)
from headrace_kernels.gpu import ragged
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy, function
from headrace_kernels.registry import SampleFailureError, gpu_kernel


def _device(host: np.ndarray) -> Any:
    """A host array on the current device and stream: CuPy (13 and later) stages it in pinned memory and copies it
    asynchronously, so the host does not wait for the stream; an empty one is allocated, not copied."""
    cp = cupy()
    host = np.ascontiguousarray(host)
    if host.size == 0:
        return cp.zeros(host.shape, dtype=host.dtype)
    return cp.asarray(host)


def _read(batch, k: int) -> tuple[Any, list | None, list[tuple[int, ...]], list[np.dtype]]:
    """(input k as one dense [n, ...] device array or None, else its samples, the samples' shapes and types): only
    metadata is read on the host."""
    value = batch.value(k)
    dense = getattr(value, "dense", None)
    if dense is not None:
        n = int(dense.shape[0])
        return dense, None, [tuple(dense.shape[1:])] * n, [np.dtype(dense.dtype)] * n
    packed = getattr(value, "packed", None)
    if packed is not None:  # one buffer: ragged.pack takes it as it is when its samples lie back to back
        return None, packed, packed.shapes, [packed.dtype] * len(packed)
    samples = batch.samples(k)
    return None, samples, [tuple(s.shape) for s in samples], [np.dtype(s.dtype) for s in samples]


def _input_rows(batch, k: int, op: str, coords: int, two_d: bool = False, what: str = "input 0",
                read: tuple | None = None):
    """(input k's samples as one float32 [R, coords] device array, rows per sample, the samples' shapes), from the
    batch's dense array when it has one, else from its samples (no copy when they lie back to back, else one
    concatenation). `read`: what _read gave for input k, when the caller has it."""
    dense, samples, shapes, dtypes = read if read is not None else _read(batch, k)
    sizes = _sizes(shapes, samples)
    if not (_one_type(dtypes, np.float32) and not (sizes % coords).any()
            and (not two_d or _ndims(shapes, 2))):  # the usual case checked at once; else find the first bad one
        for i, (shape, dtype, size) in enumerate(zip(shapes, dtypes, sizes.tolist(), strict=True)):
            if dtype != np.float32:
                raise SampleFailureError(i, f"{op}: {what} must be float32, got {dtype}")
            if two_d and len(shape) != 2:
                raise SampleFailureError(i, f"{op}: {what} must be [N, D] rows, got shape {shape}")
            if size % coords:
                raise SampleFailureError(i, f"{op}: {what} must hold rows of {coords} values, got shape {shape}")
    rows = ragged.pack(cupy(), samples, coords, dense=dense, dtype=np.float32)
    return rows, (sizes // coords).tolist(), shapes


def _sizes(shapes: list[tuple[int, ...]], samples) -> np.ndarray:
    """int64 [n]: each sample's element count (PackedSamples know theirs)."""
    known = getattr(samples, "sizes", None)
    return known if known is not None and len(known) == len(shapes) else ragged.element_counts(shapes)


def _one_type(dtypes: list[np.dtype], dtype: type) -> bool:
    """Whether every sample is of `dtype` (a batch's samples share one type, so usually one comparison)."""
    return all(d == dtype for d in set(dtypes))


def _ndims(shapes: list[tuple[int, ...]], ndim: int) -> bool:
    """Whether every sample has `ndim` dimensions."""
    return all(n == ndim for n in set(map(len, shapes)))


def _flags(values: list) -> np.ndarray:
    """uint8 [n]: per-sample int flags (`flag`'s rule), at once where they are all Python ints or bools."""
    if all(t is int or t is bool for t in set(map(type, values))):
        return np.asarray(values, dtype=bool).astype(np.uint8)
    return np.fromiter(map(flag, values), np.uint8, len(values))


def _flip_rows(rows: Any, counts: list[int], args_list: list[dict], ltrb: bool) -> Any:
    """bb_flip of packed float32 [R, 4] rows (`counts` per sample), each sample's flags from its arguments: one
    launch of kernels/bbox.cu (a CuPy array operation costs ~0.1-0.3 ms of host time on a batch of boxes)."""
    cp = cupy()
    total = int(rows.shape[0])
    if total == 0:
        return rows
    flags = _flags([a["horizontal"] for a in args_list]) | _flags([a["vertical"] for a in args_list]) << 1
    flips = _device(ragged.per_row(flags, counts))  # [R]: bit 0 x, bit 1 y
    out = cp.empty((total, 4), cp.float32)
    function("bbox.cu", "bb_flip_rows")((-(-total // 256),), (256,),
                                        (rows, flips, np.int32(bool(ltrb)), out, np.int64(total)))
    return out


@gpu_kernel("bb_flip")
def bb_flip_kernel(batch):
    """Corners of every box of the batch flipped where its sample asks (1 - hi, 1 - lo), as the CPU kernel."""
    rows, counts, shapes = _input_rows(batch, 0, "bb_flip", 4)
    return ragged.split(_flip_rows(rows, counts, batch.sample_args(), batch.args["ltrb"]), shapes)


@gpu_kernel("coord_flip")
def coord_flip_kernel(batch):
    """Flipped coordinates of every point of the batch: 2 * center - c where its sample flips that axis."""
    cp = cupy()
    read = _read(batch, 0)
    ncoords = {int(s[1]) for s in read[2] if len(s) == 2}
    if len(ncoords) > 1:
        raise SampleFailureError(0, f"coord_flip on the GPU needs one row length per batch, got {sorted(ncoords)}")
    width = ncoords.pop() if ncoords else 1
    rows, counts, shapes = _input_rows(batch, 0, "coord_flip", width, two_d=True, read=read)
    # per sample: [flip flag of each coordinate (0 or 1), mirror 2 * center of each coordinate]
    table = np.zeros((len(shapes), 2, width), dtype=np.float32)
    for i, args in enumerate(batch.sample_args()):
        for index, mirror in per_sample(i, flip_plan, args, width):
            table[i, 0, index], table[i, 1, index] = 1.0, F32(mirror)
    if rows.shape[0] == 0:
        return ragged.split(rows, shapes)
    plan = _device(ragged.per_row(table, counts))  # [R, 2, width]
    out = cp.where(plan[:, 0] != 0, plan[:, 1] - rows, rows)
    return ragged.split(out, shapes)


@gpu_kernel("bbox_paste")
def bbox_paste_kernel(batch):
    """Every box of the batch scaled by 1 / ratio and moved by its sample's offsets, as the CPU kernel."""
    rows, counts, shapes = _input_rows(batch, 0, "bbox_paste", 4)
    plans = [per_sample(i, paste_plan, args) for i, args in enumerate(batch.sample_args())]
    if rows.shape[0] == 0:
        return ragged.split(rows, shapes)
    plan = _device(ragged.per_row(np.array(plans, dtype=np.float32).reshape(-1, 3), counts))  # [R, (s, x, y)]
    out = rows * plan[:, :1]
    out[:, :2] += plan[:, 1:]
    if batch.args["ltrb"]:
        out[:, 2:] += plan[:, 1:]
    return ragged.split(out, shapes)


def _labels_packed(batch, counts: list[int]) -> Any:
    """Input 1 (labels, int32 [N] or [N, k], one row per box) checked against the box counts, as the first column of
    every row packed into one int32 [R] device array."""
    cp = cupy()
    dense, samples, shapes, dtypes = _read(batch, 1)
    if len(shapes) != len(counts):
        raise SampleFailureError(0, f"box_encoder: input 1 (labels) has {len(shapes)} samples, boxes {len(counts)}")
    sizes = _sizes(shapes, samples)
    one_per_box = np.array_equal(sizes, counts)  # one label per box: the packed labels are the first column
    if not (one_per_box and _one_type(dtypes, np.int32) and _ndims(shapes, 1)):  # [N, k], or a bad sample to find
        for i, (shape, dtype, count) in enumerate(zip(shapes, dtypes, counts, strict=True)):
            if dtype != np.int32 or len(shape) not in (1, 2) or shape[0] != count:
                raise SampleFailureError(i, f"box_encoder: input 1 (labels) must be int32 with one row per box "
                                            f"({count}), got {dtype} {shape}")
    flat = ragged.pack(cp, samples, 1, dense=dense, dtype=np.int32).reshape(-1)
    if one_per_box:
        return flat
    return flat[_device(ragged.first_elements(counts, sizes.tolist()))]


def _check_encoder_boxes(read: tuple) -> None:
    """box_encoder's boxes are float32 [N, 4]: an error naming the first sample that is not."""
    _, _, shapes, dtypes = read
    if _one_type(dtypes, np.float32) and _ndims(shapes, 2) and all(d == 4 for d in set(map(itemgetter(1), shapes))):
        return  # every sample float32 [N, 4]
    for i, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=True)):
        if dtype != np.float32 or len(shape) != 2 or shape[1] != 4:
            raise SampleFailureError(i, f"box_encoder: input 0 (boxes) must be float32 [N, 4], got {dtype} {shape}")


@gpu_kernel("box_encoder")
class BoxEncoderKernel:
    """Both outputs, dense: encoded boxes (N, M, 4) and labels (N, M), from two launches of kernels/bbox.cu (each
    box's best anchor; each anchor's best box of its sample and the encoding). The anchors, means and stds go to
    the device once per node."""

    def __init__(self, setup):
        self.args = setup.args
        self._consts = None  # the anchors (M rows), then means and stds: float32 [M + 2, 4] on the device

    def release(self) -> None:
        self._consts = None

    def run(self, batch):
        return self.encode(batch, *self.boxes(batch, "box_encoder"))

    def boxes(self, batch, op: str) -> tuple[Any, list[int]]:
        """Input 0 as packed float32 [R, 4] rows and the rows per sample, checked as box_encoder's boxes ([N, 4])
        after `op`'s own checks (the first op of the step)."""
        read = _read(batch, 0)
        if op == "box_encoder":
            _check_encoder_boxes(read)
        boxes, counts, _ = _input_rows(batch, 0, op, 4, read=read)
        if op != "box_encoder":  # the first op's checks came first, as when it runs alone
            _check_encoder_boxes(read)
        return boxes, counts

    def encode(self, batch, boxes: Any, counts: list[int]):
        """Both outputs of the packed ltrb `boxes` (`counts` per sample) and the batch's labels (its input 1)."""
        cp = cupy()
        args = self.args
        per_sample(0, check_encoder_args, args)
        anchors = per_sample(0, cached_anchor_boxes, args["anchors"])
        m = int(anchors.shape[0])
        labels = _labels_packed(batch, counts)
        n = len(counts)
        out = cp.empty((n, m, 4), dtype=cp.float32)
        out_labels = cp.empty((n, m), dtype=cp.int32)
        if n == 0:
            return (out, None), (out_labels, None)
        if self._consts is None:
            self._consts = _device(np.concatenate([anchors, np.asarray(args["means"], dtype=F32).reshape(1, 4),
                                                   np.asarray(args["stds"], dtype=F32).reshape(1, 4)]))
        anchors, means, stds = self._consts[:m], self._consts[m], self._consts[m + 1]
        total = int(boxes.shape[0])
        best_anchor = cp.empty(max(total, 1), dtype=cp.int32)
        if total:
            function("bbox.cu", "box_best_anchor")((total,), (256,), (boxes, anchors, np.int32(m), best_anchor))
        offsets = _device(ragged.offsets(counts))
        function("bbox.cu", "box_match_encode")(
            ((m + 255) // 256, n), (256,),
            (boxes, labels, offsets, best_anchor, anchors, np.int32(m), F32(args["criteria"]),
             np.int32(bool(args["offset"])), F32(args["scale"]), means, stds, out, out_labels))
        return (out, None), (out_labels, None)


def _host_inputs(batch, ks) -> dict[int, list[np.ndarray]]:
    """Inputs `ks` on the host: a CPU input as it is; the GPU ones' samples packed as bytes into one device buffer
    and read back in one copy (one synchronisation for the batch)."""
    cp = cupy()
    out: dict[int, list[np.ndarray]] = {}
    pending = []
    for k in ks:
        value = batch.value(k)
        if isinstance(value, list | tuple):
            out[k] = [np.asarray(v) for v in value]
        else:
            pending.append((k, value.samples()))
    if not pending:
        return out
    parts, layout = [], []
    for k, samples in pending:
        for s in samples:
            parts.append(ragged.contiguous(cp, s).reshape(-1).view(np.uint8))
            layout.append((k, tuple(s.shape), np.dtype(s.dtype), int(s.size) * np.dtype(s.dtype).itemsize))
    host = cp.asnumpy(cp.concatenate(parts)) if parts else np.zeros(0, np.uint8)
    position = 0
    for k, shape, dtype, nbytes in layout:
        out.setdefault(k, []).append(host[position:position + nbytes].view(dtype).reshape(shape))
        position += nbytes
    for k, _ in pending:
        out.setdefault(k, [])
    return out


def _upload_outputs(results: list[tuple]) -> tuple:
    """Per-sample host results (tuples of arrays) as one GPU result per output, each uploaded in one copy: (dense,
    None) when the samples' shapes agree, else (None, views of one device buffer)."""
    outputs = []
    for k in range(len(results[0]) if results else 0):
        host = [np.ascontiguousarray(r[k]) for r in results]
        if len({h.shape for h in host}) == 1:
            outputs.append((_device(np.stack(host)), None))
        else:
            flat = _device(np.concatenate([h.reshape(-1) for h in host]))
            outputs.append(ragged.split(flat, [h.shape for h in host]))
    return tuple(outputs)


@gpu_kernel("bbox_rotate")
def bbox_rotate_kernel(batch):
    """The CPU kernel's rotation of each sample's boxes, on the host (DALI has it on the CPU only), uploaded."""
    with_labels = batch.num_inputs() > 1
    inputs = _host_inputs(batch, (0, 1) if with_labels else (0,))
    boxes, labels = inputs[0], inputs.get(1)
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
    return uploaded if with_labels else uploaded[0]


@gpu_kernel("random_bbox_crop")
def random_bbox_crop_kernel(batch):
    """The CPU kernel's search per sample, on the host from the sample's own stream, uploaded."""
    host = _host_inputs(batch, range(batch.num_inputs()))
    inputs = [host[k] for k in range(batch.num_inputs())]
    results = [per_sample(i, bbox_crop_sample, [inp[i] for inp in inputs], args, batch.rng(i))
               for i, args in enumerate(batch.sample_args())]
    return _upload_outputs(results)


@gpu_kernel("ssd_random_crop")
def ssd_random_crop_kernel(batch):
    """Each sample's window chosen on the host from its own stream (the CPU's), the image cut on the GPU."""
    cp = cupy()
    images = batch.samples(0)
    host = _host_inputs(batch, (1, 2))
    boxes, labels = host[1], host[2]
    out_images, kept_boxes, kept_labels = [], [], []
    for i, args in enumerate(batch.sample_args()):
        image = images[i]
        pixels, kept, classes = per_sample(i, ssd_crop_sample, tuple(image.shape), boxes[i], labels[i],
                                           args["num_attempts"], batch.rng(i))
        if pixels is not None:
            x0, y0, x1, y1 = pixels
            image = image[y0:y1, x0:x1]
        out_images.append(cp.ascontiguousarray(image))
        kept_boxes.append(kept)
        kept_labels.append(classes)
    if not out_images:
        return (None, []), (None, []), (None, [])
    out_boxes, out_labels = _upload_outputs(list(zip(kept_boxes, kept_labels, strict=True)))
    return (None, out_images), out_boxes, out_labels


@gpu_kernel(fuses=("bb_flip", "box_encoder"))
class FlippedBoxEncoder(BoxEncoderKernel):
    """bb_flip read by box_encoder alone (the SSD pipelines): the boxes are flipped inside the encoder's step, one
    GPU-stage step less per batch; the same bits as the two ops."""

    def __init__(self, setup):
        super().__init__(setup)
        self.ltrb = bool(setup.parts[0]["ltrb"])

    def run(self, batch):
        boxes, counts = self.boxes(batch, "bb_flip")
        return self.encode(batch, _flip_rows(boxes, counts, batch.sample_args(0), self.ltrb), counts)
