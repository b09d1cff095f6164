"""gaussian_blur against OpenCV's GaussianBlur (reflect-101 borders) and DALI's CPU operator."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from ops_support import max_abs_diff, needs_dali, run_dali, run_headrace

from headrace.errors import SampleError

RNG = np.random.default_rng(0)
IMAGES_U8 = [RNG.integers(0, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
IMAGES_F32 = [RNG.uniform(0, 1, (15, 21)).astype(np.float32), RNG.uniform(-1, 1, (8, 30)).astype(np.float32)]


def opencv_blur(image: np.ndarray, window_hw: tuple[int, int], sigma_hw: tuple[float, float]) -> np.ndarray:
    return cv2.GaussianBlur(image, (window_hw[1], window_hw[0]), sigmaX=sigma_hw[1], sigmaY=sigma_hw[0],
                            borderType=cv2.BORDER_REFLECT_101)


def _opencv_sigma(window: int) -> float:
    return 0.3 * ((window - 1) * 0.5 - 1) + 0.8


CASES = [
    (dict(window_size=5), (5, 5), (_opencv_sigma(5),) * 2),
    (dict(sigma=1.3), (9, 9), (1.3, 1.3)),
    (dict(window_size=[3, 7]), (3, 7), (_opencv_sigma(3), _opencv_sigma(7))),
    (dict(sigma=[0.8, 2.0], window_size=[5, 9]), (5, 9), (0.8, 2.0)),
]


@pytest.mark.parametrize("kwargs, window, sigma", CASES)
def test_uint8_matches_opencv_within_one_level(kwargs, window, sigma):
    for got, image in zip(run_headrace("gaussian_blur", IMAGES_U8, **kwargs), IMAGES_U8, strict=True):
        assert got.dtype == np.uint8 and got.shape == image.shape
        assert max_abs_diff(got, opencv_blur(image, window, sigma)) <= 1  # OpenCV uses 8-bit fixed point


@pytest.mark.parametrize("kwargs, window, sigma", CASES)
def test_float_matches_opencv(kwargs, window, sigma):
    for got, image in zip(run_headrace("gaussian_blur", IMAGES_F32, **kwargs), IMAGES_F32, strict=True):
        np.testing.assert_allclose(got, opencv_blur(image, window, sigma), atol=2e-6)


def test_window_larger_than_the_image_reflects_repeatedly():
    image = [RNG.uniform(0, 1, (6, 5)).astype(np.float32)]
    got = run_headrace("gaussian_blur", image, window_size=31)[0]
    np.testing.assert_allclose(got, opencv_blur(image[0], (31, 31), (_opencv_sigma(31),) * 2), atol=2e-6)


def test_per_sample_window_and_sigma_from_data_nodes():
    windows = [np.array(3, np.int32), np.array(11, np.int32)]
    got = run_headrace("gaussian_blur", IMAGES_F32, arg_inputs={"window_size": windows})
    for out, image, window in zip(got, IMAGES_F32, (3, 11), strict=True):
        np.testing.assert_allclose(out, opencv_blur(image, (window, window), (_opencv_sigma(window),) * 2),
                                   atol=2e-6)
    sigmas = [np.array([0.5, 1.5], np.float32), np.array([2.0, 0.7], np.float32)]
    got = run_headrace("gaussian_blur", IMAGES_F32, arg_inputs={"sigma": sigmas})
    for out, image, (sy, sx) in zip(got, IMAGES_F32, ((0.5, 1.5), (2.0, 0.7)), strict=True):
        window = (2 * int(np.ceil(3 * sy)) + 1, 2 * int(np.ceil(3 * sx)) + 1)
        np.testing.assert_allclose(out, opencv_blur(image, window, (sy, sx)), atol=2e-6)


def test_dtype_argument_converts_the_output():
    from headrace import types

    got = run_headrace("gaussian_blur", IMAGES_U8, sigma=1.0, dtype=types.FLOAT)[0]
    reference = opencv_blur(IMAGES_U8[0].astype(np.float32), (7, 7), (1.0, 1.0))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, reference, atol=1e-3)


def test_even_window_and_missing_parameters_are_errors():
    with pytest.raises(SampleError, match=r"gaussian_blur .*sample 0.*window_size must be odd, got 4"):
        run_headrace("gaussian_blur", IMAGES_U8, window_size=4)
    with pytest.raises(SampleError, match="give sigma or window_size"):
        run_headrace("gaussian_blur", IMAGES_U8)


@pytest.mark.parametrize("kwargs", [c[0] for c in CASES])
@needs_dali[0]
@needs_dali[1]
def test_matches_dali(kwargs):
    ours = run_headrace("gaussian_blur", IMAGES_U8, layout="HWC", **kwargs)
    theirs = run_dali("gaussian_blur", IMAGES_U8, layout="HWC", **kwargs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and max_abs_diff(a, b) <= 1  # rounding of float32 sums; 0 measured here
