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
from headrace_kernels.windows import crop_anchor, crop_size, random_crop_window, resize_output_size

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


def resample_mode(interp: int, antialias: bool, in_hw: tuple[int, int], out_hw: tuple[int, int], dtype: np.dtype,
                  channels: int) -> tuple[int, int]:
    """(mode, Pillow filter) exactly as the CPU's `resample` chooses its library: Pillow's support-scaled filters
    when shrinking with antialias (or TRIANGULAR), OpenCV's sampling otherwise; a same-size resize copies."""
    if tuple(in_hw) == tuple(out_hw):
        return MODE_COPY, 0
    if interp == INTERP_GAUSSIAN:
        raise ValueError("INTERP_GAUSSIAN is not supported")
    if interp == INTERP_NN:
        return MODE_NN, 0
    shrinking = out_hw[0] < in_hw[0] or out_hw[1] < in_hw[1]
    if interp == INTERP_TRIANGULAR or (antialias and shrinking):
        # Pillow (13 here) runs the vertical pass first when it shrinks rows while widening columns; the order
        # matters through the rounded 8-bit intermediate. Some shrink-both shapes also go vertical-first in recent
        # Pillow by a rule not reproduced here: there bicubic/Lanczos may differ by a few levels.
        vertical_first = out_hw[0] < in_hw[0] and out_hw[1] > in_hw[1]
        return MODE_PIL, _PIL_OF[interp] | (PIL_VERTICAL_FIRST if vertical_first else 0)
    return _CV_OF[interp], 0


class Batch:
    """The Sample records of one launch and the device memory they point into."""

    def __init__(self, inputs: list, channels: int, in_dtype: str):
        self.inputs, self.channels, self.in_dtype = inputs, channels, in_dtype
        self.rec = np.zeros(len(inputs), SAMPLE)
        for i, image in enumerate(inputs):
            self.rec["in"][i] = image.data.ptr
            self.rec["in_pitch"][i] = image.strides[0] // image.itemsize
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


def _set_crop(batch: Batch, i: int, args: dict, height: int, width: int, op: str) -> None:
    """The crop window of sample i in an image of (height, width) (the CPU kernels' `_window` rule)."""
    rec = batch.rec
    crop_h, crop_w = crop_size(args, height, width)
    y = crop_anchor(height, crop_h, args["crop_pos_y"])
    x = crop_anchor(width, crop_w, args["crop_pos_x"])
    if not (0 <= y and 0 <= x and y + crop_h <= height and x + crop_w <= width):
        policy = args["out_of_bounds_policy"]
        if policy == "error":
            raise SampleFailureError(i, f"crop window {crop_h}x{crop_w} at ({y}, {x}) does not fit in the "
                                        f"{height}x{width} image (set out_of_bounds_policy='pad' or 'trim_to_shape')")
        if policy == "trim_to_shape":
            y0, x0 = max(y, 0), max(x, 0)
            crop_h, crop_w = min(y + crop_h, height) - y0, min(x + crop_w, width) - x0
            y, x = y0, x0
    rec["crop_y"][i], rec["crop_x"][i], rec["out_h"][i], rec["out_w"][i] = y, x, crop_h, crop_w
    rec["fill"][i, :batch.channels] = _fill(args, batch.channels)


def _set_normalize(batch: Batch, args_list: list[dict], per_sample: bool) -> None:
    rec, channels = batch.rec, batch.channels
    if not per_sample:
        mean, mul, shift = normalize_coefficients(args_list[0], channels)
        rec["mean"][:, :channels], rec["mul"][:, :channels], rec["shift"] = mean, mul, shift
        return
    for i, args in enumerate(args_list):
        mean, mul, shift = normalize_coefficients(args, channels)
        rec["mean"][i, :channels], rec["mul"][i, :channels], rec["shift"][i] = mean, mul, shift


def _set_resize(batch: Batch, i: int, args: dict, win: tuple[int, int, int, int], out_hw: tuple[int, int]) -> None:
    rec = batch.rec
    y, x, h, w = win
    mode, flt = resample_mode(int(args["interp_type"]), args["antialias"], (h, w), out_hw,
                              np.dtype(batch.in_dtype), batch.channels)
    rec["win_y"][i], rec["win_x"][i], rec["win_h"][i], rec["win_w"][i] = y, x, h, w
    rec["rs_h"][i], rec["rs_w"][i] = out_hw
    rec["mode"][i], rec["filter"][i] = mode, flt


def _full_window(batch: Batch) -> None:
    rec = batch.rec
    rec["win_h"], rec["win_w"] = rec["in_h"], rec["in_w"]
    rec["rs_h"], rec["rs_w"] = rec["in_h"], rec["in_w"]
    rec["out_h"], rec["out_w"] = rec["in_h"], rec["in_w"]


def resize(images, args_list: list[dict]):
    batch = gather(images, "resize")
    for i, args in enumerate(args_list):
        h, w = int(batch.rec["in_h"][i]), int(batch.rec["in_w"][i])
        out_hw = resize_output_size(h, w, args)
        _set_resize(batch, i, args, (0, 0, h, w), out_hw)
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
    for i, args in enumerate(args_list):
        if resize_args is not None:
            h, w = int(rec["in_h"][i]), int(rec["in_w"][i])
            _set_resize(batch, i, resize_args[i], (0, 0, h, w), resize_output_size(h, w, resize_args[i]))
        _set_crop(batch, i, args, int(rec["rs_h"][i]), int(rec["rs_w"][i]), "crop_mirror_normalize")
        rec["mirror_x"][i] = 1 if int(args["mirror"]) else 0
    _set_normalize(batch, args_list, per_sample_norm)
    args = args_list[0]
    out_channels = batch.channels + (1 if args["pad_output"] else 0)
    quantize = resize_args is not None and batch.in_dtype == "uint8" and (
        resize_args[0].get("dtype") is None or int(resize_args[0]["dtype"]) == 0)
    return launch(batch, _numpy_dtype(args["dtype"]), out_channels, args["output_layout"] == "CHW", True, quantize)


def crop(images, args_list: list[dict]):
    batch = gather(images, "crop")
    _full_window(batch)
    for i, args in enumerate(args_list):
        _set_crop(batch, i, args, int(batch.rec["in_h"][i]), int(batch.rec["in_w"][i]), "crop")
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
    for i, args in enumerate(args_list):
        h, w = int(batch.rec["in_h"][i]), int(batch.rec["in_w"][i])
        window = random_crop_window(h, w, args["random_area"], args["random_aspect_ratio"], args["num_attempts"],
                                    rngs(i))
        out_hw = tuple(int(round(v)) for v in args["size"])
        _set_resize(batch, i, args, window, out_hw)
    batch.rec["out_h"], batch.rec["out_w"] = batch.rec["rs_h"], batch.rec["rs_w"]
    return launch(batch, np.dtype(batch.in_dtype), batch.channels, False, False, False)


def describe(value: Any) -> str:
    return f"{type(value).__name__} {getattr(value, 'shape', '')}"
