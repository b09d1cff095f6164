"""CPU kernels of resize, crop, flip, random_resized_crop and the fused crop_mirror_normalize."""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image

from headrace_kernels.cpu.scratch import scratch
from headrace_kernels.registry import cpu_kernel
from headrace_kernels.windows import crop_anchor, crop_size, random_crop_window, resize_output_size

INTERP_NN, INTERP_LINEAR, INTERP_CUBIC, INTERP_LANCZOS3, INTERP_TRIANGULAR, INTERP_GAUSSIAN = range(6)
_PIL_FILTER = {INTERP_LINEAR: Image.BILINEAR, INTERP_TRIANGULAR: Image.BILINEAR, INTERP_CUBIC: Image.BICUBIC,
               INTERP_LANCZOS3: Image.LANCZOS}
_CV_FILTER = {INTERP_LINEAR: cv2.INTER_LINEAR, INTERP_TRIANGULAR: cv2.INTER_LINEAR, INTERP_CUBIC: cv2.INTER_CUBIC,
              INTERP_LANCZOS3: cv2.INTER_LANCZOS4}
_PIL_MODE = {1: "L", 3: "RGB", 4: "RGBA"}
_FLOAT_OUTPUTS = (np.float16, np.float32, np.float64)


def _hwc(image: np.ndarray, op: str) -> np.ndarray:
    if image.ndim == 2:
        return image[..., None]
    if image.ndim != 3:
        raise ValueError(f"{op} expects HWC images (3 dims), got shape {image.shape}")
    return image


def resample(image: np.ndarray, out_h: int, out_w: int, interp: int, antialias: bool) -> np.ndarray:
    """Resize an HWC image. Shrinking with antialias uses filters whose support grows with the scale: the triangle
    for LINEAR/TRIANGULAR (DALI's definition; `resampling.resample_linear`, edge pixels replicated), Pillow's
    separable resampling for the others; otherwise plain sampling (OpenCV)."""
    in_h, in_w, channels = image.shape
    if (in_h, in_w) == (out_h, out_w):
        return image.copy()
    if interp == INTERP_GAUSSIAN:
        raise ValueError("INTERP_GAUSSIAN is not supported")
    if interp == INTERP_NN:
        out = cv2.resize(image, (out_w, out_h), interpolation=cv2.INTER_NEAREST_EXACT)
        return out.reshape(out_h, out_w, channels)
    shrinking = out_h < in_h or out_w < in_w
    use_pil = interp == INTERP_TRIANGULAR or (antialias and shrinking)
    if use_pil and interp in (INTERP_LINEAR, INTERP_TRIANGULAR) and image.dtype in (np.uint8, np.float32):
        from headrace_kernels.cpu.resampling import resample_linear  # numba: imported when first needed

        return resample_linear(image, out_h, out_w, antialias=True)
    if use_pil and image.dtype == np.uint8 and channels in _PIL_MODE:
        src = Image.fromarray(np.ascontiguousarray(image.reshape(in_h, in_w) if channels == 1 else image),
                              _PIL_MODE[channels])
        return np.asarray(src.resize((out_w, out_h), _PIL_FILTER[interp])).reshape(out_h, out_w, channels)
    if use_pil:
        planes = [np.asarray(Image.fromarray(np.ascontiguousarray(image[..., c], dtype=np.float32), "F")
                             .resize((out_w, out_h), _PIL_FILTER[interp])) for c in range(channels)]
        out = np.stack(planes, axis=-1)
        return out if image.dtype == np.float32 else _saturate(out, image.dtype)
    out = cv2.resize(image, (out_w, out_h), interpolation=_CV_FILTER[interp])
    return out.reshape(out_h, out_w, channels)


def _saturate(values: np.ndarray, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(values), info.min, info.max).astype(dtype)


@cpu_kernel("resize")
def resize(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "resize")
    out_h, out_w = resize_output_size(image.shape[0], image.shape[1], args)
    out = resample(image, out_h, out_w, int(args["interp_type"]), args["antialias"])
    dtype = args.get("dtype")
    return out if dtype is None else out.astype(np.float32 if int(dtype) == 9 else np.uint8, copy=False)


def _window(image: np.ndarray, args, op: str) -> tuple[np.ndarray, int, int, int, int]:
    """The crop of `image` as a view plus the padding it needs: (view, pad_top, pad_left, out_h, out_w)."""
    height, width = image.shape[:2]
    crop_h, crop_w = crop_size(args, height, width)
    y = crop_anchor(height, crop_h, args["crop_pos_y"])
    x = crop_anchor(width, crop_w, args["crop_pos_x"])
    inside = 0 <= y and 0 <= x and y + crop_h <= height and x + crop_w <= width
    if not inside:
        policy = args["out_of_bounds_policy"]
        if policy == "error":
            raise ValueError(f"crop window {crop_h}x{crop_w} at ({y}, {x}) does not fit in the {height}x{width} "
                             "image (set out_of_bounds_policy='pad' or 'trim_to_shape')")
        if policy == "trim_to_shape":
            y0, x0 = max(y, 0), max(x, 0)
            y1, x1 = min(y + crop_h, height), min(x + crop_w, width)
            return image[y0:y1, x0:x1], 0, 0, y1 - y0, x1 - x0
    y0, x0 = max(y, 0), max(x, 0)
    view = image[y0:max(y0, min(y + crop_h, height)), x0:max(x0, min(x + crop_w, width))]
    return view, y0 - y, x0 - x, crop_h, crop_w


def _fill(args, channels: int) -> np.ndarray:
    fill = np.asarray(args["fill_values"], dtype=np.float32)
    return fill if fill.size == channels else np.full(channels, fill[0], dtype=np.float32)


def _place(view: np.ndarray, top: int, left: int, out_h: int, out_w: int, fill: np.ndarray,
           dtype) -> np.ndarray:
    """`view` at (top, left) of an out_h x out_w canvas of `fill`; no copy of the canvas when nothing is padded."""
    if view.shape[:2] == (out_h, out_w):
        return view
    out = np.empty((out_h, out_w, view.shape[2]), dtype=dtype)
    out[...] = fill.astype(dtype)
    out[top:top + view.shape[0], left:left + view.shape[1]] = view
    return out


@cpu_kernel("crop")
def crop(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "crop")
    view, top, left, out_h, out_w = _window(image, args, "crop")
    out = _place(view, top, left, out_h, out_w, _fill(args, image.shape[2]), image.dtype)
    dtype = args.get("dtype")
    return np.array(out) if dtype is None else _saturate(out, _numpy_dtype(dtype))


_NUMPY = {0: np.uint8, 1: np.uint16, 2: np.uint32, 3: np.uint64, 4: np.int8, 5: np.int16, 6: np.int32, 7: np.int64,
          8: np.float16, 9: np.float32, 10: np.float64, 11: np.bool_}


def _numpy_dtype(dtype: int) -> np.dtype:
    return np.dtype(_NUMPY[int(dtype)])


def normalize_coefficients(args, channels: int) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """Per-channel (mean, multiplier, shift) in float32: out = (x - mean) * multiplier + shift, with
    multiplier = scale / std. The GPU kernel uses exactly these numbers and the same rounding."""
    mean = np.asarray(args["mean"], dtype=np.float32).ravel()
    std = np.asarray(args["std"], dtype=np.float32).ravel()
    if mean.size not in (1, channels) or std.size not in (1, channels):
        raise ValueError(f"mean has {mean.size} and std {std.size} values; the image has {channels} channels")
    mean = np.broadcast_to(mean, (channels,)).astype(np.float32)
    multiplier = (np.float32(args["scale"]) / np.broadcast_to(std, (channels,))).astype(np.float32)
    return mean, multiplier, np.float32(args["shift"])


def _normalize_lut(mean: np.ndarray, multiplier: np.ndarray, shift: np.float32, dtype: np.dtype) -> np.ndarray:
    """(channels, 256) table of the normalized value of every uint8 level, already in the output type."""
    levels = np.arange(256, dtype=np.float32)[None, :]
    values = (levels - mean[:, None]) * multiplier[:, None] + shift
    return _saturate(values, dtype)


# cv2.LUT copies table entries of these types bit for bit: a table of another type of that size is viewed as one
_LUT_BITS = {1: np.uint8, 2: np.uint16, 4: np.int32}
_tables: dict[tuple, np.ndarray] = {}


def _arg_key(value) -> tuple:
    return tuple(value) if isinstance(value, list | tuple) else tuple(np.ravel(value).tolist())


def _normalize_table(args, channels: int, dtype: np.dtype) -> np.ndarray:
    """`_normalize_lut` of the arguments, made once per distinct (mean, std, scale, shift, channels, dtype)."""
    key = (_arg_key(args["mean"]), _arg_key(args["std"]), args["scale"], args["shift"], channels, dtype.str)
    table = _tables.get(key)
    if table is None:
        table = _normalize_lut(*normalize_coefficients(args, channels), dtype)
        if len(_tables) >= 64:
            _tables.clear()
        _tables[key] = table
    return table


def _lookup(view: np.ndarray, table: np.ndarray, out: np.ndarray, rows: slice, cols: slice, chw: bool,
            mirror: bool) -> None:
    """out[.., rows, cols] = table[c][view[..., c]] for every channel c (view mirrored first when asked), through
    OpenCV's LUT (GIL released) where the table type allows, else numpy."""
    bits = _LUT_BITS.get(table.dtype.itemsize)
    height, width, channels = view.shape
    if bits is None or channels > 4 or view.size == 0:
        view = view[:, ::-1] if mirror else view
        for c in range(channels):
            target = out[c, rows, cols] if chw else out[rows, cols, c]
            target[...] = table[c][view[..., c]]
        return
    src = cv2.flip(view, 1, dst=scratch("cmn.mirrored", view.shape, np.uint8)) if mirror else view
    if chw:
        if channels > 1:
            planes = scratch("cmn.planes", (channels, height, width), np.uint8)
            cv2.split(src, list(planes))
        else:
            planes = [src.reshape(height, width)]
        for c in range(channels):
            target = out[c, rows, cols].view(bits)
            if target.flags.c_contiguous:
                cv2.LUT(planes[c], table[c].view(bits), dst=target)
            else:
                target[...] = cv2.LUT(planes[c], table[c].view(bits))
    else:
        lut = np.ascontiguousarray(table.T).view(bits).reshape(1, 256, channels)
        out[rows, cols, :channels].view(bits)[...] = cv2.LUT(src, lut).reshape(height, width, channels)


@cpu_kernel("crop_mirror_normalize")
def crop_mirror_normalize(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "crop_mirror_normalize")
    channels = image.shape[2]
    dtype = _numpy_dtype(args["dtype"])
    view, top, left, out_h, out_w = _window(image, args, "crop_mirror_normalize")
    mirror = bool(int(args["mirror"]))
    if mirror:
        left = out_w - left - view.shape[1]
    out_channels = channels + 1 if args["pad_output"] else channels
    chw = args["output_layout"] == "CHW"
    out = np.empty((out_channels, out_h, out_w) if chw else (out_h, out_w, out_channels), dtype=dtype)
    padded = view.shape[:2] != (out_h, out_w)
    if padded or out_channels != channels:
        mean, multiplier, shift = normalize_coefficients(args, channels)
        fill_norm = _saturate((_fill(args, channels) - mean) * multiplier + shift, dtype)
        for c in range(out_channels):
            (out[c] if chw else out[..., c]).fill(fill_norm[c] if c < channels else 0)
    rows, cols = slice(top, top + view.shape[0]), slice(left, left + view.shape[1])
    if image.dtype == np.uint8:
        _lookup(view, _normalize_table(args, channels, dtype), out, rows, cols, chw, mirror)
    else:
        mean, multiplier, shift = normalize_coefficients(args, channels)
        view = view[:, ::-1] if mirror else view
        values = _saturate((view.astype(np.float32) - mean) * multiplier + shift, dtype)
        if chw:
            out[:channels, rows, cols] = values.transpose(2, 0, 1)
        else:
            out[rows, cols, :channels] = values
    return out


@cpu_kernel("flip")
def flip(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "flip")
    if int(args["horizontal"]):
        image = image[:, ::-1]
    if int(args["vertical"]):
        image = image[::-1]
    return np.ascontiguousarray(image)


@cpu_kernel("random_resized_crop")
def random_resized_crop(inputs, args, ctx):
    image = _hwc(np.asarray(inputs[0]), "random_resized_crop")
    y, x, h, w = random_crop_window(image.shape[0], image.shape[1], args["random_area"], args["random_aspect_ratio"],
                                    args["num_attempts"], ctx.rng)
    out_h, out_w = (int(round(v)) for v in args["size"])
    return resample(image[y:y + h, x:x + w], out_h, out_w, int(args["interp_type"]), args["antialias"])
