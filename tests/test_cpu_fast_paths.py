"""The CPU fast paths behind the training pipeline: numba's triangle resampler and crop_mirror_normalize through
OpenCV's LUT, each against a plain numpy reference.

Tolerances: crop_mirror_normalize is bit-exact (the same float32 formula, evaluated once per level). The resampler
is within 1 grey level of a float64 evaluation of the same filter (float32 sums may round the other way at .5) and
within 1e-3 for float32 images.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from headrace import fn, pipeline_def, types
from headrace_kernels.cpu.resampling import resample_linear, triangle_taps


def run_op(build, samples: list[np.ndarray], num_threads: int = 1) -> list[np.ndarray]:
    """Feed `samples` as one batch to `build(node)` and return its output samples."""

    @pipeline_def(batch_size=len(samples), num_threads=num_threads, device_id=None, seed=3)
    def pipe():
        return build(fn.external_source(name="x"))

    p = pipe()
    (out,) = p.run(x=samples)
    result = [np.array(out.at(i)) for i in range(len(out))]
    p.close()
    return result


# The triangle resampler ------------------------------------------------------------------------------------------

def triangle_matrix(in_size: int, out_size: int, antialias: bool, lo: float = 0.0, hi: float | None = None
                    ) -> np.ndarray:
    """(out, in) float64 weights mapping the source span [lo, hi) onto out_size pixels: centres aligned,
    half-width max(1, scale) with antialias, edge replicated."""
    hi = in_size if hi is None else hi
    scale = (hi - lo) / out_size
    stretch = max(1.0, scale) if antialias else 1.0
    matrix = np.zeros((out_size, in_size))
    for o in range(out_size):
        centre = lo + (o + 0.5) * scale - 0.5
        taps = np.arange(int(np.floor(centre - stretch)) - 1, int(np.ceil(centre + stretch)) + 2)
        weights = np.maximum(0.0, 1.0 - np.abs(taps - centre) / stretch)
        np.add.at(matrix[o], np.clip(taps, 0, in_size - 1), weights / weights.sum())
    return matrix


def reference_resample(image: np.ndarray, out_h: int, out_w: int, antialias: bool = True,
                       region: tuple[float, float, float, float] | None = None) -> np.ndarray:
    y0, x0, y1, x1 = region or (0.0, 0.0, image.shape[0], image.shape[1])
    rows = triangle_matrix(image.shape[0], out_h, antialias, y0, y1)
    cols = triangle_matrix(image.shape[1], out_w, antialias, x0, x1)
    return np.einsum("oh,hwc,pw->opc", rows, image.astype(np.float64), cols)


@pytest.fixture(scope="module")
def photo(rgb_image):
    return np.ascontiguousarray(rgb_image)  # 75 x 100 RGB


@pytest.mark.parametrize("out_hw", [(50, 40), (37, 61), (9, 13), (75, 33), (120, 40), (1, 1), (75, 100)])
def test_resampler_matches_float64_reference(photo, out_hw):
    out = resample_linear(photo, *out_hw)
    ref = reference_resample(photo, *out_hw)
    assert out.shape == (*out_hw, 3) and out.dtype == np.uint8
    assert np.abs(out.astype(int) - np.clip(np.rint(ref), 0, 255)).max() <= 1
    as_float = resample_linear(photo.astype(np.float32), *out_hw)
    assert as_float.dtype == np.float32 and np.abs(as_float - ref).max() < 1e-3


@pytest.mark.parametrize("channels", [1, 2, 4, 5])
def test_resampler_any_channel_count(photo, channels):
    image = np.ascontiguousarray(np.concatenate([photo, photo[..., ::-1]], axis=2)[..., :channels])
    out = resample_linear(image, 30, 41)
    assert out.shape == (30, 41, channels)
    assert np.abs(out.astype(int) - np.clip(np.rint(reference_resample(image, 30, 41)), 0, 255)).max() <= 1


def test_resampler_writes_into_out_and_takes_views(photo):
    view = photo[5:70, 10:90]  # not contiguous
    out = np.empty((40, 50, 3), np.uint8)
    result = resample_linear(view, 40, 50, out=out)
    assert np.shares_memory(result, out)
    np.testing.assert_array_equal(out, resample_linear(np.ascontiguousarray(view), 40, 50))


def test_resampler_rejects_empty_images_and_other_types(photo):
    with pytest.raises(ValueError, match="cannot resample"):
        resample_linear(photo[:0], 10, 10)
    with pytest.raises(TypeError, match="uint8 or float32"):
        resample_linear(photo.astype(np.int16), 10, 10)


def test_resampler_without_antialias_is_linear_interpolation(photo):
    out = resample_linear(photo, 30, 40, antialias=False)
    assert np.abs(out.astype(int) - np.clip(np.rint(reference_resample(photo, 30, 40, False)), 0, 255)).max() <= 1


def test_taps_are_normalized_and_clamped():
    index, weight = triangle_taps(10, 3, True, 0.0, 10.0)
    np.testing.assert_allclose(weight.sum(axis=1), 1.0, atol=1e-6)
    assert index.min() >= 0 and index.max() <= 9
    index, weight = triangle_taps(3, 10, True, 0.0, 3.0)  # growing: a 2-tap linear interpolation
    assert (np.count_nonzero(weight, axis=1) <= 2).all()


@pytest.mark.parametrize("region", [(2.5, 3.25, 70.5, 91.75), (-4.0, -2.5, 79.0, 102.5), (10.0, 0.0, 20.0, 100.0)])
def test_resampler_maps_a_source_region(photo, region):
    """A fractional source region (resize's subpixel_scale), also one reaching past the border."""
    out = resample_linear(photo, 30, 41, region=region)
    ref = reference_resample(photo, 30, 41, region=region)
    assert np.abs(out.astype(int) - np.clip(np.rint(ref), 0, 255)).max() <= 1


def test_resampler_agrees_with_pillow_away_from_the_border(photo):
    """Pillow's antialiased BILINEAR is the same triangle; it renormalizes at the border instead of replicating
    the edge pixel and rounds its intermediate to uint8, hence 1 grey level and the interior only."""
    out = resample_linear(photo, 31, 43)
    pil = np.asarray(Image.fromarray(photo).resize((43, 31), Image.BILINEAR)).astype(int)
    assert np.abs(out.astype(int) - pil)[3:-3, 3:-3].max() <= 1


def test_resize_op_uses_it_and_is_the_same_for_any_thread_count(photo):
    samples = [photo, np.ascontiguousarray(photo[::-1, :60]), np.ascontiguousarray(photo[:40])]
    one = run_op(lambda x: fn.resize(x, resize_x=32, resize_y=24), samples, num_threads=1)
    two = run_op(lambda x: fn.resize(x, resize_x=32, resize_y=24), samples, num_threads=2)
    for image, a, b in zip(samples, one, two, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, resample_linear(image, 24, 32))


# crop_mirror_normalize through OpenCV's LUT --------------------------------------------------------------------
# A uint8 image goes through a per-level table (OpenCV's LUT); any other input type through the formula itself.
# The table holds the same float32 formula's values, so both paths must agree bit for bit, whatever the rounding
# and fill rules are; float outputs are also checked against the formula written out here.

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255, 100.0]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255, 50.0]


def cmn_both_paths(image: np.ndarray, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """The op's output for `image` as uint8 (table path) and as float32 (formula path)."""
    build = lambda x: fn.crop_mirror_normalize(x, **kwargs)  # noqa: E731
    return run_op(build, [image])[0], run_op(build, [image.astype(np.float32)])[0]


def formula(image: np.ndarray, channels: int, dtype, mirror: bool, layout: str) -> np.ndarray:
    """(x - mean) * (1 / std) in float32, cast to a float type."""
    values = (image.astype(np.float32) - np.float32(MEAN[:channels])) * (np.float32(1) / np.float32(STD[:channels]))
    values = values.astype(dtype)[:, ::-1] if mirror else values.astype(dtype)
    return np.ascontiguousarray(values.transpose(2, 0, 1) if layout == "CHW" else values)


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("dtype", [types.FLOAT, types.FLOAT16, types.UINT8, types.INT8, types.INT16, types.INT32])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("mirror", [0, 1])
def test_cmn_table_path_equals_formula_path(photo, dtype, layout, mirror):
    scale, shift = (64.0, 128.0) if dtype in (types.UINT8, types.INT8, types.INT16, types.INT32) else (1.0, 0.0)
    table, direct = cmn_both_paths(photo, dtype=dtype, output_layout=layout, mean=MEAN[:3], std=STD[:3],
                                   mirror=mirror, scale=scale, shift=shift)
    assert_same_bits(table, direct)
    if dtype in (types.FLOAT, types.FLOAT16):
        assert_same_bits(table, formula(photo, 3, table.dtype, mirror, layout))


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_cmn_crop_and_channels(photo, channels, layout):
    image = np.ascontiguousarray(np.concatenate([photo, photo[..., :1]], axis=2)[..., :channels])
    table, direct = cmn_both_paths(image, crop=(40, 50), crop_pos_x=0.3, crop_pos_y=0.8, mirror=1,
                                   output_layout=layout, dtype=types.FLOAT16, mean=MEAN[:channels],
                                   std=STD[:channels])
    assert_same_bits(table, direct)
    y, x = int(np.floor(0.8 * 35 + 0.5)), int(np.floor(0.3 * 50 + 0.5))
    assert_same_bits(table, formula(image[y:y + 40, x:x + 50], channels, np.float16, True, layout))


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("dtype", [types.FLOAT, types.UINT8])
def test_cmn_padding_and_pad_output(photo, layout, dtype):
    """A window past the right/bottom edge with out_of_bounds_policy='pad', plus a fourth channel."""
    table, direct = cmn_both_paths(photo, crop=(90, 110), crop_pos_x=0.0, crop_pos_y=0.0, out_of_bounds_policy="pad",
                                   pad_output=True, mirror=1, output_layout=layout, dtype=dtype, mean=MEAN[:3],
                                   std=STD[:3], fill_values=[7.0])
    assert_same_bits(table, direct)
    chw = table if layout == "CHW" else table.transpose(2, 0, 1)
    assert chw.shape == (4, 90, 110)
    if dtype == types.FLOAT:  # mirrored: the padding moved to the left
        np.testing.assert_array_equal(chw[:3, :75, 10:], formula(photo, 3, np.float32, True, "CHW"))
