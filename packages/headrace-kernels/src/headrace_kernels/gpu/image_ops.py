"""GPU resize, crop, flip, crop_mirror_normalize, random_resized_crop and the fused resize + crop_mirror_normalize.

Each is one pass of `image_store` in kernels/image.cu over a whole batch (after `resample_vertical` when a sample
is resampled). The host fills one Sample record per sample with the CPU kernels' geometry (headrace_kernels.windows)
and the CPU's own resampling tap tables (`geometry_ops.resample_taps`), normalization coefficients and fill values,
and the kernels sum in the CPU's order without FMA: CPU and GPU give the same bits."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.geometry_ops import (
    INTERP_GAUSSIAN,
    INTERP_LINEAR,
    INTERP_TRIANGULAR,
    interp_filters,
    normalize_coefficients,
    normalize_fill,
    plain_resize,
    resample_taps,
    resize_region,
)
from headrace_kernels.dtypes import CTYPES, numpy_dtype
from headrace_kernels.gpu.color_ops import MODE_MATRIX, colour_maps
from headrace_kernels.gpu.memory import stream_scratch
from headrace_kernels.gpu.ragged import PackedSamples, direct_samples
from headrace_kernels.gpu.runtime import cupy, function
from headrace_kernels.gpu.staging import pinned_bytes, send_bytes
from headrace_kernels.gpu.tap_tables import AXIS, DeviceTables, axis_records, triangle_axes
from headrace_kernels.registry import SampleFailureError, gpu_kernel
from headrace_kernels.windows import crop_size, fixed_resize_size, random_crop_window, resize_plans, round_half_up

MODE_COPY, MODE_TAPS = 0, 1
MAXC = 4
MAX_COLOUR = 2
"""The most colour ops (hsv, color_twist, brightness_contrast) a fused chain applies between its resize and its
crop_mirror_normalize."""
FLIP_X, FLIP_Y = 1, 2  # Sample.src_flip bits

SAMPLE = np.dtype([("in", "<u8"), ("out", "<u8"), ("tmp", "<u8"), ("row_idx", "<u8"), ("row_w", "<u8"),
                   ("col_idx", "<u8"), ("col_w", "<u8"), ("in_h", "<i4"), ("in_w", "<i4"), ("in_pitch", "<i4"),
                   ("win_y", "<i4"), ("win_x", "<i4"), ("rs_h", "<i4"), ("rs_w", "<i4"), ("ty", "<i4"),
                   ("tx", "<i4"), ("col_lo", "<i4"), ("col_n", "<i4"), ("crop_y", "<i4"), ("crop_x", "<i4"),
                   ("out_h", "<i4"), ("out_w", "<i4"), ("mode", "<i4"), ("round_u8", "<i4"), ("mirror_x", "<i4"),
                   ("mirror_y", "<i4"), ("mean", "<f4", (MAXC,)), ("mul", "<f4", (MAXC,)),
                   ("fill", "<f4", (MAXC + 1,)), ("shift", "<f4"), ("src_flip", "<i4"),
                   ("c_mode", "<i4", (MAX_COLOUR,)), ("c_type", "<i4", (MAX_COLOUR,)),
                   ("c_m", "<f4", (MAX_COLOUR, 9)), ("c_scale", "<f4", (MAX_COLOUR,)),
                   ("c_offset", "<f4", (MAX_COLOUR,)), ("n_colour", "<i4"), ("pad_", "<i4")])
assert SAMPLE.itemsize == 304, SAMPLE.itemsize  # kernels/image.cu's Sample
# kernels/image.cu's TYPE_*: the type a colour stage stores, which the next stage reads back
_STORED_TYPES = {np.dtype(name): code for code, names in enumerate(
    (("float32", "float64"), ("uint8",), ("int8",), ("uint16",), ("int16",), ("int32",), ("float16",)))
    for name in names}

_IN_TYPES = ("uint8", "float32")
_IN_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32))
_OUT_TYPES = ("uint8", "int8", "int16", "int32", "float32", "float16")
_OUT_CTYPES = {np.dtype(name): CTYPES[name] for name in _OUT_TYPES}  # by dtype: `.name` is a slow Python property
_EXPRESSIONS = tuple(f"image_store<{CTYPES[i]}, {CTYPES[o]}>" for i in _IN_TYPES for o in _OUT_TYPES) + tuple(
    f"resample_vertical<{CTYPES[i]}>" for i in _IN_TYPES) + ("triangle_tables",)


def _kernel(name: str):
    return function("image.cu", name, _EXPRESSIONS)


def as_hwc(image, index: int, op: str):
    """An HWC device view with interleaved channels (pixel stride = channels), row pitch in elements; uint8 and
    float32 as they are, other types converted to float32."""
    cp = cupy()
    if image.ndim == 2:
        image = image[:, :, None]
    if image.ndim != 3:
        raise SampleFailureError(index, f"{op} expects HWC images (3 dims), got shape {tuple(image.shape)}")
    if image.shape[2] > MAXC:
        raise SampleFailureError(index, f"{op} on the GPU takes at most {MAXC} channels, got {image.shape[2]}")
    if image.dtype not in _IN_DTYPES:  # dtype comparison: `.name` is a slow Python property
        image = image.astype(cp.float32)
    item = image.itemsize
    channels = image.shape[2]
    if image.strides[2] != item or image.strides[1] != channels * item or image.strides[0] % item or \
            image.strides[0] < image.shape[1] * channels * item:
        image = cp.ascontiguousarray(image)
    return image


class Batch:
    """The Sample records of one launch, the tap tables they point to, and the device memory they point into.
    `dtype` is the samples' own element type (the kernels read uint8 or float32; other types come as float32)."""

    def __init__(self, inputs: list, channels: int, in_dtype: str, dtype: np.dtype, packed: tuple | None = None,
                 rec: np.ndarray | None = None):
        self.inputs, self.channels, self.in_dtype, self.dtype = inputs, channels, in_dtype, dtype
        self.tables: tuple | DeviceTables | None = None  # resampled samples' taps: see set_resizes
        self.placed: tuple | None = None  # outputs, rows, device records and kernel launches (`place`)
        self.records_sent = False
        self.shared_records = False  # records kept for a batch of shapes (Placement.keep): never written ...
        self.in_base = 0  # ... and their `in` is an offset from this address (the launches pass it)
        self.table_memory = None  # tables kept elsewhere on the device that the records point at (plan_cache)
        if rec is not None:  # records made already (of_records)
            self.rec = rec
            return
        self.rec = np.zeros(len(inputs), SAMPLE)
        if packed is not None:  # (addresses, shapes (n, 3)[, dtype]) of packed HWC images: no Python per image
            addresses, shapes = packed[:2]
            self.rec["in"], self.rec["in_pitch"] = addresses, shapes[:, 1] * shapes[:, 2]
            self.rec["in_h"], self.rec["in_w"] = shapes[:, 0], shapes[:, 1]
        else:
            self.rec["in"] = [image.data.ptr for image in inputs]
            self.rec["in_pitch"] = [image.strides[0] // image.itemsize for image in inputs]
            self.rec["in_h"] = [image.shape[0] for image in inputs]
            self.rec["in_w"] = [image.shape[1] for image in inputs]
        self.rec["mul"] = 1.0

    @classmethod
    def of_records(cls, inputs: list, channels: int, rec: np.ndarray) -> Batch:
        """A batch of packed HWC uint8 images whose records are made already (plan_cache)."""
        return cls(inputs, channels, "uint8", np.dtype(np.uint8), rec=rec)


def gather(images, op: str, packed: tuple | None = None):
    """Check the inputs of an image op: HWC, one channel count and one element type for the whole batch.
    `packed` = (addresses, shapes[, dtype]) says that every image is packed HWC there, of `dtype` (uint8 or float32;
    uint8 when not given: a decoder's batch)."""
    if packed is not None:
        channels = np.unique(packed[1][:, 2])
        dtype = np.dtype(packed[2]) if len(packed) > 2 else np.dtype(np.uint8)
        if channels.size == 1 and 0 < channels[0] <= MAXC:
            return Batch(list(images), int(channels[0]), dtype.name, dtype, packed)
    dtypes = {np.dtype(image.dtype) for image in images}
    inputs = [as_hwc(image, i, op) for i, image in enumerate(images)]
    channels = {image.shape[2] for image in inputs}
    types = {image.dtype for image in inputs}
    if len(channels) > 1 or len(types) > 1 or len(dtypes) > 1:
        raise SampleFailureError(0, f"{op} on the GPU needs one channel count and one element type per batch, got "
                               f"channels {sorted(channels)} and types {sorted(str(t) for t in dtypes)}")
    return Batch(inputs, channels.pop(), np.dtype(types.pop()).name, dtypes.pop())


_TABLE_FIELDS = ("row_idx", "row_w", "col_idx", "col_w")


def _aligned(nbytes: int) -> int:
    return -(-nbytes // 8) * 8


def tables_to_device(batch: Batch, head: int = 0) -> tuple:
    """A device buffer of `head` bytes (left to the caller) followed by the batch's tap tables, each 8-byte aligned;
    the host bytes (pinned) to copy into it (the tables written, or the axes the device makes them of); and the launches
    that make the device-made tables, to run right after the copy (`send_tables`). The resampled samples' records
    point at the tables."""
    if isinstance(batch.tables, DeviceTables):
        return _device_made_tables(batch, batch.tables, head)
    tables = batch.tables[1] if batch.tables is not None else ()
    offsets, at = [], head
    for table in tables:
        offsets.append(at)
        at += _aligned(table.nbytes)
    device = cupy().empty(max(at, 8), np.uint8)
    host = pinned_bytes(at)
    if tables:
        which, _, (row_start, col_start) = batch.tables
        for field, table, offset, start in zip(_TABLE_FIELDS, tables, offsets,
                                               (row_start, row_start, col_start, col_start), strict=True):
            raw = np.ascontiguousarray(table).view(np.uint8)
            host[offset:offset + raw.size] = raw
            batch.rec[field][which] = np.uint64(device.data.ptr + offset) + start.astype(np.uint64) * np.uint64(4)
    return device, host, []


def _device_made_tables(batch: Batch, tables: DeviceTables, head: int) -> tuple:
    """tables_to_device for tables the device makes: the buffer holds `head`, the axes' records and the tables;
    only the first two are copied."""
    rows, cols = tables.rows, tables.cols
    axes_at = head
    table_at = axes_at + (len(rows.in_sizes) + len(cols.in_sizes)) * AXIS.itemsize
    offsets = []
    for axes in (rows, cols):
        offsets.append((table_at, table_at + _aligned(axes.entries * 4)))
        table_at += 2 * _aligned(axes.entries * 4)
    device = cupy().empty(max(table_at, 8), np.uint8)
    base = device.data.ptr
    records = np.concatenate([axis_records(axes, base + index_at, base + weight_at)
                              for axes, (index_at, weight_at) in zip((rows, cols), offsets, strict=True)])
    host = pinned_bytes(axes_at + records.nbytes)
    host[axes_at:] = records.view(np.uint8)
    which = tables.which
    for (index_field, weight_field), axes, (index_at, weight_at) in zip(
            (("row_idx", "row_w"), ("col_idx", "col_w")), (rows, cols), offsets, strict=True):
        start = axes.starts.astype(np.uint64) * np.uint64(4)
        batch.rec[index_field][which] = np.uint64(base + index_at) + start
        batch.rec[weight_field][which] = np.uint64(base + weight_at) + start
    count = len(records)
    longest = int(max(rows.out_sizes.max(), cols.out_sizes.max()))
    fill = (_kernel("triangle_tables"), (-(-longest // 128), min(count, 65535), 1), (128, 1, 1),
            (device[axes_at:], np.int32(count)))
    return device, host, [fill]


def send_tables(device, host: np.ndarray, fills: list) -> None:
    """Copy `host` (pinned) to the start of `device` (one copy, on the current stream; the host does not wait for
    the stream to get there, which may be behind a decode) and launch the table fills after it."""
    send_bytes(device, host)
    for kernel, grid, block, arguments in fills:
        kernel(grid, block, arguments)


RESIZE_ROWS_BYTES = 64 << 20
"""The most bytes of vertical-pass rows (float32) that one launch of a batch's resampling writes: a larger batch
is resampled in consecutive chunks of samples that reuse one block, so the block does not grow with the batch (a
batch of 256 validation images needs ~380 MiB of rows at once)."""


def row_chunks(sizes: np.ndarray, limit: int) -> tuple[list[int], np.ndarray]:
    """Consecutive chunks of samples whose `sizes` (bytes) add up to at most `limit` each (a larger sample alone):
    (the chunks' bounds, from 0 to len(sizes); each sample's offset inside its chunk)."""
    if sizes.sum() <= limit:  # the usual case: one chunk, no loop over the samples
        return [0, len(sizes)], np.cumsum(sizes) - sizes
    bounds, offsets, used = [0], np.zeros(len(sizes), np.int64), 0
    for i, size in enumerate(sizes.tolist()):
        if used and used + size > limit:
            bounds.append(i)
            used = 0
        offsets[i] = used
        used += size
    bounds.append(len(sizes))
    return bounds, offsets


_NO_BASE = np.uint64(0)
"""A launch's in_base, out_base and tmp_base (kernels/image.cu) where its records hold addresses."""


class KeptRecords(NamedTuple):
    """A recurring batch of shapes' records on the device (`Placement.keep`): the host copy (`in`: each input's
    offset from the first), the device buffer and each launch's view of it."""

    rec: np.ndarray
    device: Any
    views: list


class Placement:
    """What `place` derives from a batch's output sizes alone: the outputs' offsets and shapes, the vertical pass's
    row blocks and the launches' grids. The plan cache keeps one per batch of image shapes, and where such a batch
    recurs its records on the device (`keep`), so that a later batch of those shapes only allocates its outputs
    (`apply_kept`)."""

    def __init__(self, batch: Batch, out_dtype: np.dtype, out_channels: int, chw: bool, normalize: bool):
        rec, channels, n = batch.rec, batch.channels, len(batch.inputs)
        out_dtype = self.out_dtype = np.dtype(out_dtype)
        out_ctype = _OUT_CTYPES.get(out_dtype)
        if out_ctype is None:
            raise SampleFailureError(0, f"output type {out_dtype} is not supported by the GPU image kernels")
        heights, widths = rec["out_h"].astype(np.int64), rec["out_w"].astype(np.int64)
        sizes = heights * widths * out_channels
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.offsets.flags.writeable = False  # every batch placed by this shares it (PackedSamples' starts)
        self.total = int(self.offsets[-1])
        self.out_at = (self.offsets[:-1] * out_dtype.itemsize).astype(np.uint64)  # bytes into the output buffer
        self.shapes = [((out_channels, h, w) if chw else (h, w, out_channels))
                       for h, w in zip(heights.tolist(), widths.tolist(), strict=True)]
        self.resampled = rec["mode"] == MODE_TAPS
        self.rows_size, self.rows_at = 0, None  # the vertical pass's row block, and each sample's place in it
        bounds, row_sizes = [0, n], np.zeros(n, np.int64)
        if self.resampled.any():
            row_sizes = np.where(self.resampled, rec["rs_h"].astype(np.int64) * rec["col_n"] * channels * 4, 0)
            bounds, row_offsets = row_chunks(row_sizes, RESIZE_ROWS_BYTES)
            self.rows_size = int((row_offsets + row_sizes).max())
            self.rows_at = row_offsets.astype(np.uint64)
        self.head = _aligned(rec.nbytes)  # the records, then the tap tables, in one device buffer
        in_type = CTYPES[batch.in_dtype]
        # (kernel, grid, block, the chunk's first record's byte offset, the other arguments, the bases it takes)
        self.launches = []
        for first, last in zip(bounds[:-1], bounds[1:], strict=True):  # a chunk's vertical pass, then its store pass
            part = slice(first, last)
            resampled_part = self.resampled[part]
            at = first * SAMPLE.itemsize
            if row_sizes[part].sum() > 0:
                width = int((rec["col_n"][part][resampled_part].astype(np.int64) * channels).max())
                grid = (-(-width // 128), min(int(rec["rs_h"][part][resampled_part].max()), 65535), last - first)
                self.launches.append((_kernel(f"resample_vertical<{in_type}>"), grid, (128, 1, 1), at,
                                      (np.int32(channels),), ("in", "tmp")))
            if sizes[part].sum() > 0:  # no launch for a chunk of empty outputs (its grid would be empty)
                grid = (-(-int(widths[part].max()) // 32), -(-int(heights[part].max()) // 8), last - first)
                self.launches.append((_kernel(f"image_store<{in_type}, {out_ctype}>"), grid, (32, 8, 1), at,
                                      (np.int32(channels), np.int32(out_channels), np.int32(chw),
                                       np.int32(normalize)), ("in", "out", "tmp")))
        self.kept: KeptRecords | None = None  # `keep`: the records on the device, as offsets from the buffers

    def apply(self, batch: Batch) -> None:
        """Place `batch` (whose records give the sizes this was made of): allocate its outputs (one buffer) and
        rows, write their addresses into its records, send the records and tap tables to the device in one copy."""
        rec = batch.rec
        flat, rows = self._buffers()
        rec["out"] = flat.data.ptr + self.out_at
        if rows is not None:
            rec["tmp"] = np.where(self.resampled, rows.data.ptr + self.rows_at, 0)
        device, host, fills = tables_to_device(batch, head=self.head)
        host[:rec.nbytes] = rec.view(np.uint8)
        send_tables(device, host, fills)
        launches = [(kernel, grid, block, (device[at:] if at else device, *arguments, *(_NO_BASE,) * len(bases)))
                    for kernel, grid, block, at, arguments, bases in self.launches]
        batch.placed = (flat, self.offsets, list(self.shapes), rows, device, launches)
        batch.records_sent = True

    def keep(self, batch: Batch) -> None:
        """Keep the records of `batch` (placed by `apply`, its tap tables kept elsewhere on the device) on the
        device, its input, output and row addresses as offsets from each buffer's start: a later batch whose
        inputs lie at the same offsets in one buffer then uploads nothing (`apply_kept`)."""
        rec = batch.rec.copy()
        inputs = rec["in"].copy()
        rec["in"] = inputs - inputs[0]
        rec["out"] = self.out_at
        rec["tmp"] = np.where(self.resampled, self.rows_at, 0) if self.rows_size else 0
        device = cupy().empty(max(rec.nbytes, 8), np.uint8)
        host = pinned_bytes(rec.nbytes)
        host[:] = rec.view(np.uint8)
        send_bytes(device, host)
        rec.flags.writeable = False  # batches share it: `adopt_inputs` gives a batch a copy instead of writing it
        self.kept = KeptRecords(rec, device, [device[at:] if at else device for _, _, _, at, _, _ in self.launches])

    def _buffers(self) -> tuple[Any, Any]:
        """A batch's output buffer and its vertical pass's row block (None where no sample is resampled)."""
        cp = cupy()
        rows = cp.ndarray(self.rows_size, cp.uint8, stream_scratch(self.rows_size, "resize rows")) \
            if self.rows_size else None
        return cp.empty(self.total, dtype=self.out_dtype), rows

    def apply_kept(self, inputs: list, addresses: np.ndarray, channels: int) -> Batch | None:
        """A placed batch of packed uint8 `inputs` at `addresses` on the kept records (`keep`): its outputs and rows
        allocated, the launches given their start addresses; None where the inputs lie otherwise than the kept
        batch's (then `apply` a batch of records as usual)."""
        kept = self.kept
        if kept is None:  # `keep` never ran, or failed
            return None
        addresses = np.asarray(addresses, np.uint64)
        base = int(addresses[0])
        if len(addresses) > 1 and not np.array_equal(addresses - np.uint64(base), kept.rec["in"]):
            return None
        batch = Batch.of_records(list(inputs), channels, kept.rec)
        batch.shared_records = True
        flat, rows = self._buffers()
        batch.in_base = base
        starts = {"in": np.uint64(base), "out": np.uint64(flat.data.ptr),
                  "tmp": np.uint64(rows.data.ptr if rows is not None else 0)}
        launches = [(kernel, grid, block, (records, *arguments, *(starts[name] for name in bases)))
                    for (kernel, grid, block, _, arguments, bases), records in zip(self.launches, kept.views,
                                                                                   strict=True)]
        batch.placed = (flat, self.offsets, list(self.shapes), rows, kept.device, launches)
        batch.records_sent = True
        return batch


def _own_records(batch: Batch) -> None:
    """Give a batch placed on kept records (`Placement.apply_kept`) a copy of them in a device buffer of its own,
    which `launch` fills, so that `adopt_inputs` can write into it; the launches keep their bases. The kept records
    are never written."""
    flat, offsets, shapes, rows, kept_device, launches = batch.placed
    device = cupy().empty(kept_device.size, np.uint8)
    own = []
    for kernel, grid, block, (records, *arguments) in launches:
        at = records.data.ptr - kept_device.data.ptr
        own.append((kernel, grid, block, (device[at:] if at else device, *arguments)))
    batch.rec, batch.placed = batch.rec.copy(), (flat, offsets, shapes, rows, device, own)
    batch.shared_records = batch.records_sent = False


def place(batch: Batch, out_dtype: np.dtype, out_channels: int, chw: bool, normalize: bool) -> None:
    """Everything of a launch but the kernels (`Placement`): allocate the outputs and the vertical pass's rows,
    write their addresses into the records, send the records and the tap tables to the device in one copy, and
    set up the kernels' grids and arguments. The GPU stage does it ahead (in the look-ahead, or while the decode
    runs), so that `launch` only launches."""
    Placement(batch, out_dtype, out_channels, chw, normalize).apply(batch)


def launch(batch: Batch, out_dtype: np.dtype, out_channels: int, chw: bool, normalize: bool,
           dense_shape_ok: bool = True):
    """Run the vertical pass (if any sample resamples) and the store pass, after `place` (done here if nobody did
    it ahead). Returns (dense or None, list): a dense (N, ...) array when every sample has the same shape."""
    if batch.placed is None:
        place(batch, out_dtype, out_channels, chw, normalize)
    flat, offsets, shapes, tmp, device, launches = batch.placed
    rec, n = batch.rec, len(batch.inputs)
    if not batch.records_sent:  # adopt_inputs changed where an input lies
        device[:rec.nbytes].set(rec.view(np.uint8))
        batch.records_sent = True
    for kernel, grid, block, arguments in launches:
        kernel(grid, block, arguments)
    # keep what the kernels read alive until the stream has passed them (the stage holds the batch one step)
    batch.keep = (device, tmp, batch.table_memory)
    if dense_shape_ok and n and len(set(shapes)) == 1:
        return flat.reshape((n, *shapes[0])), None
    return None, PackedSamples(flat, offsets[:-1], shapes)


def _crop_fill(args: dict, channels: int, extra: int, in_dtype: np.dtype | None, out_dtype: np.dtype) -> np.ndarray:
    """fill_values as the output values the CPU kernels write: for crop, first in the input's type (numpy's
    astype), then saturated into the output type; for crop_mirror_normalize (`in_dtype` None), the CPU kernel's
    `normalize_fill` saturated into the output type."""
    if in_dtype is None:
        try:
            return saturate_cast(normalize_fill(args, channels, extra), out_dtype).astype(np.float32)
        except ValueError as exc:
            raise SampleFailureError(0, str(exc)) from exc
    fill = np.asarray(args["fill_values"], dtype=np.float32).ravel()
    total = channels + extra
    if fill.size == 1:
        fill = np.full(total, fill[0], dtype=np.float32)
    elif fill.size == channels and extra:
        fill = np.concatenate([fill, np.zeros(extra, np.float32)])
    elif fill.size != total:
        raise SampleFailureError(0, f"fill_values has {fill.size} values; the output has {total} channels")
    if in_dtype is not None:
        with np.errstate(invalid="ignore", over="ignore"):
            fill = fill.astype(in_dtype)
    return saturate_cast(fill, out_dtype).astype(np.float32)


_CROP_KEYS = ("crop", "crop_h", "crop_w", "crop_pos_x", "crop_pos_y", "out_of_bounds_policy", "fill_values",
              "rounding")


def _anchor(pos: np.ndarray, extent: np.ndarray, crop: np.ndarray) -> np.ndarray:
    """windows.crop_anchor for a whole batch: pos * (extent - crop), rounded half away from zero."""
    offset = pos * (extent - crop)
    return np.where(offset >= 0, np.floor(offset + 0.5), -np.floor(-offset + 0.5)).astype(np.int64)


def set_crops(batch: Batch, args_list: list[dict], heights: np.ndarray, widths: np.ndarray, extra: int,
              in_dtype: np.dtype | None, out_dtype: np.dtype) -> None:
    """The crop windows of every sample in images of (heights, widths): the CPU kernels' `crop_window` rule
    (crop_size, window_anchor with float32 positions, out_of_bounds_policy), computed for the whole batch at once,
    and the fill values."""
    rec, n = batch.rec, len(args_list)
    first = args_list[0]  # list.count compares in C, identity first: per-sample copies share their literals
    uniform = len(set(map(id, args_list))) == 1 or all(  # one arguments dict for all (no argument inputs)
        [a.get(k) for a in args_list].count(first.get(k)) == n for k in _CROP_KEYS)
    if uniform:
        args = args_list[0]
        crop = args.get("crop")
        want_h, want_w = (crop[0], crop[1]) if crop else (args.get("crop_h") or 0, args.get("crop_w") or 0)
        crop_h = np.full(n, round_half_up(want_h), np.int64) if want_h else heights.astype(np.int64)
        crop_w = np.full(n, round_half_up(want_w), np.int64) if want_w else widths.astype(np.int64)
        pos_y, pos_x = (np.full(n, np.float32(args[k]), np.float64) for k in ("crop_pos_y", "crop_pos_x"))
    else:
        sizes = np.array([crop_size(a, int(h), int(w)) for a, h, w in zip(args_list, heights, widths, strict=True)],
                         dtype=np.int64).reshape(n, 2)
        crop_h, crop_w = sizes[:, 0], sizes[:, 1]
        pos_y = np.array([float(a["crop_pos_y"]) for a in args_list], np.float32).astype(np.float64)
        pos_x = np.array([float(a["crop_pos_x"]) for a in args_list], np.float32).astype(np.float64)
    y, x = _anchor(pos_y, heights, crop_h), _anchor(pos_x, widths, crop_w)
    truncate = np.array([a.get("rounding", "round") == "truncate" for a in (args_list[:1] if uniform else args_list)])
    if truncate.any():  # the CPU's window_anchor: pos * (extent - crop) truncated toward zero
        y = np.where(truncate, np.trunc(pos_y * (heights - crop_h)), y).astype(np.int64)
        x = np.where(truncate, np.trunc(pos_x * (widths - crop_w)), x).astype(np.int64)
    inside = (y >= 0) & (x >= 0) & (y + crop_h <= heights) & (x + crop_w <= widths)
    if not inside.all():
        policies = np.array([a["out_of_bounds_policy"] for a in args_list])
        bad = np.nonzero(~inside & (policies == "error"))[0]
        if bad.size:
            i = int(bad[0])
            raise SampleFailureError(i, f"crop window {crop_h[i]}x{crop_w[i]} at ({y[i]}, {x[i]}) does not fit in the "
                                        f"{heights[i]}x{widths[i]} image (set out_of_bounds_policy='pad' or "
                                        "'trim_to_shape')")
        trim = ~inside & (policies == "trim_to_shape")
        if trim.any():
            y0, x0 = np.maximum(y, 0), np.maximum(x, 0)
            crop_h = np.where(trim, np.minimum(y + crop_h, heights) - y0, crop_h)
            crop_w = np.where(trim, np.minimum(x + crop_w, widths) - x0, crop_w)
            y, x = np.where(trim, y0, y), np.where(trim, x0, x)
    rec["crop_y"], rec["crop_x"], rec["out_h"], rec["out_w"] = y, x, crop_h, crop_w
    channels = batch.channels
    if uniform:
        rec["fill"][:, :channels + extra] = _crop_fill(args_list[0], channels, extra, in_dtype, out_dtype)
    else:
        for i, args in enumerate(args_list):
            rec["fill"][i, :channels + extra] = _crop_fill(args, channels, extra, in_dtype, out_dtype)


def set_resizes(batch: Batch, args_list: list[dict], work_dtype: np.dtype, windows: np.ndarray | None = None,
                out_sizes: np.ndarray | None = None) -> None:
    """Resize every sample: by `resize_plan` of its arguments (output size and sub-pixel source region), or the
    integer `windows` (n, 4) of (y, x, h, w) onto `out_sizes` (n, 2), as the CPU resamples a crop of its own.
    The tap tables are the CPU's (`resample_taps`) for an image of `work_dtype`, the type the CPU kernel resamples
    in; the common triangle filter's are made on the device (`tap_tables`), the others on the host."""
    rec, n = batch.rec, len(args_list)
    heights, widths = rec["in_h"].astype(np.int64), rec["in_w"].astype(np.int64)
    antialias = bool(args_list[0]["antialias"])
    same = all(a is args_list[0] for a in args_list)
    filters = [interp_filters(args_list[0])] * n if same else [interp_filters(a) for a in args_list]
    fixed = fixed_resize_size(args_list[0]) if windows is None and same and \
        args_list[0].get("roi_start") is None else None
    if fixed is not None:  # every sample to the same whole-pixel size, from its whole image
        out = np.tile(np.asarray(fixed, np.int64), (n, 1))
        regions = np.stack([np.zeros(n), np.zeros(n), heights, widths], axis=1).astype(np.float64)
        extent_h, extent_w, shift_y, shift_x = heights, widths, np.zeros(n, np.int64), np.zeros(n, np.int64)
    elif windows is None:
        out, regions = _resize_regions(args_list, heights, widths, same)
        extent_h, extent_w, shift_y, shift_x = heights, widths, np.zeros(n, np.int64), np.zeros(n, np.int64)
    else:
        out = np.asarray(out_sizes, np.int64).reshape(n, 2)
        extent_h, extent_w = windows[:, 2].astype(np.int64), windows[:, 3].astype(np.int64)
        shift_y, shift_x = windows[:, 0].astype(np.int64), windows[:, 1].astype(np.int64)
        regions = np.stack([np.zeros(n), np.zeros(n), extent_h, extent_w], axis=1).astype(np.float64)
        rec["win_y"], rec["win_x"] = shift_y, shift_x
    rec["rs_h"], rec["rs_w"] = out[:, 0], out[:, 1]
    copy = (regions[:, 0] == 0) & (regions[:, 1] == 0) & (regions[:, 2] == extent_h) & \
        (regions[:, 3] == extent_w) & (out[:, 0] == extent_h) & (out[:, 1] == extent_w)
    if any(INTERP_GAUSSIAN in f for f in (filters[:1] if same else filters)):  # it smooths even at scale 1
        copy &= ~np.array([INTERP_GAUSSIAN in f for f in filters])
    rec["mode"] = np.where(copy, MODE_COPY, MODE_TAPS)
    which = np.nonzero(~copy)[0]
    if which.size == 0:
        return
    triangles = {INTERP_LINEAR, INTERP_TRIANGULAR}
    if np.dtype(work_dtype) in (np.uint8, np.float32) and \
            all(set(f) <= triangles for f in (filters[:1] if same else [filters[i] for i in which.tolist()])):
        rows = triangle_axes(extent_h[which], out[which, 0], antialias, regions[which, 0], regions[which, 2],
                             shift_y[which])
        cols = triangle_axes(extent_w[which], out[which, 1], antialias, regions[which, 1], regions[which, 3],
                             shift_x[which])
        rec["ty"][which], rec["tx"][which] = rows.counts, cols.counts
        rec["col_lo"][which], rec["col_n"][which] = cols.lowest, cols.highest - cols.lowest + 1
        batch.tables = DeviceTables(which, rows, cols)  # made on the device when placed (tap_tables)
        return
    rows, cols = _sample_taps(which, extent_h, extent_w, out, regions, filters, antialias, work_dtype)
    (row_idx, row_w, row_start, ty), (col_idx, col_w, col_start, tx) = rows, cols
    if windows is not None:  # tables of the crop, moved to where it lies in the image
        row_idx = row_idx + np.repeat(shift_y[which], out[which, 0] * ty).astype(np.int32)
        col_idx = col_idx + np.repeat(shift_x[which], out[which, 1] * tx).astype(np.int32)
    col_lo = np.minimum.reduceat(col_idx, col_start)
    rec["ty"][which], rec["tx"][which] = ty, tx
    rec["col_lo"][which], rec["col_n"][which] = col_lo, np.maximum.reduceat(col_idx, col_start) - col_lo + 1
    batch.tables = (which, (row_idx, row_w, col_idx, col_w), (row_start, col_start))


def _resize_regions(args_list: list[dict], heights: np.ndarray, widths: np.ndarray,
                    same: bool) -> tuple[np.ndarray, np.ndarray]:
    """(n, 2) output sizes and (n, 4) source regions of `resize_region` for every sample: for the whole batch at
    once when all share plain arguments (`plain_resize`), else one sample at a time, naming the one that fails."""
    if same and plain_resize(args_list[0]):
        try:
            return resize_plans(heights, widths, args_list[0])
        except ValueError:
            pass  # the per-sample path below raises it again for the sample it belongs to
    plans: dict = {}
    out = np.empty((len(args_list), 2), np.int64)
    regions = np.empty((len(args_list), 4), np.float64)
    for i, (h, w) in enumerate(zip(heights.tolist(), widths.tolist(), strict=True)):
        plan = plans.get((h, w)) if same else None
        if plan is None:
            try:
                plan = resize_region(h, w, args_list[0] if same else args_list[i])
            except ValueError as exc:
                raise SampleFailureError(i, str(exc)) from exc
            if same:
                plans[(h, w)] = plan
        out[i] = plan[:2]
        regions[i] = plan[2]
    return out, regions


def _sample_taps(which: np.ndarray, extent_h: np.ndarray, extent_w: np.ndarray, out: np.ndarray,
                 regions: np.ndarray, filters: list[tuple[int, int]], antialias: bool, work_dtype: np.dtype):
    """The tables of the other filters (nearest, cubic, Lanczos, a min_filter / mag_filter pair, and every filter
    on other element types), one sample at a time (its own filters), flattened as `batch_triangle_taps` returns
    them."""
    axes: list[list] = [[], []]
    for i in which.tolist():
        region = tuple(float(v) for v in regions[i])
        try:
            taps = resample_taps(int(extent_h[i]), int(extent_w[i]), int(out[i, 0]), int(out[i, 1]), filters[i],
                                 antialias, region, work_dtype, gaussian=True)
        except ValueError as exc:
            raise SampleFailureError(i, str(exc)) from exc
        axes[0].append(taps[0])
        axes[1].append(taps[1])
    flat = []
    for tables in axes:
        counts = np.array([t[0].shape[1] for t in tables], np.int32)
        sizes = np.array([t[0].size for t in tables], np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        flat.append((np.concatenate([t[0].ravel() for t in tables]).astype(np.int32),
                     np.concatenate([t[1].ravel() for t in tables]).astype(np.float32), starts, counts))
    return flat[0], flat[1]


def _set_normalize(batch: Batch, args_list: list[dict], per_sample: bool) -> None:
    rec, channels = batch.rec, batch.channels
    if not per_sample:
        mean, mul, shift = normalize_coefficients(args_list[0], channels)
        rec["mean"][:, :channels], rec["mul"][:, :channels], rec["shift"] = mean, mul, shift
        return
    for i, args in enumerate(args_list):
        mean, mul, shift = normalize_coefficients(args, channels)
        rec["mean"][i, :channels], rec["mul"][i, :channels], rec["shift"][i] = mean, mul, shift


def _full_window(batch: Batch) -> None:
    rec = batch.rec
    rec["rs_h"], rec["rs_w"] = rec["in_h"], rec["in_w"]
    rec["out_h"], rec["out_w"] = rec["in_h"], rec["in_w"]


def _resize_types(batch: Batch, args: dict) -> tuple[np.dtype, np.dtype]:
    """(the type the CPU resize kernel resamples in, its output type) for the batch's element type."""
    dtype = batch.dtype if args.get("dtype") is None else numpy_dtype(args["dtype"])
    work = np.dtype(np.float32) if dtype.kind == "f" and batch.dtype.kind != "f" else batch.dtype
    return work, dtype


def _round_u8(batch: Batch, work: np.dtype) -> None:
    """A uint8 image resampled as uint8 is rounded to uint8 levels by the resampler itself (+ 0.5, truncated)."""
    batch.rec["round_u8"] = 1 if work == np.uint8 else 0


def resize(images, args_list: list[dict], packed: tuple | None = None):
    batch = gather(images, "resize", packed)
    work, out_dtype = _resize_types(batch, args_list[0])
    set_resizes(batch, args_list, work)
    _round_u8(batch, work)
    batch.rec["out_h"], batch.rec["out_w"] = batch.rec["rs_h"], batch.rec["rs_w"]
    return launch(batch, out_dtype, batch.channels, False, False)


def crop_mirror_normalize(images, args_list: list[dict], per_sample_norm: bool, resize_args: list[dict] | None = None,
                          packed: tuple | None = None):
    """crop_mirror_normalize; with `resize_args`, the resize feeding it is fused in (no resized image is stored)."""
    return launch_plan(plan_crop_mirror_normalize(images, args_list, per_sample_norm, resize_args, packed))


def launch_plan(plan: tuple):
    batch, out_dtype, out_channels, chw, normalize = plan
    return launch(batch, out_dtype, out_channels, chw, normalize)


def adopt_inputs(plan: tuple, images: list) -> bool:
    """Point a plan made on records of the decoder's outputs at the images it really produced (a CPU fallback
    lives elsewhere); False when an image differs in shape, type or strides (the plan no longer applies). A batch
    on kept records (Placement.apply_kept) first gets a copy of its own."""
    batch = plan[0]
    if len(images) != len(batch.inputs):
        return False
    for i, (old, new) in enumerate(zip(batch.inputs, images, strict=True)):
        if new is old:
            continue
        if tuple(new.shape) != tuple(old.shape) or new.dtype != old.dtype or tuple(new.strides) != tuple(old.strides):
            return False
        if batch.shared_records:
            _own_records(batch)
        batch.rec["in"][i] = (new.data.ptr - batch.in_base) % (1 << 64)
        batch.inputs[i] = new
        batch.records_sent = False
    return True


def set_source_flips(batch: Batch, flip_args: list[dict]) -> None:
    """Read every sample's source mirrored as its flip arguments ask (a flip before the resize, fused in)."""
    batch.rec["src_flip"] = [(FLIP_X if int(a["horizontal"]) else 0) | (FLIP_Y if int(a["vertical"]) else 0)
                             for a in flip_args]


def set_colours(batch: Batch, colours: list[tuple[str, list[dict]]], in_dtype: np.dtype) -> None:
    """The colour ops (op name, each sample's arguments) applied in order to the resampled image of `in_dtype`
    before crop_mirror_normalize: each stage's per-sample affine map and the type its output is stored as."""
    rec = batch.rec
    if len(colours) > MAX_COLOUR:
        raise AssertionError(f"at most {MAX_COLOUR} fused colour stages, got {len(colours)}")
    dtype = np.dtype(in_dtype)
    for k, (op, args_list) in enumerate(colours):
        mode, matrices, scale, offset, _, dtype = colour_maps(op, args_list, dtype)
        if mode == MODE_MATRIX and batch.channels != 3:
            shape = (int(rec["rs_h"][0]), int(rec["rs_w"][0]), batch.channels) if len(rec) else ()
            raise SampleFailureError(0, f"{op} expects HWC images with 3 channels, got shape {shape}")
        rec["c_mode"][:, k], rec["c_type"][:, k] = mode, _STORED_TYPES[dtype]
        rec["c_m"][:, k], rec["c_scale"][:, k], rec["c_offset"][:, k] = matrices, scale, offset
    rec["n_colour"] = len(colours)


def plan_crop_mirror_normalize(images, args_list: list[dict], per_sample_norm: bool,
                               resize_args: list[dict] | None = None, packed: tuple | None = None,
                               flips: list[dict] | None = None,
                               colours: list[tuple[str, list[dict]]] | tuple = ()) -> tuple:
    """Everything of crop_mirror_normalize but the launch: the records and tap tables of the batch (host work that
    the GPU stage can do ahead, on the decoder's output records, while the previous batch decodes). Fused in as
    given: the resize before it (`resize_args`), a flip before that (`flips`), colour ops between (`colours`)."""
    batch = gather(images, "crop_mirror_normalize", packed)
    rec = batch.rec
    args = args_list[0]
    out_dtype = numpy_dtype(args["dtype"])
    extra = 1 if args["pad_output"] else 0
    resized = batch.dtype
    if resize_args is None:
        _full_window(batch)
    else:
        work, resized = _resize_types(batch, resize_args[0])
        if resized != work and resized != batch.dtype:
            raise SampleFailureError(0, f"a resize to {resized} fused into crop_mirror_normalize is not supported")
        set_resizes(batch, resize_args, work)
        _round_u8(batch, work)
    if flips is not None:
        set_source_flips(batch, flips)
    if colours:
        set_colours(batch, list(colours), resized)
    set_crops(batch, args_list, rec["rs_h"].astype(np.int64), rec["rs_w"].astype(np.int64), extra, None, out_dtype)
    rec["mirror_x"] = [1 if int(a["mirror"]) else 0 for a in args_list]
    _set_normalize(batch, args_list, per_sample_norm)
    return batch, out_dtype, batch.channels + extra, args["output_layout"] == "CHW", True


def crop(images, args_list: list[dict], packed: tuple | None = None):
    batch = gather(images, "crop", packed)
    _full_window(batch)
    dtype = args_list[0].get("dtype")
    out_dtype = batch.dtype if dtype is None else numpy_dtype(dtype)
    set_crops(batch, args_list, batch.rec["in_h"].astype(np.int64), batch.rec["in_w"].astype(np.int64), 0,
               batch.dtype, out_dtype)
    return launch(batch, out_dtype, batch.channels, False, False)


def flip(images, args_list: list[dict], packed: tuple | None = None):
    batch = gather(images, "flip", packed)
    _full_window(batch)
    batch.rec["mirror_x"] = [1 if int(a["horizontal"]) else 0 for a in args_list]
    batch.rec["mirror_y"] = [1 if int(a["vertical"]) else 0 for a in args_list]
    return launch(batch, batch.dtype, batch.channels, False, False)


def random_resized_crop(images, args_list: list[dict], rngs):
    """`rngs(i)`: sample i's random stream (the CPU kernel's), asked for right before its window is drawn."""
    batch = gather(images, "random_resized_crop")
    work, out_dtype = _resize_types(batch, args_list[0])
    n = len(args_list)
    windows = np.zeros((n, 4), np.int64)
    sizes = np.zeros((n, 2), np.int64)
    for i, args in enumerate(args_list):
        h, w = int(batch.rec["in_h"][i]), int(batch.rec["in_w"][i])
        windows[i] = random_crop_window(h, w, args["random_area"], args["random_aspect_ratio"], args["num_attempts"],
                                        rngs(i))
        sizes[i] = [int(round(v)) for v in args["size"]]
    set_resizes(batch, args_list, work, windows, sizes)
    _round_u8(batch, work)
    batch.rec["out_h"], batch.rec["out_w"] = batch.rec["rs_h"], batch.rec["rs_w"]
    return launch(batch, out_dtype, batch.channels, False, False)


def images_of(batch) -> tuple[list, tuple | None]:
    """Input 0's images and, when the batch is one C-contiguous (N, H, W, C) uint8 or float32 array or packed HWC
    samples of one buffer, its packed form (addresses, shapes, dtype) for `gather`: the records are then made
    without a view per image."""
    direct = direct_samples(batch.input(0))
    if direct is not None and direct[0].dtype in _IN_DTYPES and len(direct[1]) and \
            all(len(s) == 3 for s in direct[1]) and len({s[2] for s in direct[1]}) == 1 and \
            0 < direct[1][0][2] <= MAXC:  # else the per-image checks below name what is wrong
        buffer, shapes, addresses = direct  # the buffer is held once per image
        return [buffer] * len(shapes), (addresses, np.asarray(shapes, np.int64), buffer.dtype)
    return batch.samples(raw=True), None


def describe(value: Any) -> str:
    return f"{type(value).__name__} {getattr(value, 'shape', '')}"


# The registered kernels: each op's batch in, its batch out.
def normalizes_per_sample(batch) -> bool:
    """Whether crop_mirror_normalize's mean or std come per sample (argument inputs)."""
    return bool({"mean", "std"} & batch.per_sample_args)


@gpu_kernel("resize", "experimental.resize")
def resize_kernel(batch):
    images, packed = images_of(batch)
    result = resize(images, batch.sample_args(), packed)
    if not batch.args.get("save_attrs"):
        return result
    shapes = packed[1][:, :2].astype(np.int32) if packed is not None else \
        np.array([image.shape[:2] for image in images], np.int32).reshape(len(images), 2)
    return result, (cupy().asarray(shapes), None)


@gpu_kernel("crop")
def crop_kernel(batch):
    images, packed = images_of(batch)
    return crop(images, batch.sample_args(), packed)


@gpu_kernel("flip")
def flip_kernel(batch):
    images, packed = images_of(batch)
    return flip(images, batch.sample_args(), packed)


@gpu_kernel("random_resized_crop")
def random_resized_crop_kernel(batch):
    return random_resized_crop(batch.samples(raw=True), batch.sample_args(), batch.rng)


@gpu_kernel("crop_mirror_normalize")
def crop_mirror_normalize_kernel(batch):
    images, packed = images_of(batch)
    return crop_mirror_normalize(images, batch.sample_args(), normalizes_per_sample(batch), packed=packed)
