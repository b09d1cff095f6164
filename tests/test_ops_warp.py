"""rotate and warp_affine against a numpy resampler written here (pixel centres at +0.5) and DALI's CPU operators."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ops_support import max_abs_diff, needs_dali, run_dali, run_headrace

from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(6)
IMAGES = [RNG.integers(0, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
FLOATS = [RNG.uniform(0, 1, (10, 13)).astype(np.float32)]


def resample(image: np.ndarray, out_to_in: np.ndarray, out_h: int, out_w: int, fill: float | None,
             nearest: bool = False) -> np.ndarray:
    """Sample `image` at out_to_in @ (x + 0.5, y + 0.5, 1) - 0.5 for every output pixel (bilinear or nearest);
    outside the image: `fill`, or the nearest edge pixel when fill is None."""
    img = image.astype(np.float64)
    if img.ndim == 2:
        img = img[..., None]
    h, w = img.shape[:2]
    ys, xs = np.mgrid[0:out_h, 0:out_w].astype(np.float64)
    sx = out_to_in[0, 0] * (xs + 0.5) + out_to_in[0, 1] * (ys + 0.5) + out_to_in[0, 2] - 0.5
    sy = out_to_in[1, 0] * (xs + 0.5) + out_to_in[1, 1] * (ys + 0.5) + out_to_in[1, 2] - 0.5

    def pixel(yi, xi):
        inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
        values = img[np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]
        return values if fill is None else np.where(inside[..., None], values, fill)

    if nearest:
        out = pixel(np.floor(sy + 0.5).astype(int), np.floor(sx + 0.5).astype(int))
    else:
        x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
        fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
        out = ((1 - fy) * ((1 - fx) * pixel(y0, x0) + fx * pixel(y0, x0 + 1))
               + fy * ((1 - fx) * pixel(y0 + 1, x0) + fx * pixel(y0 + 1, x0 + 1)))
    return out.reshape((out_h, out_w) + image.shape[2:])


def rotation(h: int, w: int, out_h: int, out_w: int, degrees: float) -> np.ndarray:
    a = math.radians(degrees)
    linear = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    shift = np.array([w / 2, h / 2]) - linear @ np.array([out_w / 2, out_h / 2])
    return np.hstack([linear, shift[:, None]])


def to_uint8(values):
    return np.clip(np.floor(values + 0.5), 0, 255).astype(np.uint8)


def test_quarter_turns_are_exact_rotations():
    for k, angle in ((1, 90.0), (2, 180.0), (3, 270.0)):
        for got, image in zip(run_headrace("rotate", IMAGES, angle=angle), IMAGES, strict=True):
            np.testing.assert_array_equal(got, np.rot90(image, k))  # counter-clockwise, as displayed


@pytest.mark.parametrize("kwargs", [dict(angle=30.0), dict(angle=-75.0, fill_value=7.0),
                                    dict(angle=45.0, keep_size=True), dict(angle=10.0, size=[20, 30])])
def test_rotate_matches_numpy_resampler(kwargs):
    for got, image in zip(run_headrace("rotate", IMAGES, **kwargs), IMAGES, strict=True):
        h, w = image.shape[:2]
        out_h, out_w = got.shape[:2]
        if "size" in kwargs:
            assert (out_h, out_w) == (20, 30)
        elif kwargs.get("keep_size"):
            assert (out_h, out_w) == (h, w)
        else:  # holds the whole rotated image, at most one pixel (parity) more
            a = math.radians(kwargs["angle"])
            need_w = w * abs(math.cos(a)) + h * abs(math.sin(a))
            need_h = w * abs(math.sin(a)) + h * abs(math.cos(a))
            assert need_h <= out_h <= need_h + 2 and need_w <= out_w <= need_w + 2
        expected = resample(image, rotation(h, w, out_h, out_w, kwargs["angle"]), out_h, out_w,
                            kwargs.get("fill_value"))
        # float32 OpenCV against float64 numpy: one level after rounding
        assert max_abs_diff(got, to_uint8(expected)) <= 1


def test_per_sample_angle_from_data():
    angles = [np.float32(90.0), np.float32(-90.0)]
    got = run_headrace("rotate", IMAGES, arg_inputs={"angle": angles})
    np.testing.assert_array_equal(got[0], np.rot90(IMAGES[0], 1))
    np.testing.assert_array_equal(got[1], np.rot90(IMAGES[1], -1))


@pytest.mark.parametrize("matrix, kwargs", [
    ([1, 0.2, 3.5, -0.1, 0.9, 1.25], {}),
    ([0.8, 0.2, 3.5, -0.1, 1.1, 1.25], {"inverse_map": False, "fill_value": 9.0, "size": [15, 11]}),
    ([1.3, 0, -2, 0, 0.7, 4], {"interp_type": types.INTERP_NN, "fill_value": 0.0}),
])
def test_warp_affine_matches_numpy_resampler(matrix, kwargs):
    for images, tolerance in ((IMAGES, 1), (FLOATS, 1e-4)):
        for got, image in zip(run_headrace("warp_affine", images, matrix=matrix, **kwargs), images, strict=True):
            m = np.array(matrix, np.float64).reshape(2, 3)
            if not kwargs.get("inverse_map", True):
                m = np.linalg.inv(np.vstack([m, [0, 0, 1]]))[:2]
            out_h, out_w = kwargs.get("size", image.shape[:2])
            expected = resample(image, m, out_h, out_w, kwargs.get("fill_value"),
                                nearest=kwargs.get("interp_type") == types.INTERP_NN)
            if image.dtype == np.uint8:
                expected = to_uint8(expected)
            assert got.dtype == image.dtype and max_abs_diff(got, expected) <= tolerance


def test_warp_affine_identity_and_matrix_as_second_input():
    assert max_abs_diff(run_headrace("warp_affine", IMAGES, matrix=[1, 0, 0, 0, 1, 0])[0], IMAGES[0]) == 0
    shift = [np.array([[1, 0, 2], [0, 1, 1]], np.float32)] * 2
    got = run_headrace("warp_affine", IMAGES, shift, fill_value=0.0)[0]
    np.testing.assert_array_equal(got[:-1, :-2], IMAGES[0][1:, 2:])  # output(x, y) = input(x + 2, y + 1)
    assert not got[-1].any() and not got[:, -2:].any()


def test_singular_matrix_is_an_error():
    with pytest.raises(SampleError, match="not invertible"):
        run_headrace("warp_affine", IMAGES, matrix=[1, 2, 0, 2, 4, 0], inverse_map=False)


@needs_dali[0]
@needs_dali[1]
def test_match_dali():
    cases = [("rotate", dict(angle=30.0)), ("rotate", dict(angle=-75.0, fill_value=7.0)),
             ("rotate", dict(angle=90.0)), ("rotate", dict(angle=45.0, keep_size=True)),
             ("rotate", dict(angle=10.0, size=[20, 30], interp_type=types.INTERP_NN)),
             ("warp_affine", dict(matrix=[1, 0.2, 3.5, -0.1, 0.9, 1.25])),
             ("warp_affine", dict(matrix=[0.8, 0.2, 3.5, -0.1, 1.1, 1.25], inverse_map=False, fill_value=9.0,
                                  size=[15, 11]))]
    for op, kwargs in cases:
        ours = run_headrace(op, IMAGES, layout="HWC", **kwargs)
        theirs = run_dali(op, IMAGES, layout="HWC", **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            assert a.shape == b.shape, (op, kwargs)
            assert max_abs_diff(a, b) <= 1, (op, kwargs)  # bilinear weights in float32: one level
