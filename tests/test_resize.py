"""fn.resize: output sizes by DALI's rules, pixel values against Pillow / OpenCV / numpy and DALI's CPU build.

Tolerances: uint8 outputs within 1 grey level of the reference (rounding of the float result), except where a
filter is compared away from the border (Pillow renormalises edge taps, DALI and headrace replicate the edge).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from oprun import needs_dali, run_dali, run_headrace
from PIL import Image

from headrace import SchemaError, fn, pipeline_def, types

INTERPS = ["INTERP_NN", "INTERP_LINEAR", "INTERP_CUBIC", "INTERP_LANCZOS3", "INTERP_TRIANGULAR"]


def resize(images, **kwargs) -> list[np.ndarray]:
    return run_headrace(lambda x: fn.resize(x, **kwargs), images)[0]


def out_hw(shape_hw, **kwargs) -> tuple[int, int]:
    return resize([np.zeros((*shape_hw, 1), np.uint8)], interp_type=types.INTERP_NN, **kwargs)[0].shape[:2]


# Output sizes ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, kwargs, expected", [
    # DALI's documented examples (its docs give width x height)
    ((720, 1280), dict(size=[480, 640], mode="not_larger"), (360, 640)),
    ((480, 640), dict(size=[1080, 1920], mode="not_smaller"), (1440, 1920)),
    ((600, 1200), dict(size=[800, 800], mode="not_smaller", max_size=[1400]), (700, 1400)),
    # the validation pipeline's resize: shorter side 256, the longer one in proportion, rounded to nearest
    ((375, 500), dict(resize_shorter=256), (256, 341)),
    ((500, 375), dict(resize_shorter=256), (341, 256)),
    ((375, 500), dict(resize_longer=100), (75, 100)),
    ((375, 500), dict(resize_shorter=256, max_size=[300]), (225, 300)),
    # one extent given: 'default' scales the other alike, 'stretch' keeps it
    ((60, 80), dict(resize_x=40), (30, 40)),
    ((60, 80), dict(resize_y=30), (30, 40)),
    ((60, 80), dict(resize_x=40, mode="stretch"), (60, 40)),
    ((60, 80), dict(size=[0, 40]), (30, 40)),
    ((60, 80), dict(size=[30, 0], mode="stretch"), (30, 80)),
    # both given: exact in default/stretch; max_size clamps each extent there
    ((60, 80), dict(resize_x=50, resize_y=30), (30, 50)),
    ((60, 80), dict(resize_x=50, resize_y=30, max_size=[40, 40]), (30, 40)),
    ((60, 80), dict(resize_x=100, resize_y=100, mode="not_larger"), (75, 100)),
    ((60, 80), dict(resize_x=100, resize_y=100, mode="not_smaller"), (100, 133)),
    # never below one pixel
    ((1000, 10), dict(resize_x=1), (100, 1)),
    ((10, 1000), dict(resize_x=50), (1, 50)),
])
def test_output_size_rules(shape, kwargs, expected):
    assert out_hw(shape, **kwargs) == expected


def test_size_is_rounded_in_float32_like_dali():
    # 5 * 33.3 / 3 is 55.5 in real numbers but 55.4999 in DALI's float32 arithmetic: DALI gives 55
    assert out_hw((5, 3), resize_x=33.3) == (55, 33)


@pytest.mark.parametrize("kwargs, message", [
    (dict(resize_shorter=10, mode="not_larger"), "exclude each other"),
    (dict(resize_shorter=10, resize_longer=10), "one way"),
    (dict(resize_x=10, size=[10, 10]), "one way"),
    (dict(), "one way"),
])
def test_conflicting_size_arguments_fail_at_definition(kwargs, message):
    with pytest.raises(SchemaError, match=message) as info:
        @pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            return fn.resize(fn.external_source(name="x"), **kwargs)

        pipe()
    assert "resize" in str(info.value)


SIZE_CASES = [dict(resize_x=50), dict(resize_y=50), dict(resize_x=50, resize_y=30), dict(size=[30, 50]),
              dict(size=[0, 47]), dict(size=[47, 0]), dict(resize_x=33.3), dict(resize_x=224, resize_y=224),
              dict(resize_x=50, resize_y=30, max_size=[40, 40]), dict(resize_x=50, max_size=[20])]
SIZE_SHAPES = [(1, 1), (3, 5), (5, 3), (37, 61), (61, 37), (100, 100), (480, 640), (333, 500), (17, 1000)]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("mode", ["default", "stretch", "not_larger", "not_smaller", None])
def test_output_sizes_match_dali(mode):
    samples = [np.zeros((h, w, 1), np.uint8) for h, w in SIZE_SHAPES]
    cases = SIZE_CASES if mode else [dict(resize_shorter=47), dict(resize_longer=47), dict(resize_shorter=256),
                                     dict(resize_shorter=47, max_size=[60]), dict(resize_longer=47, max_size=[30, 60])]
    for case in cases:
        kwargs = dict(case, interp_type=types.INTERP_NN, **({"mode": mode} if mode else {}))
        ours = [a.shape for a in run_headrace(lambda x, kw=kwargs: fn.resize(x, **kw), samples)[0]]
        dali = [a.shape for a in run_dali(lambda x, f, kw=kwargs: f.resize(x, **kw), samples)[0]]
        assert ours == dali, kwargs


# Pixel values ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def image(rgb_image):
    return np.ascontiguousarray(rgb_image[:60, :80])


def nn_reference(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    ys = np.floor((np.arange(out_h) + 0.5) * image.shape[0] / out_h).astype(int)
    xs = np.floor((np.arange(out_w) + 0.5) * image.shape[1] / out_w).astype(int)
    return image[ys][:, xs]


@pytest.mark.parametrize("out_hw", [(30, 40), (120, 160), (180, 80), (97, 131), (23, 29)])
def test_nearest_samples_pixel_centres(image, out_hw):
    out = resize([image], resize_y=out_hw[0], resize_x=out_hw[1], interp_type=types.INTERP_NN)[0]
    np.testing.assert_array_equal(out, nn_reference(image, *out_hw))
    if out_hw[0] % 60 == 0 and out_hw[1] % 80 == 0:  # whole-number zoom: Pillow agrees exactly
        pil = np.asarray(Image.fromarray(image).resize(out_hw[::-1], Image.NEAREST))
        np.testing.assert_array_equal(out, pil)


@pytest.mark.parametrize("interp", ["INTERP_LINEAR", "INTERP_TRIANGULAR"])
@pytest.mark.parametrize("out_hw", [(120, 160), (97, 131)])
def test_linear_upscale_matches_opencv(image, interp, out_hw):
    out = resize([image], resize_y=out_hw[0], resize_x=out_hw[1], interp_type=getattr(types, interp))[0]
    ref = cv2.resize(image, out_hw[::-1], interpolation=cv2.INTER_LINEAR)
    assert np.abs(out.astype(int) - ref).max() <= 1


@pytest.mark.parametrize("out_hw", [(30, 40), (23, 29), (45, 35)])
def test_linear_downscale_without_antialias_samples_like_opencv(image, out_hw):
    for interp in (types.INTERP_LINEAR, types.INTERP_TRIANGULAR):
        out = resize([image], resize_y=out_hw[0], resize_x=out_hw[1], interp_type=interp, antialias=False)[0]
        ref = cv2.resize(image, out_hw[::-1], interpolation=cv2.INTER_LINEAR)
        assert np.abs(out.astype(int) - ref).max() <= 1


def _interior(a: np.ndarray, border: int) -> np.ndarray:
    return a[border:-border, border:-border]


@pytest.mark.parametrize("interp, pil_filter", [("INTERP_LINEAR", Image.BILINEAR), ("INTERP_TRIANGULAR",
                                                                                     Image.BILINEAR),
                                                ("INTERP_CUBIC", Image.BICUBIC), ("INTERP_LANCZOS3", Image.LANCZOS)])
@pytest.mark.parametrize("out_hw", [(30, 40), (23, 29), (120, 160), (71, 53)])
def test_filters_match_pillow_away_from_the_border(image, interp, pil_filter, out_hw):
    """Pillow's antialiased filters, computed in float ('F' mode) so that its uint8 intermediate rounding does not
    count: within 1 grey level everywhere the filter does not reach the border."""
    out = resize([image], resize_y=out_hw[0], resize_x=out_hw[1], interp_type=getattr(types, interp))[0]
    planes = [np.asarray(Image.fromarray(image[..., c].astype(np.float32), "F").resize(out_hw[::-1], pil_filter))
              for c in range(3)]
    ref = np.clip(np.rint(np.stack(planes, -1)), 0, 255)
    border = 3 + int(np.ceil(3 * max(1.0, out_hw[0] / image.shape[0], out_hw[1] / image.shape[1])))
    assert np.abs(_interior(out.astype(int), border) - _interior(ref, border)).max() <= 1


def test_antialias_matters_when_shrinking(image):
    """A 3x shrink of a 1-pixel checkerboard: sampling hits single pixels (pure black and white), the antialiased
    filter averages to mid-grey."""
    board = (np.indices((63, 63)).sum(0) % 2 * 255).astype(np.uint8)[..., None]
    smooth = resize([board], resize_x=21, resize_y=21, interp_type=types.INTERP_LINEAR)[0]
    sampled = resize([board], resize_x=21, resize_y=21, interp_type=types.INTERP_LINEAR, antialias=False)[0]
    assert np.abs(smooth[1:-1, 1:-1].astype(int) - 128).max() <= 16  # the corners see replicated edges
    assert set(np.unique(sampled)) == {0, 255}


def test_gray_and_float_inputs(image):
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)[..., None]
    out = resize([gray], resize_x=40, resize_y=30)[0]
    assert out.shape == (30, 40, 1) and out.dtype == np.uint8
    as_float = resize([image.astype(np.float32)], resize_x=40, resize_y=30, interp_type=types.INTERP_CUBIC)[0]
    as_uint8 = resize([image], resize_x=40, resize_y=30, interp_type=types.INTERP_CUBIC)[0]
    assert as_float.dtype == np.float32
    assert np.abs(np.clip(np.rint(as_float), 0, 255) - as_uint8).max() <= 1
    to_float = resize([image], resize_x=40, resize_y=30, dtype=types.FLOAT)[0]
    linear = resize([image], resize_x=40, resize_y=30)[0]
    assert to_float.dtype == np.float32 and np.abs(to_float - linear).max() <= 1


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("interp", INTERPS)
def test_values_match_dali(image, interp):
    for antialias in (True, False):
        for out_hw in [(30, 40), (45, 35), (120, 160), (97, 131), (30, 120), (61, 37)]:
            kwargs = dict(resize_y=out_hw[0], resize_x=out_hw[1], interp_type=getattr(types, interp),
                          antialias=antialias)
            ours = run_headrace(lambda x, kw=kwargs: fn.resize(x, **kw), [image])[0][0].astype(int)
            dali = run_dali(lambda x, f, kw=kwargs: f.resize(x, **kw), [image])[0][0].astype(int)
            diff = np.abs(ours - dali)
            tolerance = 0 if interp == "INTERP_NN" else 1
            assert diff.max() <= tolerance and diff.mean() < 0.3, (kwargs, diff.max(), diff.mean())


@pytest.mark.dali
@needs_dali
def test_float_output_matches_dali_unrounded(image):
    """dtype=FLOAT resamples a uint8 image in float (no rounding to the input's levels): within 0.1 of DALI, whose
    cubic and Lanczos weights come from tabulated filters."""
    for interp in INTERPS:
        for out_hw in [(30, 40), (120, 160), (45, 100)]:
            kwargs = dict(resize_y=out_hw[0], resize_x=out_hw[1], interp_type=getattr(types, interp),
                          dtype=types.FLOAT)
            ours = run_headrace(lambda x, kw=kwargs: fn.resize(x, **kw), [image])[0][0]
            dali = run_dali(lambda x, f, kw=kwargs: f.resize(x, **kw), [image])[0][0]
            assert ours.dtype == dali.dtype == np.float32
            assert np.abs(ours - dali).max() <= 0.1, kwargs


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.int32, np.float16, np.float64])
@pytest.mark.parametrize("out_hw", [(30, 40), (90, 120)])
def test_other_element_types_resample_like_float(image, dtype, out_hw):
    """Any element type: the float32 result, rounded and saturated to the input's type (float16 within its
    precision)."""
    src = image.astype(dtype)
    out = resize([src], resize_y=out_hw[0], resize_x=out_hw[1])[0]
    ref = resize([image.astype(np.float32)], resize_y=out_hw[0], resize_x=out_hw[1])[0]
    assert out.dtype == dtype
    tolerance = 0.51 if np.dtype(dtype).kind in "iu" else 0.25  # rounding, plus float32 noise on a tie
    assert np.abs(out.astype(np.float64) - ref).max() <= tolerance


def bilinear_reference(image: np.ndarray, out_h: int, out_w: int, region) -> np.ndarray:
    """Plain bilinear sampling of `region` (y0, x0, y1, x1) at output pixel centres, edges replicated."""
    y0, x0, y1, x1 = region

    def axis(lo, hi, n, size):
        pos = lo + (np.arange(n) + 0.5) * (hi - lo) / n - 0.5
        left = np.floor(pos).astype(int)
        frac = pos - left
        return np.clip(left, 0, size - 1), np.clip(left + 1, 0, size - 1), frac

    ya, yb, fy = axis(y0, y1, out_h, image.shape[0])
    xa, xb, fx = axis(x0, x1, out_w, image.shape[1])
    img = image.astype(np.float64)
    top = img[ya][:, xa] * (1 - fx)[None, :, None] + img[ya][:, xb] * fx[None, :, None]
    bottom = img[yb][:, xa] * (1 - fx)[None, :, None] + img[yb][:, xb] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]


@pytest.mark.parametrize("asked", [(77.6, 100.4), (120.3, 161.7), (90.5, 90.5)])
def test_subpixel_scale_keeps_the_exact_scale(image, asked):
    """A fractional size: with subpixel_scale (the default) the output samples the image at the scale asked, about
    the centre; without it the image is stretched onto the rounded size."""
    out_hw = tuple(int(np.floor(a + 0.5)) for a in asked)
    kept = resize([image], resize_y=asked[0], resize_x=asked[1])[0]
    stretched = resize([image], resize_y=asked[0], resize_x=asked[1], subpixel_scale=False)[0]
    assert kept.shape[:2] == stretched.shape[:2] == out_hw
    h, w = image.shape[:2]
    region = [h / 2 * (1 - out_hw[0] / asked[0]), w / 2 * (1 - out_hw[1] / asked[1])]
    region += [h - region[0], w - region[1]]
    assert np.abs(kept - bilinear_reference(image, *out_hw, region)).max() <= 1
    assert np.abs(stretched - bilinear_reference(image, *out_hw, (0, 0, h, w))).max() <= 1


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("interp", INTERPS)
def test_fractional_sizes_match_dali(interp):
    from headrace.data.synthetic import synthetic_image

    images = [synthetic_image(np.random.default_rng(s), *s) for s in [(75, 100), (67, 100), (100, 61)]]
    for kwargs in [dict(resize_shorter=51), dict(resize_x=20.4, resize_y=15.6), dict(resize_longer=140),
                   dict(resize_x=33.3), dict(size=[51.5, 0]), dict(resize_shorter=51, subpixel_scale=False),
                   dict(resize_x=130.3, resize_y=99.8, antialias=False)]:
        kwargs = dict(kwargs, interp_type=getattr(types, interp))
        ours = run_headrace(lambda x, kw=kwargs: fn.resize(x, **kw), images)[0]
        dali = run_dali(lambda x, f, kw=kwargs: f.resize(x, **kw), images)[0]
        for a, b in zip(ours, dali, strict=True):
            assert a.shape == b.shape, kwargs
            diff = np.abs(a.astype(int) - b)
            if interp == "INTERP_NN":  # a source position on a pixel boundary may fall either side in float32
                assert np.mean(diff > 0) < 0.005, kwargs
            else:
                assert diff.max() <= 1 and diff.mean() < 0.3, kwargs
