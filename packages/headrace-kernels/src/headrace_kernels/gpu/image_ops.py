"""GPU resize, crop, flip, crop_mirror_normalize, random_resized_crop and the fused resize + crop_mirror_normalize.

All of them are one pass of `image_store` in kernels/image.cu (plus `resize_horizontal` for Pillow-style resampling)
over a whole batch: the host only fills one 144-byte Sample record per sample, with the same geometry rules as the
CPU kernels (headrace_kernels.windows) and the same normalization coefficients, so CPU and GPU agree."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace_kernels.cpu.geometry_ops import (
    INTERP_CUBIC,
    INTERP_GAUSSIAN,
    INTERP_LANCZOS3,
    INTERP_LINEAR,
    INTERP_NN,
    INTERP_TRIANGULAR,
    _numpy_dtype,
    normalize_coefficients,
)
from headrace_kernels.gpu.runtime import CTYPES, cupy, module
from headrace_kernels.windows import crop_size, random_crop_window, resize_output_size, round_half_up

MODE_COPY, MODE_PIL, MODE_LINEAR, MODE_CUBIC, MODE_LANCZOS, MODE_NN = range(6)
PIL_BILINEAR, PIL_BICUBIC, PIL_LANCZOS = 1, 2, 3
PIL_VERTICAL_FIRST = 16
_PIL_OF = {INTERP_LINEAR: PIL_BILINEAR, INTERP_TRIANGULAR: PIL_BILINEAR, INTERP_CUBIC: PIL_BICUBIC,
           INTERP_LANCZOS3: PIL_LANCZOS}
_CV_OF = {INTERP_LINEAR: MODE_LINEAR, INTERP_TRIANGULAR: MODE_LINEAR, INTERP_CUBIC: MODE_CUBIC,
          INTERP_LANCZOS3: MODE_LANCZOS}
MAXC = 4

SAMPLE = np.dtype([("in", "<u8"), ("out", "<u8"), ("tmp", "<u8"), ("in_h", "<i4"), ("in_w", "<i4"),
                   ("in_pitch", "<i4"), ("win_y", "<i4"), ("win_x", "<i4"), ("win_h", "<i4"), ("win_w", "<i4"),
                   ("rs_h", "<i4"), ("rs_w", "<i4"), ("crop_y", "<i4"), ("crop_x", "<i4"), ("out_h", "<i4"),
                   ("out_w", "<i4"), ("mode", "<i4"), ("filter", "<i4"), ("mirror_x", "<i4"), ("mirror_y", "<i4"),
                   ("mean", "<f4", (MAXC,)), ("mul", "<f4", (MAXC,)), ("fill", "<f4", (MAXC,)), ("shift", "<f4")])
assert SAMPLE.itemsize == 144, SAMPLE.itemsize

_IN_TYPES = ("uint8", "float32")
_OUT_TYPES = ("uint8", "int8", "int16", "int32", "float32", "float16")
_EXPRESSIONS = tuple(f"image_store<{CTYPES[i]}, {CTYPES[o]}>" for i in _IN_TYPES for o in _OUT_TYPES) + (
    "resize_horizontal<unsigned char, true>", "resize_horizontal<unsigned char, false>",
    "resize_horizontal<float, false>")


class SampleFailureError(Exception):
    """An op could not handle sample `index`; the GPU stage turns it into a SampleError naming file and op."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def _kernels():
    return module("image.cu", _EXPRESSIONS)


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
    if image.dtype.name not in _IN_TYPES:
        image = image.astype(cp.float32)
    item = image.itemsize
    channels = image.shape[2]
    if image.strides[2] != item or image.strides[1] != channels * item or image.strides[0] % item or \
            image.strides[0] < image.shape[1] * channels * item:
        image = cp.ascontiguousarray(image)
    return image


class Batch:
    """The Sample records of one launch and the device memory they point into."""

    def __init__(self, inputs: list, channels: int, in_dtype: str):
        self.inputs, self.channels, self.in_dtype = inputs, channels, in_dtype
        self.rec = np.zeros(len(inputs), SAMPLE)
        self.rec["in"] = [image.data.ptr for image in inputs]
        self.rec["in_pitch"] = [image.strides[0] // image.itemsize for image in inputs]
        self.rec["in_h"] = [image.shape[0] for image in inputs]
        self.rec["in_w"] = [image.shape[1] for image in inputs]
        self.rec["mul"] = 1.0


def gather(images, op: str, channels_from: int = 0):
    """Check the inputs of an image op: HWC, one channel count and one element type for the whole batch."""
    inputs = [as_hwc(image, i, op) for i, image in enumerate(images)]
    channels = {image.shape[2] for image in inputs}
    types = {image.dtype.name for image in inputs}
    if len(channels) > 1 or len(types) > 1:
        raise SampleFailureError(0, f"{op} on the GPU needs one channel count and one element type per batch, got "
                               f"channels {sorted(channels)} and types {sorted(types)}")
    return Batch(inputs, channels.pop(), types.pop())


def launch(batch: Batch, out_dtype: np.dtype, out_channels: int, chw: bool, normalize: bool, quantize_u8: bool,
           dense_shape_ok: bool = True):
    """Allocate the outputs (one buffer; a dense (N, ...) array when every sample has the same shape), upload the
    records and run the horizontal pass (if any sample needs it) and the store pass. Returns (dense or None, list)."""
    cp = cupy()
    rec, n, channels = batch.rec, len(batch.inputs), batch.channels
    out_dtype = np.dtype(out_dtype)
    if out_dtype.name not in _OUT_TYPES:
        raise SampleFailureError(0, f"output type {out_dtype} is not supported by the GPU image kernels")
    heights, widths = rec["out_h"].tolist(), rec["out_w"].tolist()
    shapes = [((out_channels, h, w) if chw else (h, w, out_channels)) for h, w in zip(heights, widths, strict=True)]
    sizes = np.array([h * w * out_channels for h, w in zip(heights, widths, strict=True)], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    flat = cp.empty(int(offsets[-1]), dtype=out_dtype)
    rec["out"] = flat.data.ptr + offsets[:-1] * out_dtype.itemsize
    pil = rec["mode"] == MODE_PIL
    tmp = None
    fixed = batch.in_dtype == "uint8" and channels in (1, 3, 4)
    if pil.any():
        tmp_item = 1 if fixed else 4
        vertical = (rec["filter"] & PIL_VERTICAL_FIRST) != 0
        pass_w = np.where(vertical, rec["win_w"], rec["rs_w"]).astype(np.int64)
        pass_h = np.where(vertical, rec["rs_h"], rec["win_h"]).astype(np.int64)
        tmp_sizes = np.where(pil, pass_h * pass_w * channels * tmp_item, 0)
        tmp_offsets = np.concatenate([[0], np.cumsum(tmp_sizes)])
        tmp = cp.empty(int(tmp_offsets[-1]), dtype=cp.uint8)
        rec["tmp"] = np.where(pil, tmp.data.ptr + tmp_offsets[:-1], 0).astype(np.uint64)
    records = cp.asarray(rec.view(np.uint8))
    kernels = _kernels()
    in_type = CTYPES[batch.in_dtype]
    if tmp is not None:
        name = f"resize_horizontal<{in_type}, {'true' if fixed else 'false'}>"
        grid = (int(-(-pass_w[pil].max() // 32)), int(-(-pass_h[pil].max() // 8)), n)
        kernels.get_function(name)(grid, (32, 8, 1), (records, np.int32(channels)))
    if n and sizes.max() > 0:
        name = f"image_store<{in_type}, {CTYPES[out_dtype.name]}>"
        grid = (int(-(-rec["out_w"].max() // 32)), int(-(-rec["out_h"].max() // 8)), n)
        kernels.get_function(name)(grid, (32, 8, 1), (records, np.int32(channels), np.int32(out_channels),
                                                       np.int32(chw), np.int32(quantize_u8), np.int32(normalize)))
    # keep what the kernels read alive until the stream has passed them (the stage holds the batch one step)
    batch.keep = (records, tmp)
    if dense_shape_ok and len(set(shapes)) == 1 and n:
        return flat.reshape((n, *shapes[0])), None
    return None, [flat[int(offsets[i]):int(offsets[i + 1])].reshape(shapes[i]) for i in range(n)]


def _per_sample(args_list: list[dict], name: str) -> list:
    return [a[name] for a in args_list]


def _fill(args: dict, channels: int) -> np.ndarray:
    fill = np.asarray(args["fill_values"], dtype=np.float32)
    return fill if fill.size == channels else np.full(channels, fill[0], dtype=np.float32)


_CROP_KEYS = ("crop", "crop_h", "crop_w", "crop_pos_x", "crop_pos_y", "out_of_bounds_policy", "fill_values")


def _set_crops(batch: Batch, args_list: list[dict], heights: np.ndarray, widths: np.ndarray) -> None:
    """The crop windows of every sample in images of (heights, widths): the CPU kernels' `_window` rule
    (crop_size, crop_anchor, out_of_bounds_policy), computed for the whole batch at once."""
    rec, n = batch.rec, len(args_list)
    uniform = all(a is args_list[0] or all(a[k] == args_list[0][k] for k in _CROP_KEYS) for a in args_list)
    if uniform:
        args = args_list[0]
        crop = args.get("crop")
        want_h, want_w = (crop[0], crop[1]) if crop else (args.get("crop_h") or 0, args.get("crop_w") or 0)
        crop_h = np.full(n, round_half_up(want_h), np.int64) if want_h else heights.astype(np.int64)
        crop_w = np.full(n, round_half_up(want_w), np.int64) if want_w else widths.astype(np.int64)
        pos_y, pos_x = np.full(n, float(args["crop_pos_y"])), np.full(n, float(args["crop_pos_x"]))
    else:
        sizes = np.array([crop_size(a, int(h), int(w)) for a, h, w in zip(args_list, heights, widths, strict=True)],
                         dtype=np.int64).reshape(n, 2)
        crop_h, crop_w = sizes[:, 0], sizes[:, 1]
        pos_y = np.array([float(a["crop_pos_y"]) for a in args_list])
        pos_x = np.array([float(a["crop_pos_x"]) for a in args_list])
    y = np.floor(pos_y * (heights - crop_h) + 0.5).astype(np.int64)  # crop_anchor, vectorized
    x = np.floor(pos_x * (widths - crop_w) + 0.5).astype(np.int64)
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
    if uniform:
        rec["fill"][:, :batch.channels] = _fill(args_list[0], batch.channels)
    else:
        for i, args in enumerate(args_list):
            rec["fill"][i, :batch.channels] = _fill(args, batch.channels)


def _set_resizes(batch: Batch, args_list: list[dict], windows: np.ndarray | None = None,
                 out_sizes: np.ndarray | None = None) -> None:
    """Resize every sample: `windows` (n, 4) of (y, x, h, w) in the input (default: the whole image) to
    `out_sizes` (n, 2) (default: resize_output_size of each window), choosing the mode as the CPU does."""
    rec, n = batch.rec, len(args_list)
    if windows is None:
        windows = np.zeros((n, 4), np.int64)
        windows[:, 2], windows[:, 3] = rec["in_h"], rec["in_w"]
    if out_sizes is None:
        same = all(a is args_list[0] for a in args_list)
        out_sizes = np.array([resize_output_size(int(h), int(w), args_list[0] if same else args_list[i])
                              for i, (h, w) in enumerate(windows[:, 2:].tolist())], dtype=np.int64).reshape(n, 2)
    rec["win_y"], rec["win_x"], rec["win_h"], rec["win_w"] = windows.T
    rec["rs_h"], rec["rs_w"] = out_sizes.T
    interp, antialias = int(args_list[0]["interp_type"]), bool(args_list[0]["antialias"])
    if interp == INTERP_GAUSSIAN:
        raise SampleFailureError(0, "INTERP_GAUSSIAN is not supported")
    in_h, in_w, out_h, out_w = windows[:, 2], windows[:, 3], out_sizes[:, 0], out_sizes[:, 1]
    shrinking = (out_h < in_h) | (out_w < in_w)
    if interp == INTERP_NN:
        mode, flt = np.full(n, MODE_NN), np.zeros(n, np.int64)
    else:
        pil = np.full(n, True) if interp == INTERP_TRIANGULAR else (shrinking if antialias else np.full(n, False))
        vertical_first = (out_h < in_h) & (out_w > in_w)  # see resample_mode
        mode = np.where(pil, MODE_PIL, _CV_OF[interp])
        flt = np.where(pil, _PIL_OF[interp] | np.where(vertical_first, PIL_VERTICAL_FIRST, 0), 0)
    same_size = (out_h == in_h) & (out_w == in_w)
    rec["mode"] = np.where(same_size, MODE_COPY, mode)
    rec["filter"] = np.where(same_size, 0, flt)


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
    rec["win_h"], rec["win_w"] = rec["in_h"], rec["in_w"]
    rec["rs_h"], rec["rs_w"] = rec["in_h"], rec["in_w"]
    rec["out_h"], rec["out_w"] = rec["in_h"], rec["in_w"]


def resize(images, args_list: list[dict]):
    batch = gather(images, "resize")
    _set_resizes(batch, args_list)
    batch.rec["out_h"], batch.rec["out_w"] = batch.rec["rs_h"], batch.rec["rs_w"]
    dtype = args_list[0].get("dtype")
    out_dtype = np.dtype(batch.in_dtype) if dtype is None else np.dtype(np.float32 if int(dtype) == 9 else np.uint8)
    return launch(batch, out_dtype, batch.channels, False, False, False)


def crop_mirror_normalize(images, args_list: list[dict], per_sample_norm: bool, resize_args: list[dict] | None = None):
    """crop_mirror_normalize; with `resize_args`, the resize feeding it is fused in (no resized image is stored)."""
    batch = gather(images, "crop_mirror_normalize")
    rec = batch.rec
    if resize_args is None:
        _full_window(batch)
    else:
        _set_resizes(batch, resize_args)
    _set_crops(batch, args_list, rec["rs_h"].astype(np.int64), rec["rs_w"].astype(np.int64))
    rec["mirror_x"] = [1 if int(a["mirror"]) else 0 for a in args_list]
    _set_normalize(batch, args_list, per_sample_norm)
    args = args_list[0]
    out_channels = batch.channels + (1 if args["pad_output"] else 0)
    quantize = resize_args is not None and batch.in_dtype == "uint8" and (
        resize_args[0].get("dtype") is None or int(resize_args[0]["dtype"]) == 0)
    return launch(batch, _numpy_dtype(args["dtype"]), out_channels, args["output_layout"] == "CHW", True, quantize)


def crop(images, args_list: list[dict]):
    batch = gather(images, "crop")
    _full_window(batch)
    _set_crops(batch, args_list, batch.rec["in_h"].astype(np.int64), batch.rec["in_w"].astype(np.int64))
    dtype = args_list[0].get("dtype")
    out_dtype = np.dtype(batch.in_dtype) if dtype is None else _numpy_dtype(dtype)
    return launch(batch, out_dtype, batch.channels, False, False, False)


def flip(images, args_list: list[dict]):
    batch = gather(images, "flip")
    _full_window(batch)
    batch.rec["mirror_x"] = [1 if int(a["horizontal"]) else 0 for a in args_list]
    batch.rec["mirror_y"] = [1 if int(a["vertical"]) else 0 for a in args_list]
    return launch(batch, np.dtype(batch.in_dtype), batch.channels, False, False, False)


def random_resized_crop(images, args_list: list[dict], rngs):
    """`rngs(i)`: sample i's random stream (the CPU kernel's), asked for right before its window is drawn."""
    batch = gather(images, "random_resized_crop")
    n = len(args_list)
    windows = np.zeros((n, 4), np.int64)
    sizes = np.zeros((n, 2), np.int64)
    for i, args in enumerate(args_list):
        h, w = int(batch.rec["in_h"][i]), int(batch.rec["in_w"][i])
        windows[i] = random_crop_window(h, w, args["random_area"], args["random_aspect_ratio"], args["num_attempts"],
                                        rngs(i))
        sizes[i] = [int(round(v)) for v in args["size"]]
    _set_resizes(batch, args_list, windows, sizes)
    batch.rec["out_h"], batch.rec["out_w"] = batch.rec["rs_h"], batch.rec["rs_w"]
    return launch(batch, np.dtype(batch.in_dtype), batch.channels, False, False, False)


def describe(value: Any) -> str:
    return f"{type(value).__name__} {getattr(value, 'shape', '')}"
