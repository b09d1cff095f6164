"""The GPU image adjustments against their CPU twins on the same inputs (odd sizes, grayscale where the op allows,
uint8 and float, per-sample arguments and argument inputs, batches of one shape and of many).

Tolerances: hsv, color_twist and brightness_contrast are bit-exact (the same float32 coefficients, each product and
sum rounded alone, no FMA, the same rounding into integers). erase and paste are bit-exact (element copies, fill
values converted on the host by the CPU's rule). gaussian_blur: uint8 within 1 level, float32 within 1e-5 of data
in [0, 1] (OpenCV's sepFilter2D sums the symmetric taps in another order). rotate / warp_affine against OpenCV 5's
warpAffine (float32 coordinates, computed in a slightly different order): linear and cubic within 1 level on uint8
and 5e-5 of the data's range on float32; nearest may pick the other neighbour where a coordinate lies within float32
rounding of a tie, at most 0.1% of the pixels. OpenCV 4 quantizes coordinates to 1/32 pixel, so there the
interpolating modes are held to 6 levels (2.5% of the range) and nearest to 2% of the pixels. The record layouts
are checked without a GPU."""

from __future__ import annotations

import re

import cv2
import numpy as np
import pytest

from headrace import fn, types
from headrace.errors import SampleError
from tests.gpu_helpers import cpu_and_gpu, max_level_difference, run_graph

gpu = pytest.mark.gpu
OPENCV5 = int(cv2.__version__.split(".")[0]) >= 5
SHAPES = [(1, 1), (75, 100), (33, 517), (17, 5), (64, 64)]


def _images(shapes, channels=3, dtype=np.uint8, seed=0):
    """Smooth images with edges (synthetic_image) of `shapes`; `channels` 0 gives HW grayscale."""
    from headrace.data.synthetic import synthetic_image

    rng = np.random.default_rng(seed)
    out = []
    for h, w in shapes:
        image = synthetic_image(rng, h, w) if min(h, w) >= 8 else rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        image = image[..., 0] if channels == 0 else image[..., :channels]
        image = np.ascontiguousarray(image)
        out.append(image.astype(np.float32) / 255 if dtype == np.float32 else image.astype(dtype))
    return out


def _per_sample(values, dtype=np.float32):
    """An argument input: one value (or list) per sample, from an external source on the CPU."""
    batch = [np.asarray(v, dtype=dtype) for v in values]
    return fn.external_source(source=lambda: batch)


def _exact(cpu, gpu_out):
    assert max_level_difference(cpu, gpu_out) == 0


# ---- gaussian_blur ----

BLUR_CASES = [dict(window_size=5), dict(sigma=1.3), dict(window_size=[3, 7]),
              dict(sigma=[0.8, 2.0], window_size=[5, 9]), dict(window_size=31)]


@gpu
@pytest.mark.parametrize("kwargs", BLUR_CASES, ids=lambda k: "-".join(f"{a}{b}" for a, b in k.items()))
@pytest.mark.parametrize("channels", [3, 0, 1], ids=["rgb", "hw", "hw1"])
def test_gaussian_blur_uint8_within_one_level(kwargs, channels):
    batch = _images(SHAPES, channels)
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.gaussian_blur(d, **kwargs))
    assert max_level_difference(cpu, gpu_out) <= 1


@gpu
@pytest.mark.parametrize("kwargs", BLUR_CASES[:4], ids=lambda k: "-".join(f"{a}{b}" for a, b in k.items()))
def test_gaussian_blur_float_and_output_types(kwargs):
    batch = _images(SHAPES, 3, np.float32)
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.gaussian_blur(d, **kwargs))
    assert max_level_difference(cpu, gpu_out) <= 1e-5
    same = [image for image in _images([(40, 30)] * 3, 0)]  # one shape: a dense batch
    for dtype, tolerance in ((types.FLOAT, 1e-3), (types.INT16, 1), (types.FLOAT16, 0.5)):
        cpu, gpu_out = cpu_and_gpu(same, lambda d, dev, t=dtype: fn.gaussian_blur(d, dtype=t, **kwargs))
        assert max_level_difference(cpu, gpu_out) <= tolerance


@gpu
def test_gaussian_blur_per_sample_window_and_sigma_as_argument_inputs():
    batch = _images(SHAPES, 3)
    windows = [3, 11, 1, 31, 7]
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.gaussian_blur(d, window_size=_per_sample(windows, np.int32)))
    assert max_level_difference(cpu, gpu_out) <= 1
    sigmas = [[0.5, 1.5], [2.0, 0.7], [1.0, 1.0], [3.0, 0.3], [0.9, 4.0]]
    floats = _images(SHAPES, 0, np.float32)
    cpu, gpu_out = cpu_and_gpu(floats, lambda d, dev: fn.gaussian_blur(d, sigma=_per_sample(sigmas)))
    assert max_level_difference(cpu, gpu_out) <= 1e-5
    # the dynamic_blur pattern of the issue: window size computed per sample from the data (on the CPU side)
    sizes = [2 * int(8 + float((image > 128).mean()) * 150) + 1 for image in batch]
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.gaussian_blur(d, window_size=_per_sample(sizes, np.int32)))
    assert max_level_difference(cpu, gpu_out) <= 1


@gpu
def test_gaussian_blur_even_window_names_the_sample():
    batch = _images(SHAPES[:2], 3)
    with pytest.raises(SampleError, match=r"sample 1.*odd"):
        run_graph(batch, lambda d, dev: fn.gaussian_blur(d, window_size=_per_sample([3, 4], np.int32)), "gpu")


# ---- colour ----

@gpu
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float16], ids=["u8", "f32", "f16"])
def test_hsv_and_color_twist_are_exact(dtype):
    batch = _images(SHAPES, 3, dtype)
    for kwargs in (dict(hue=30.0, saturation=1.4, value=0.8), dict(hue=-170.0, saturation=0.2, value=1.3)):
        _exact(*cpu_and_gpu(batch, lambda d, dev, k=kwargs: fn.hsv(d, **k)))
        _exact(*cpu_and_gpu(batch, lambda d, dev, k=kwargs: fn.hsv(d, dtype=types.FLOAT, **k)))
    for kwargs in (dict(brightness=1.2, contrast=0.7, hue=45.0, saturation=1.5), dict(contrast=1.6, hue=-20.0)):
        _exact(*cpu_and_gpu(batch, lambda d, dev, k=kwargs: fn.color_twist(d, **k)))
    hues, saturations = [0, 90, -45, 180, 12.5], [1.0, 0.0, 2.0, 0.5, 1.1]
    _exact(*cpu_and_gpu(batch, lambda d, dev: fn.hsv(d, hue=_per_sample(hues), saturation=_per_sample(saturations))))
    _exact(*cpu_and_gpu(batch, lambda d, dev: fn.color_twist(d, hue=_per_sample(hues), contrast=_per_sample(
        saturations), brightness=0.9)))


@gpu
@pytest.mark.parametrize("channels", [3, 0, 1], ids=["rgb", "hw", "hw1"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int16], ids=["u8", "f32", "i16"])
def test_brightness_contrast_is_exact(channels, dtype):
    batch = _images(SHAPES, channels, dtype)
    for kwargs in (dict(brightness=1.3, contrast=0.6), dict(brightness_shift=0.1, contrast=1.5, contrast_center=40.0),
                   dict(brightness=0.5, dtype=types.FLOAT), dict(contrast=2.0, dtype=types.UINT8)):
        _exact(*cpu_and_gpu(batch, lambda d, dev, k=kwargs: fn.brightness_contrast(d, **k)))
    brightness, contrast = [0.5, 1.0, 1.5, 2.0, 0.1], [1.0, 0.3, 1.7, 0.9, 3.0]
    _exact(*cpu_and_gpu(batch, lambda d, dev: fn.brightness_contrast(d, brightness=_per_sample(brightness),
                                                                     contrast=_per_sample(contrast))))


@gpu
def test_hsv_on_grayscale_names_the_sample():
    with pytest.raises(SampleError, match=r"hsv.*sample 0.*3 channels"):
        run_graph(_images(SHAPES[:2], 0), lambda d, dev: fn.hsv(d, hue=10.0), "gpu")


# ---- warps ----

def _warp_tolerance(interp: int, dtype, data_range: float) -> tuple[float, float]:
    """(largest difference, largest fraction of differing pixels) allowed for this OpenCV."""
    if interp == types.INTERP_NN:
        return 255, (1e-3 if OPENCV5 else 0.02)
    if not OPENCV5:
        return (6, 1.0) if dtype == np.uint8 else (6 / 255 * data_range, 1.0)
    return (1, 1.0) if dtype == np.uint8 else (5e-5 * data_range, 1.0)


def _check_warp(cpu, gpu_out, interp, dtype, data_range: float = 1.0):
    largest, fraction = _warp_tolerance(interp, dtype, data_range)
    assert max_level_difference(cpu, gpu_out) <= largest
    if fraction < 1:
        differing = sum(int(np.count_nonzero((a != b).reshape(a.shape[0], a.shape[1], -1).any(axis=2)))
                        for a, b in zip(cpu, gpu_out, strict=True))
        assert differing <= fraction * sum(a.shape[0] * a.shape[1] for a in cpu), differing


INTERPS = [types.INTERP_NN, types.INTERP_LINEAR, types.INTERP_CUBIC]


@gpu
@pytest.mark.parametrize("interp", INTERPS, ids=["nn", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["u8", "f32"])
def test_rotate_matches_cpu(interp, dtype):
    batch = _images(SHAPES, 3, dtype)
    gray = _images(SHAPES, 0, dtype)
    for kwargs in (dict(angle=30.0), dict(angle=90.0), dict(angle=-17.3, fill_value=0.5),
                   dict(angle=200.0, keep_size=True), dict(angle=45.0, size=[50, 41], fill_value=7.0)):
        for data in (batch, gray):
            cpu, gpu_out = cpu_and_gpu(data, lambda d, dev, k=kwargs: fn.rotate(d, interp_type=interp, **k))
            _check_warp(cpu, gpu_out, interp, dtype)
    angles = [0.0, 33.0, 90.0, -120.5, 271.0]
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.rotate(d, angle=_per_sample(angles), interp_type=interp))
    _check_warp(cpu, gpu_out, interp, dtype)


@gpu
@pytest.mark.parametrize("interp", INTERPS, ids=["nn", "linear", "cubic"])
def test_warp_affine_matches_cpu(interp):
    batch = _images(SHAPES, 3)
    matrix = [0.9, 0.2, 3.5, -0.15, 1.1, -2.25]
    for kwargs in (dict(matrix=matrix), dict(matrix=matrix, inverse_map=False, fill_value=255.0),
                   dict(matrix=matrix, size=[20, 37], dtype=types.FLOAT)):
        cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev, k=kwargs: fn.warp_affine(d, interp_type=interp, **k))
        _check_warp(cpu, gpu_out, interp, np.float32 if "dtype" in kwargs else np.uint8, 255.0)
    rng = np.random.default_rng(5)
    matrices = [np.array([[1, 0, 0], [0, 1, 0]]) + rng.normal(0, 0.2, (2, 3)) for _ in SHAPES]
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.warp_affine(d, matrix=_per_sample(matrices),
                                                                    interp_type=interp))
    _check_warp(cpu, gpu_out, interp, np.uint8)
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.warp_affine(d, _per_sample(matrices), interp_type=interp))
    _check_warp(cpu, gpu_out, interp, np.uint8)


# ---- erase and paste ----

@gpu
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int16], ids=["u8", "f32", "i16"])
def test_erase_is_exact(dtype):
    batch = _images(SHAPES, 3, dtype)
    gray = _images(SHAPES, 0, dtype)
    for data, kwargs in ((batch, dict(anchor=[2, 3], shape=[10, 20], fill_value=[9, 200, 300])),
                         (batch, dict(anchor=[0.1, 0.2, 0.5, 0.5], shape=[0.3, 0.3, 0.6, 0.2], normalized=True)),
                         (gray, dict(anchor=[20, 30], shape=[15, 40], centered_anchor=True, fill_value=[-5])),
                         (batch, dict(anchor=[1], shape=[1], axes=[2], fill_value=[77])),
                         (gray, dict(anchor=[-3, 50], shape=[1000, 4.5], axis_names="HW", normalized_shape=False))):
        _exact(*cpu_and_gpu(data, lambda d, dev, k=kwargs: fn.erase(d, **k)))
    anchors = [[0, 0], [10, 20], [5, 90], [0.5, 1], [30, 30]]
    shapes = [[1, 1], [20, 8], [40, 400], [3.7, 2.2], [10, 100]]
    fills = [[1, 2, 3], [4], [250, 0, 128], [7, 7, 7], [0.5]]
    cpu, gpu_out = cpu_and_gpu(batch, lambda d, dev: fn.erase(d, anchor=_per_sample(anchors), shape=_per_sample(
        shapes), fill_value=_per_sample(fills[:1] * len(SHAPES))))
    _exact(cpu, gpu_out)
    for fill in fills:
        per = [fill] * len(SHAPES)
        _exact(*cpu_and_gpu(batch, lambda d, dev, f=per: fn.erase(d, anchor=[3, 4], shape=[9, 9],
                                                                   fill_value=_per_sample(f))))


@gpu
def test_erase_on_a_chw_mask_as_in_the_issue():
    """mask (2, H, W) of zeros, a per-sample square at (y, x) over axes (1, 2) filled with a per-sample value."""
    masks = [np.zeros((2, 37, 51), np.float32) for _ in range(4)]
    anchors, fills = [[3, 4], [30, 40], [-2, 10], [0, 0]], [[0.25], [0.5], [1.5], [-1.0]]
    cpu, gpu_out = cpu_and_gpu(masks, lambda d, dev: fn.erase(d, anchor=_per_sample(anchors), shape=[8, 8],
                                                              fill_value=_per_sample(fills), axes=(1, 2)))
    _exact(cpu, gpu_out)
    assert gpu_out[1][:, 30:37, 40:48].min() == 0.5 and gpu_out[1].sum() == 0.5 * 2 * 7 * 8


@gpu
@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["u8", "f32"])
def test_paste_is_exact(dtype):
    batch = _images(SHAPES, 3, dtype)
    for kwargs in (dict(ratio=2.0), dict(ratio=1.5, paste_x=0.0, paste_y=1.0, fill_value=[10, 20, 300]),
                   dict(ratio=1.0, min_canvas_size=90.0, fill_value=[-1.5])):
        _exact(*cpu_and_gpu(batch, lambda d, dev, k=kwargs: fn.paste(d, **k)))
    ratios, xs = [1.0, 3.0, 1.25, 2.5, 1.7], [0.0, 0.3, 1.0, 0.5, 0.77]
    _exact(*cpu_and_gpu(batch, lambda d, dev: fn.paste(d, ratio=_per_sample(ratios), paste_x=_per_sample(xs),
                                                       paste_y=_per_sample(xs[::-1]))))
    four = [np.concatenate([image, image[..., :1]], axis=2) for image in batch]
    _exact(*cpu_and_gpu(four, lambda d, dev: fn.paste(d, ratio=2.0, n_channels=4, fill_value=[1, 2, 3, 4])))


@gpu
def test_paste_bad_ratio_names_the_sample():
    with pytest.raises(SampleError, match=r"sample 1.*ratio"):
        run_graph(_images(SHAPES[:2]), lambda d, dev: fn.paste(d, ratio=_per_sample([1.5, 0.5])), "gpu")


# ---- without a GPU: the host records match the CUDA structs ----

@pytest.mark.parametrize("source, struct, module, record", [
    ("filter.cu", "BlurSample", "filter_ops", "RECORD"), ("color.cu", "ColorSample", "color_ops", "RECORD"),
    ("warp.cu", "WarpSample", "warp_ops", "RECORD"), ("region.cu", "EraseSample", "region_ops", "ERASE"),
    ("region.cu", "PasteSample", "region_ops", "PASTE")])
def test_records_match_the_cuda_structs(source, struct, module, record):
    import importlib

    from headrace_kernels.gpu.runtime import kernel_source

    text = kernel_source(source)
    start = text.index(f"struct {struct} {{")
    body = text[start:text.index("};", start)]
    names = []
    for match in re.finditer(r"^\s*(unsigned long long|long long|int|float)\s+([^;]+);", body, re.MULTILINE):
        names += [name.strip().split("[")[0] for name in match.group(2).split(",")]
    dtype = getattr(importlib.import_module(f"headrace_kernels.gpu.{module}"), record)
    assert names == list(dtype.names)
