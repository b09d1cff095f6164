"""erase and paste against numpy references, erase also against DALI's CPU operator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace.errors import SampleError

RNG = np.random.default_rng(4)
IMAGES = [RNG.integers(1, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(1, 256, (12, 9, 3), dtype=np.uint8)]


def erase_reference(image, regions, fill):
    """regions: [((y0, y1), (x0, x1)), ...] in pixels; fill: scalar or per-channel."""
    out = image.copy()
    for (y0, y1), (x0, x1) in regions:
        out[max(y0, 0):max(min(y1, image.shape[0]), 0), max(x0, 0):max(min(x1, image.shape[1]), 0)] = fill
    return out


def test_one_region_with_fractional_coordinates():
    got = run_headrace("erase", IMAGES, anchor=[2.4, 3.6], shape=[5.5, 4.5])
    for out, image in zip(got, IMAGES, strict=True):
        # region [floor(a), floor(a + s)) per axis, as DALI rounds it
        np.testing.assert_array_equal(out, erase_reference(image, [((2, 7), (3, 8))], 0))


def test_several_regions_clipped_with_per_channel_fill():
    got = run_headrace("erase", IMAGES, anchor=[1, 2, 10, 11, -3, -3], shape=[3, 3, 4, 20, 5, 5],
                       fill_value=[10, 20, 30])
    for out, image in zip(got, IMAGES, strict=True):
        expected = erase_reference(image, [((1, 4), (2, 5)), ((10, 14), (11, 31)), ((-3, 2), (-3, 2))],
                                   np.array([10, 20, 30], np.uint8))
        np.testing.assert_array_equal(out, expected)


def test_normalized_and_centered_anchor():
    got = run_headrace("erase", IMAGES, anchor=[0.5, 0.5], shape=[0.3, 0.25], normalized=True, centered_anchor=True,
                       fill_value=[99])
    for out, image in zip(got, IMAGES, strict=True):
        h, w = image.shape[:2]
        cy, cx, sh, sw = 0.5 * h, 0.5 * w, 0.3 * h, 0.25 * w
        region = ((math.floor(cy - sh / 2), math.floor(cy + sh / 2)), (math.floor(cx - sw / 2),
                                                                        math.floor(cx + sw / 2)))
        np.testing.assert_array_equal(out, erase_reference(image, [region], 99))


def test_axes_and_per_sample_anchor_from_data():
    anchors = [np.array([3.0], np.float32), np.array([0.0], np.float32)]
    got = run_headrace("erase", IMAGES, arg_inputs={"anchor": anchors}, shape=[4], axes=[1])
    for out, image, a in zip(got, IMAGES, (3, 0), strict=True):
        np.testing.assert_array_equal(out, erase_reference(image, [((0, 99), (a, a + 4))], 0))


def test_channel_first_fill_finds_the_channel_axis():
    masks = [np.zeros((2, 6, 8), np.float32)]
    out = run_headrace("erase", masks, anchor=[1, 2], shape=[2, 3], axes=[1, 2], fill_value=[0.25, -1.0])[0]
    expected = np.zeros((2, 6, 8), np.float32)
    expected[0, 1:3, 2:5], expected[1, 1:3, 2:5] = 0.25, -1.0
    np.testing.assert_array_equal(out, expected)


def test_bad_region_lists_are_errors():
    with pytest.raises(SampleError, match=r"erase .*sample 0.*one per axis"):
        run_headrace("erase", IMAGES, anchor=[1, 2, 3], shape=[1, 2, 3])
    with pytest.raises(SampleError, match="cannot tell the channel axis"):
        run_headrace("erase", [np.zeros((4, 4), np.float32)], anchor=[0, 0], shape=[1, 1], fill_value=[1, 2])


@needs_dali[0]
@needs_dali[1]
def test_erase_matches_dali():
    cases = [dict(anchor=[2.4, 3.6], shape=[5.5, 4.5]),
             dict(anchor=[0.5, 0.5], shape=[0.3, 0.25], normalized=True, centered_anchor=True,
                  fill_value=[10, 20, 30]),
             dict(anchor=[1, 2, 10, 11], shape=[3, 3, 4, 20], axis_names="HW", fill_value=99),
             dict(anchor=[3], shape=[4], axes=[1]), dict(anchor=[-1.5, 2], shape=[3.2, 30], normalized_shape=False)]
    for kwargs in cases:
        ours = run_headrace("erase", IMAGES, layout="HWC", **kwargs)
        theirs = run_dali("erase", IMAGES, layout="HWC", **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=str(kwargs))


def paste_reference(image, ratio, px, py, fill, min_canvas=0.0):
    """DALI's placement: the canvas and the offsets in float32, truncated."""
    h, w, c = image.shape
    f = np.float32
    out_h, out_w = max(int(f(h) * f(ratio)), int(f(min_canvas))), max(int(f(w) * f(ratio)), int(f(min_canvas)))
    out = np.empty((out_h, out_w, c), image.dtype)
    out[...] = np.asarray(fill, image.dtype)
    top, left = int(f(py) * f(out_h - h)), int(f(px) * f(out_w - w))
    out[top:top + h, left:left + w] = image
    return out


def test_paste():
    got = run_headrace("paste", IMAGES, ratio=2.0, paste_x=0.25, paste_y=1.0, fill_value=[1, 2, 3])
    for out, image in zip(got, IMAGES, strict=True):
        np.testing.assert_array_equal(out, paste_reference(image, 2.0, 0.25, 1.0, [1, 2, 3]))
    ratios = [np.array(1.5, np.float32), np.array(3.0, np.float32)]
    got = run_headrace("paste", IMAGES, arg_inputs={"ratio": ratios}, min_canvas_size=30.0)
    for out, image, ratio in zip(got, IMAGES, (1.5, 3.0), strict=True):
        np.testing.assert_array_equal(out, paste_reference(image, ratio, 0.5, 0.5, 0, 30.0))
    with pytest.raises(SampleError, match="ratio must be at least 1"):
        run_headrace("paste", IMAGES, ratio=0.5)
