"""CPU kernel of experimental.remap. The sampling (`remap_image`) is written once for numpy and CuPy so the GPU
kernel computes exactly the same: float32 coordinates, zeros outside the input, results rounded to the input type."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace_kernels.registry import cpu_kernel

_MARGIN = 2  # zero rows / columns around the input: enough for the cubic's 4 taps
_CUBIC_A = -0.75


def checked_remap_inputs(image: Any, mapx: Any, mapy: Any) -> tuple[Any, Any, Any]:
    """(HWC image, HW mapx, HW mapy) from the op's inputs, else a ValueError naming the op and the input."""
    if image.ndim not in (2, 3) or np.dtype(image.dtype).kind not in "iuf":
        raise ValueError(f"remap expects numeric HW or HWC images, got shape {tuple(image.shape)} of {image.dtype}")
    maps = []
    for name, m in (("mapx", mapx), ("mapy", mapy)):
        if m.ndim == 3 and m.shape[2] == 1:
            m = m[..., 0]
        if m.ndim != 2 or np.dtype(m.dtype).kind != "f":
            raise ValueError(f"remap: input '{name}' must be a float HW (or HW1) map, got shape {tuple(m.shape)} of "
                             f"{m.dtype}")
        maps.append(m)
    if maps[0].shape != maps[1].shape:
        raise ValueError(f"remap: mapx {tuple(maps[0].shape)} and mapy {tuple(maps[1].shape)} differ in shape")
    return (image if image.ndim == 3 else image[..., None]), maps[0], maps[1]


def _cubic_weights(xp: Any, t: Any) -> list[Any]:
    a = np.float32(_CUBIC_A)
    one = np.float32(1)
    w0 = ((a * (t + one) - 5 * a) * (t + one) + 8 * a) * (t + one) - 4 * a
    w1 = ((a + 2) * t - (a + 3)) * t * t + one
    w2 = ((a + 2) * (one - t) - (a + 3)) * (one - t) * (one - t) + one
    return [w0, w1, w2, one - w0 - w1 - w2]


def remap_image(xp: Any, image: Any, mapx: Any, mapy: Any, interp: int, pixel_origin: str) -> Any:
    """image (HWC, numpy or CuPy per `xp`) sampled at (mapx, mapy): 0 NN, 1 linear, 2 cubic; output of the maps'
    size and the image's type."""
    h, w = image.shape[:2]
    padded = xp.pad(image.astype(xp.float32), ((_MARGIN, _MARGIN), (_MARGIN, _MARGIN), (0, 0)))
    shift = np.float32(0.5 if pixel_origin == "corner" else 0.0)
    x, y = mapx.astype(xp.float32) - shift, mapy.astype(xp.float32) - shift
    x, y = xp.where(xp.isnan(x), np.float32(-4), x), xp.where(xp.isnan(y), np.float32(-4), y)  # NaN: outside
    x, y = xp.clip(x, -4, w + 4), xp.clip(y, -4, h + 4)  # further out, every tap reads the zero margin anyway

    def tap(iy: Any, ix: Any) -> Any:
        iy = xp.clip(iy + _MARGIN, 0, h + 2 * _MARGIN - 1)
        ix = xp.clip(ix + _MARGIN, 0, w + 2 * _MARGIN - 1)
        return padded[iy, ix]

    if interp == 0:
        out = tap(xp.floor(y + np.float32(0.5)).astype(xp.int64), xp.floor(x + np.float32(0.5)).astype(xp.int64))
    else:
        x0, y0 = xp.floor(x), xp.floor(y)
        fx, fy = (x - x0)[..., None], (y - y0)[..., None]
        ix, iy = x0.astype(xp.int64), y0.astype(xp.int64)
        if interp == 1:
            wx, wy, offsets = [1 - fx, fx], [1 - fy, fy], (0, 1)
        else:
            wx, wy, offsets = _cubic_weights(xp, fx), _cubic_weights(xp, fy), (-1, 0, 1, 2)
        out = None
        for j, dy in enumerate(offsets):
            row = None
            for i, dx in enumerate(offsets):
                term = wx[i] * tap(iy + dy, ix + dx)
                row = term if row is None else row + term
            out = wy[j] * row if out is None else out + wy[j] * row
    dtype = np.dtype(image.dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = xp.clip(xp.rint(out), info.min, info.max)
    return out.astype(dtype)


def _remap_one(xp: Any, inputs: list, args: dict) -> Any:
    image, mapx, mapy = checked_remap_inputs(*inputs)
    out = remap_image(xp, image, mapx, mapy, int(args["interp"]), args["pixel_origin"])
    return out if inputs[0].ndim == 3 else out[..., 0]


def remap_sample(xp: Any, inputs: list, args: dict, layouts: tuple[str, ...]) -> Any:
    """The op on one sample's (image, mapx, mapy); the output keeps the image's number of dimensions. A sequence
    (layout F...) is remapped frame by frame, with maps of its own per frame where theirs start with F, else
    shared."""
    layouts = (*layouts, "", "", "")[:3]
    if not layouts[0].startswith("F"):
        return _remap_one(xp, inputs, args)
    frames = inputs[0].shape[0]
    per_frame = []
    for name, m, layout in (("mapx", inputs[1], layouts[1]), ("mapy", inputs[2], layouts[2])):
        if layout.startswith("F") and m.shape[0] != frames:
            raise ValueError(f"remap: input '{name}' has {m.shape[0]} frames, the sequence {frames}")
        per_frame.append(layout.startswith("F"))
    outs = [_remap_one(xp, [inputs[0][f], inputs[1][f] if per_frame[0] else inputs[1],
                            inputs[2][f] if per_frame[1] else inputs[2]], args) for f in range(frames)]
    return xp.stack(outs)


@cpu_kernel("experimental.remap")
def remap(inputs, args, ctx):
    return remap_sample(np, [np.asarray(x) for x in inputs], args, tuple(ctx.input_layouts or ()))
