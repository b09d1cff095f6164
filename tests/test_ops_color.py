"""hsv, color_twist and brightness_contrast against per-pixel numpy references and DALI's CPU operators."""

from __future__ import annotations

import colorsys
import math

import numpy as np
import pytest
from ops_support import max_abs_diff, needs_dali, run_dali, run_headrace

from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(5)
IMAGES = [RNG.integers(0, 256, (9, 11, 3), dtype=np.uint8), RNG.integers(0, 256, (4, 6, 3), dtype=np.uint8)]
FLOATS = [RNG.uniform(0, 1, (5, 7, 3)).astype(np.float32)]

# NTSC YIQ, written out here independently of the kernels
TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])


def yiq_adjust(pixels: np.ndarray, hue: float, saturation: float, value: float) -> np.ndarray:
    """Per pixel: to YIQ, rotate the chroma plane (I, Q) by -hue, scale chroma by saturation, all by value, back."""
    yiq = pixels.astype(np.float64) @ TO_YIQ.T
    angle = math.radians(hue)
    i, q = yiq[..., 1].copy(), yiq[..., 2].copy()
    yiq[..., 1] = saturation * (i * math.cos(angle) + q * math.sin(angle))
    yiq[..., 2] = saturation * (-i * math.sin(angle) + q * math.cos(angle))
    return value * yiq @ np.linalg.inv(TO_YIQ).T


def to_uint8(values: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(values + 0.5), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("hue, saturation, value", [(30.0, 0.5, 1.2), (-120.0, 1.5, 0.8), (0.0, 1.0, 1.0)])
def test_hsv_matches_yiq_reference(hue, saturation, value):
    for got, image in zip(run_headrace("hsv", IMAGES, hue=hue, saturation=saturation, value=value), IMAGES,
                          strict=True):
        # float32 arithmetic against float64: at most one level apart after rounding
        assert got.dtype == np.uint8 and max_abs_diff(got, to_uint8(yiq_adjust(image, hue, saturation, value))) <= 1
    got = run_headrace("hsv", FLOATS, hue=hue, saturation=saturation, value=value, dtype=types.FLOAT)[0]
    np.testing.assert_allclose(got, yiq_adjust(FLOATS[0], hue, saturation, value), atol=1e-5)


def test_hsv_identity_gray_and_value_have_their_meaning():
    assert max_abs_diff(run_headrace("hsv", IMAGES)[0], IMAGES[0]) == 0
    gray = run_headrace("hsv", FLOATS, saturation=0.0, dtype=types.FLOAT)[0]
    luma = FLOATS[0] @ np.array([0.299, 0.587, 0.114])
    # the exact inverse of YIQ's rounded coefficients maps Y back to R = G = B only to within 0.3 %
    np.testing.assert_allclose(gray, np.repeat(luma[..., None], 3, axis=-1), atol=3e-3)
    assert np.ptp(gray, axis=-1).max() < 3e-3
    np.testing.assert_allclose(run_headrace("hsv", FLOATS, value=0.5, dtype=types.FLOAT)[0], FLOATS[0] * 0.5,
                               atol=1e-6)
    assert run_headrace("hsv", FLOATS)[0].dtype == np.uint8  # DALI's default output type, whatever the input


def test_hue_rotation_follows_the_colour_wheel_direction():
    # a positive hue turns pure red towards yellow/green, as HSV's hue increases
    red = [np.array([[[0.8, 0.1, 0.1]]], np.float32)]
    turned = run_headrace("hsv", red, hue=40.0, dtype=types.FLOAT)[0][0, 0]
    assert colorsys.rgb_to_hsv(*np.clip(turned, 0, 1))[0] > colorsys.rgb_to_hsv(0.8, 0.1, 0.1)[0]


@pytest.mark.parametrize("b, c, shift, center", [(1.1, 0.7, 0.05, None), (0.5, 2.0, -0.1, 100.0), (1.0, 0.5, 0, None)])
def test_brightness_contrast_formula(b, c, shift, center):
    kwargs = {"brightness": b, "contrast": c, "brightness_shift": shift}
    if center is not None:
        kwargs["contrast_center"] = center
    for got, image in zip(run_headrace("brightness_contrast", IMAGES, **kwargs), IMAGES, strict=True):
        mid = 128.0 if center is None else center
        expected = shift * 255 + b * (mid + c * (image.astype(np.float64) - mid))
        assert max_abs_diff(got, to_uint8(expected)) <= 1
    got = run_headrace("brightness_contrast", FLOATS, brightness=b, contrast=c, brightness_shift=shift)[0]
    np.testing.assert_allclose(got, shift + b * (0.5 + c * (FLOATS[0] - 0.5)), atol=1e-5)


def test_brightness_contrast_per_sample_and_dtype():
    got = run_headrace("brightness_contrast", IMAGES, arg_inputs={"brightness": [np.float32(0.5), np.float32(2)]},
                       dtype=types.FLOAT)
    for out, image, b in zip(got, IMAGES, (0.5, 2.0), strict=True):
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, image * b, rtol=1e-6)


def test_color_twist_is_brightness_contrast_after_hue_and_saturation():
    for got, image in zip(run_headrace("color_twist", IMAGES, hue=-20.0, saturation=1.5, brightness=1.1,
                                       contrast=0.7), IMAGES, strict=True):
        expected = 1.1 * (0.7 * yiq_adjust(image, -20.0, 1.5, 1.0) + 0.3 * 128)
        assert max_abs_diff(got, to_uint8(expected)) <= 1


def test_non_rgb_input_is_an_error():
    with pytest.raises(SampleError, match=r"hsv .*3 channels, got shape \(4, 4\)"):
        run_headrace("hsv", [np.zeros((4, 4), np.uint8)], hue=10.0)


@needs_dali[0]
@needs_dali[1]
def test_match_dali():
    cases = [("hsv", dict(hue=30.0, saturation=0.5, value=1.2)), ("hsv", dict(hue=-75.0, saturation=2.0)),
             ("color_twist", dict(hue=-20.0, saturation=1.5, brightness=1.1, contrast=0.7)),
             ("brightness_contrast", dict(brightness=1.1, contrast=0.7, brightness_shift=0.05)),
             ("brightness_contrast", dict(brightness=0.9, contrast=1.8, contrast_center=60.0)),
             # ties: every uint8 value, where a float64 offset put some a level off DALI's
             ("brightness_contrast", dict(contrast=1.3, contrast_center=100.0)),
             ("brightness_contrast", dict(contrast=1.7, contrast_center=60.0))]
    every_level = [np.arange(768, dtype=np.int64).reshape(16, 16, 3).astype(np.uint8)]
    for op, kwargs in cases:
        for images in (IMAGES, FLOATS, every_level):
            ours = run_headrace(op, images, layout="HWC", **kwargs)
            theirs = run_dali(op, images, layout="HWC", **kwargs)
            for a, b in zip(ours, theirs, strict=True):
                assert a.dtype == b.dtype
                # uint8 from uint8: exact; uint8 from float: one level (ties); float: float32 rounding
                tolerance = 1e-5 if a.dtype != np.uint8 else 1 if images is FLOATS else 0
                assert max_abs_diff(a, b) <= tolerance, (op, kwargs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.uint16, np.float32, np.float64])
def test_compiled_colour_map_is_the_numpy_reference_bit_for_bit(dtype):
    """hsv / color_twist's per-pixel map (numba, GIL released) gives the written-out numpy float32 sums' bits."""
    from headrace_kernels.cpu import color_ops

    rng = np.random.default_rng(4)
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    center = 0.5 if np.dtype(dtype).kind == "f" else math.ceil(0.5 * info.max)
    for shape in [(31, 17, 3), (1, 1, 3), (0, 5, 3)]:
        if np.dtype(dtype).kind == "f":
            image = (rng.standard_normal(shape) * 100).astype(dtype)
        else:
            image = rng.integers(max(info.min, -30000), min(info.max, 60000), shape).astype(dtype)
        image = image[:, ::-1]  # not contiguous
        for hue, saturation, value in [(37.0, 1.3, 0.9), (-120.0, 0.2, 1.7), (0.0, 1.0, 1.0)]:
            got = color_ops.hsv([image], {"hue": hue, "saturation": saturation, "value": value, "dtype": None}, None)
            want = color_ops.apply_reference(image, color_ops.hsv_matrix(hue, saturation, value), 0.0)
            np.testing.assert_array_equal(got, color_ops.round_saturate(want, image.dtype))
            twist = {"hue": hue, "saturation": saturation, "brightness": value, "contrast": 0.7, "dtype": None}
            got = color_ops.color_twist([image], twist, None)
            want = color_ops.apply_reference(image, value * 0.7 * color_ops.hsv_matrix(hue, saturation, 1.0),
                                             value * (1 - 0.7) * center)
            np.testing.assert_array_equal(got, color_ops.round_saturate(want, image.dtype))


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("op, kwargs", [("hsv", {"hue": 25.0, "saturation": 1.3, "value": 0.9}),
                                        ("hue", {"hue": 40.0}), ("saturation", {"saturation": 0.4}),
                                        ("color_twist", {"hue": 30.0, "saturation": 1.2, "brightness": 1.1,
                                                         "contrast": 0.8})])
def test_half_precision_images_as_dali(op, kwargs):
    # float16 images: the same float32 map, written in each op's output type (hsv's default is UINT8), bit for bit
    rng = np.random.default_rng(1)
    images = [rng.uniform(0, 1, (5, 7, 3)).astype(np.float16) for _ in range(2)]
    for ours, theirs in zip(run_headrace(op, images, layout="HWC", **kwargs),
                            run_dali(op, images, layout="HWC", **kwargs), strict=True):
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
