"""experimental.warp_perspective against DALI's CPU operator (uint8 within one level: 0 measured; float within 1e-4)
and against a float64 numpy resampler written here (bilinear / nearest, pixel centres at +0.5 for the default
'corner' origin; uint8 within one level, float within 1e-4). The GPU kernel against the CPU one on smooth images
(its coordinates are exact floats where OpenCV's may differ in the last bits: uint8 within one level, two for cubic;
float within 1e-3 of the range)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import assert_specs_agree, max_abs_diff, needs_dali, run_once

import headrace
from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(18)
IMAGES = [RNG.integers(0, 256, (20, 30, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
FLOATS = [RNG.uniform(0, 1, (15, 21)).astype(np.float32), RNG.uniform(-1, 1, (8, 6)).astype(np.float32)]
MATRIX = np.array([[1.05, 0.1, -2.03], [0.05, 0.95, 1.5], [0.001, 0.002, 1.0]])
NUMPY_PADS = {"replicate": "edge", "reflect": "symmetric", "reflect_101": "reflect", "wrap": "wrap"}


def _source(samples: list) -> Callable[[], list]:
    return lambda: list(samples)


def run(api, images: list, *more: list, layout: str | None = None, **kwargs) -> list[np.ndarray]:
    """warp_perspective over one batch in `api` (headrace or nvidia.dali); `more`: the matrix input."""
    fn = api.fn

    @api.pipeline_def(batch_size=len(images), num_threads=1, device_id=None, seed=3)
    def pipe():
        nodes = [fn.external_source(source=_source(s), batch=True, **({"layout": layout} if layout and not i else {}))
                 for i, s in enumerate((images, *more))]
        return fn.experimental.warp_perspective(*nodes, **kwargs)

    out = run_once(pipe())
    return [np.array(out.at(i)) for i in range(len(out))]


def resample(image: np.ndarray, out_to_in: np.ndarray, out_hw, border="constant", fill=0.0, nearest=False,
             corner=True) -> np.ndarray:
    """Sample `image` at out_to_in @ (x, y, 1) (perspective divide) for every output pixel; with `corner`, pixel
    centres sit at +0.5."""
    img = image.astype(np.float64)
    if img.ndim == 2:
        img = img[..., None]
    h, w = img.shape[:2]
    pad = 4
    padded = np.pad(img, [(pad, pad), (pad, pad), (0, 0)], mode="constant", constant_values=fill) \
        if border == "constant" else np.pad(img, [(pad, pad), (pad, pad), (0, 0)], mode=NUMPY_PADS[border])
    ys, xs = np.mgrid[0:out_hw[0], 0:out_hw[1]].astype(np.float64)
    shift = 0.5 if corner else 0.0
    px, py = xs + shift, ys + shift
    den = out_to_in[2, 0] * px + out_to_in[2, 1] * py + out_to_in[2, 2]
    sx = (out_to_in[0, 0] * px + out_to_in[0, 1] * py + out_to_in[0, 2]) / den - shift
    sy = (out_to_in[1, 0] * px + out_to_in[1, 1] * py + out_to_in[1, 2]) / den - shift

    def pixel(yi, xi):
        yi, xi = np.clip(yi + pad, 0, h + 2 * pad - 1), np.clip(xi + pad, 0, w + 2 * pad - 1)
        return padded[yi, xi]

    if nearest:
        out = pixel(np.rint(sy).astype(int), np.rint(sx).astype(int))
    else:
        x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
        fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
        out = ((1 - fy) * ((1 - fx) * pixel(y0, x0) + fx * pixel(y0, x0 + 1))
               + fy * ((1 - fx) * pixel(y0 + 1, x0) + fx * pixel(y0 + 1, x0 + 1)))
    return out.reshape(tuple(out_hw) + image.shape[2:])


def to_type(values: np.ndarray, dtype) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return values.astype(dtype)
    return np.clip(np.rint(values), 0, 255).astype(dtype)


def close(got: np.ndarray, expected: np.ndarray, levels: float = 1) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert max_abs_diff(got, expected) <= (levels if got.dtype.kind != "f" else 1e-4)


CASES = [
    dict(),
    dict(pixel_origin="center"),
    dict(inverse_map=False),
    dict(size=[25, 17]),
    dict(border_mode="replicate"),
    dict(border_mode="reflect"),
    dict(border_mode="reflect_101"),
    dict(border_mode="wrap"),
    dict(fill_value=[7.0]),
    dict(interp_type=types.INTERP_NN),
]


@pytest.mark.parametrize("kwargs", [c for c in CASES if c.get("border_mode") != "wrap"])
def test_matches_numpy_resampler(kwargs):
    matrix = MATRIX if kwargs.get("inverse_map", True) else np.linalg.inv(MATRIX)
    for images in (IMAGES, FLOATS):
        got = run(headrace, images, matrix=MATRIX.ravel().tolist(), **kwargs)
        for out, image in zip(got, images, strict=True):
            expected = resample(image, matrix, kwargs.get("size", image.shape[:2]), kwargs.get("border_mode",
                                "constant"), kwargs.get("fill_value", [0.0])[0],
                                nearest=kwargs.get("interp_type") == types.INTERP_NN,
                                corner=kwargs.get("pixel_origin", "corner") == "corner")
            close(out, to_type(expected, image.dtype))


def test_matrix_input_per_sample_and_fill_per_channel():
    shifts = [np.array([[1, 0, 2], [0, 1, 1], [0, 0, 1]], np.float32), np.eye(3, dtype=np.float32)]
    got = run(headrace, IMAGES, shifts, fill_value=[7.0, 8.0, 9.0])
    np.testing.assert_array_equal(got[0][:-1, :-2], IMAGES[0][1:, 2:])  # output(x, y) = input(x + 2, y + 1)
    np.testing.assert_array_equal(got[0][-1], np.tile([7, 8, 9], (IMAGES[0].shape[1], 1)).astype(np.uint8))
    np.testing.assert_array_equal(got[1], IMAGES[1])


def test_bad_input_names_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"warp_perspective .*sample 0.*give the matrix"):
        run(headrace, IMAGES)
    with pytest.raises(SampleError, match=r"warp_perspective .*sample 0.*'matrix' .* is not invertible"):
        run(headrace, IMAGES, matrix=[1, 2, 0, 2, 4, 0, 0, 0, 0], inverse_map=False)
    with pytest.raises(SampleError, match=r"warp_perspective .*sample 0.*'fill_value' needs 1 or 3 values"):
        run(headrace, IMAGES, matrix=MATRIX.ravel().tolist(), fill_value=[1.0, 2.0])


@pytest.mark.parametrize("kwargs", CASES + [dict(interp_type=types.INTERP_CUBIC),
                                            dict(fill_value=[7.0, 8.0, 9.0], size=[10.6, 12.4])])
@needs_dali[0]
@needs_dali[1]
def test_matches_dali(kwargs):
    import nvidia.dali

    for images, layout in ((IMAGES, "HWC"), (FLOATS, "HW")):
        if len(kwargs.get("fill_value", [])) == 3 and images is FLOATS:
            continue
        ours = run(headrace, images, layout=layout, matrix=MATRIX.ravel().tolist(), **kwargs)
        theirs = run(nvidia.dali, images, layout=layout, matrix=MATRIX.ravel().tolist(), **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            close(a, b)
    matrices = [MATRIX.astype(np.float32), np.linalg.inv(MATRIX).astype(np.float32)]
    for a, b in zip(run(headrace, IMAGES, matrices, layout="HWC"), run(nvidia.dali, IMAGES, matrices, layout="HWC"),
                    strict=True):
        close(a, b)


def smooth(height: int, width: int, channels: int) -> np.ndarray:
    ys, xs = np.mgrid[0:height, 0:width]
    planes = [127 + 100 * np.sin(xs / 7.0 + c) * np.cos(ys / 9.0 - c) for c in range(channels)]
    return np.stack(planes, axis=-1).astype(np.uint8)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", CASES + [dict(interp_type=types.INTERP_CUBIC)])
def test_gpu_matches_cpu(kwargs):
    images = [smooth(40, 50, 3), smooth(23, 31, 3)]
    floats = [image[..., 0].astype(np.float32) / 255 for image in images]
    levels = 2 if kwargs.get("interp_type") == types.INTERP_CUBIC else 1
    for batch in (images, floats):
        def graph(data, device):
            return headrace.fn.experimental.warp_perspective(data, device=device, matrix=MATRIX.ravel().tolist(),
                                                             **kwargs)

        cpu, gpu = cpu_and_gpu(batch, graph)
        for a, b in zip(cpu, gpu, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert max_abs_diff(a, b) <= (levels if a.dtype == np.uint8 else 1e-3)




def test_output_specs_agree_with_the_outputs():
    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        images = fn.external_source(name="images", dtype=types.UINT8, ndim=3, layout="HWC")
        matrix = MATRIX.ravel().tolist()
        return (fn.experimental.warp_perspective(images, matrix=matrix),
                fn.experimental.warp_perspective(images, matrix=matrix, size=[10.6, 12.4]))

    assert_specs_agree(pipe(), images=IMAGES)
