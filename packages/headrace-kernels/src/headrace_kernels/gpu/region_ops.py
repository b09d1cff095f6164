"""GPU erase and paste (kernels/region.cu): the CPU kernels' regions, canvases and fill values (converted to the
data's type on the host), applied to the whole batch by element copies of the data's size (any element type)."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.cpu.axes import resolve_axes
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.region_ops import fill_channel_axis, paste_canvas
from headrace_kernels.gpu.packing import BITS, Outputs, blocks, contiguous_samples, per_sample, upload
from headrace_kernels.gpu.runtime import cupy, module
from headrace_kernels.registry import SampleFailureError, gpu_kernel

MAXD = 8
ERASE = np.dtype([("in", "<u8"), ("out", "<u8"), ("size", "<i8"), ("ndim", "<i4"), ("shape", "<i4", (MAXD,)),
                  ("box_first", "<i4"), ("box_count", "<i4"), ("fill_first", "<i4"), ("fill_count", "<i4"),
                  ("channel_axis", "<i4")], align=True)
PASTE = np.dtype([("in", "<u8"), ("out", "<u8"), ("h", "<i4"), ("w", "<i4"), ("channels", "<i4"), ("out_h", "<i4"),
                  ("out_w", "<i4"), ("top", "<i4"), ("left", "<i4"), ("fill_first", "<i4")], align=True)
assert ERASE.itemsize == 80 and PASTE.itemsize == 48, (ERASE.itemsize, PASTE.itemsize)
_EXPRESSIONS = tuple(f"erase_regions<{t}>" for t in BITS.values()) + tuple(f"paste_canvas<{t}>" for t in BITS.values())


def _bits(values: np.ndarray) -> np.ndarray:
    """Values of the data's type, as the unsigned type of its size (the kernels copy bits)."""
    values = np.ascontiguousarray(values)
    return values.view(np.dtype(f"u{values.dtype.itemsize}"))


def _erase_plan(shape: tuple[int, ...], args: dict) -> tuple[list[list[int]], np.ndarray, int]:
    """The boxes ([begin, end) per dimension), the fill values and their axis for one sample: the CPU rule."""
    ndim = len(shape)
    axes = resolve_axes(args["axes"], args["axis_names"] if args["axes"] is None else None, ndim,
                        default=resolve_axes(None, "HW", ndim) if ndim >= 2 else [0])
    anchor, extent = list(args["anchor"]), list(args["shape"])
    n = len(axes)
    if not extent:
        raise ValueError("give the region's `shape`")
    if not anchor:
        anchor = [0.0] * len(extent)
    if len(extent) % n or len(anchor) != len(extent):
        raise ValueError(f"anchor ({len(anchor)} values) and shape ({len(extent)} values) must both give "
                         f"{n} values (one per axis of {axes}) for each region")
    norm_anchor = args["normalized"] or args["normalized_anchor"]
    norm_shape = args["normalized"] or args["normalized_shape"]
    boxes = []
    for region in range(len(extent) // n):
        box = []
        for d in range(ndim):
            box += [0, shape[d]]
        for k, axis in enumerate(axes):
            size_of_axis = shape[axis]
            start, size = anchor[region * n + k], extent[region * n + k]
            start = start * size_of_axis if norm_anchor else start
            size = size * size_of_axis if norm_shape else size
            if args["centered_anchor"]:
                start -= size / 2
            begin, end = math.floor(start), math.floor(start + size)
            box[2 * axis] = min(max(begin, 0), size_of_axis)
            box[2 * axis + 1] = min(max(end, 0), size_of_axis)
        boxes.append(box)
    fill = np.asarray(args["fill_value"], dtype=np.float64).ravel()
    channel_axis = 0 if fill.size == 1 else fill_channel_axis(shape, axes, fill.size)
    return boxes, fill, channel_axis


def erase(samples: list, args_list: list[dict]):
    """erase of every sample: its own regions and fill; returns (dense or None, list)."""
    cp = cupy()
    data, dtype = contiguous_samples(samples, "erase", convert=False)
    n = len(data)
    rec = np.zeros(n, ERASE)
    boxes: list[int] = []
    fills: list[np.ndarray] = []
    box_count = fill_count = 0
    for i, (sample, args) in enumerate(zip(data, args_list, strict=True)):
        if not 1 <= sample.ndim <= MAXD:
            raise SampleFailureError(i, f"erase on the GPU takes samples of 1 to {MAXD} dimensions, got shape "
                                        f"{tuple(sample.shape)}")
        sample_boxes, fill, axis = per_sample(i, _erase_plan, tuple(sample.shape), args)
        fill = per_sample(i, saturate_cast, fill, dtype)
        rec["ndim"][i], rec["size"][i] = sample.ndim, sample.size
        rec["shape"][i, :sample.ndim] = sample.shape
        rec["box_first"][i], rec["box_count"][i] = box_count, len(sample_boxes)
        rec["fill_first"][i], rec["fill_count"][i], rec["channel_axis"][i] = fill_count, fill.size, axis
        for box in sample_boxes:
            boxes += box + [0] * (2 * (MAXD - sample.ndim))  # fixed stride: the kernel indexes with 2 * ndim
        box_count, fill_count = box_count + len(sample_boxes), fill_count + fill.size
        fills.append(fill)
    outputs = Outputs([sample.shape for sample in data], dtype)
    rec["in"] = [sample.data.ptr for sample in data]
    rec["out"] = outputs.pointers
    if n and rec["size"].max() > 0:
        element = BITS[dtype.itemsize]
        box_array = cp.asarray(np.asarray(boxes or [0], dtype=np.int32))
        fill_array = cp.asarray(_bits(np.concatenate(fills).astype(dtype)))
        kernel = module("region.cu", _EXPRESSIONS).get_function(f"erase_regions<{element}>")
        kernel((min(blocks(rec["size"].max(), 256), 4096), n), (256,), (upload(rec), box_array, fill_array))
    return outputs.result()


def paste(samples: list, args_list: list[dict]):
    """paste of every sample on its own canvas; returns (dense or None, list)."""
    cp = cupy()
    data, dtype = contiguous_samples(samples, "paste", convert=False)
    n = len(data)
    rec = np.zeros(n, PASTE)
    fills, shapes = [], []
    fill_count = 0
    for i, (image, args) in enumerate(zip(data, args_list, strict=True)):
        out_h, out_w, top, left, fill = per_sample(i, paste_canvas, tuple(image.shape), args)
        channels = image.shape[2]
        rec[i] = (0, 0, image.shape[0], image.shape[1], channels, out_h, out_w, top, left, fill_count)
        fill_count += channels
        fills.append(saturate_cast(fill, dtype))
        shapes.append((out_h, out_w, channels))
    outputs = Outputs(shapes, dtype)
    rec["in"] = [image.data.ptr for image in data]
    rec["out"] = outputs.pointers
    row = rec["out_w"].astype(np.int64) * rec["channels"]
    if n and (row * rec["out_h"]).max() > 0:
        fill_array = cp.asarray(_bits(np.concatenate(fills).astype(dtype)))
        kernel = module("region.cu", _EXPRESSIONS).get_function(f"paste_canvas<{BITS[dtype.itemsize]}>")
        kernel((blocks(row.max(), 64), blocks(rec["out_h"].max(), 4), n), (64, 4, 1), (upload(rec), fill_array))
    return outputs.result()


@gpu_kernel("erase")
def erase_kernel(batch):
    return erase(batch.samples(), batch.sample_args())


@gpu_kernel("paste")
def paste_kernel(batch):
    return paste(batch.samples(), batch.sample_args())
