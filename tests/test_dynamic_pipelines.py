"""The two pipelines of issue 7, with device="cpu", against numpy references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ops_support import needs_dali

from headrace import Pipeline, fn, pipeline_def, types
from headrace.errors import SampleError

H, W, P = 24, 32, 6


def _gaussian(window: int) -> np.ndarray:
    sigma = 0.3 * ((window - 1) * 0.5 - 1) + 0.8
    x = np.arange(window) - (window - 1) / 2
    weights = np.exp(-x * x / (2 * sigma * sigma))
    return weights / weights.sum()


def reference_blur(image: np.ndarray, window: int) -> np.ndarray:
    """Separable Gaussian in float64 with reflect-101 borders (numpy's 'reflect'), rounded to uint8."""
    kernel, half = _gaussian(window), window // 2
    out = image.astype(np.float64)
    for axis in (0, 1):
        padded = np.pad(out, [(half, half) if a == axis else (0, 0) for a in range(2)], mode="reflect")
        out = np.apply_along_axis(lambda line: np.convolve(line, kernel, mode="valid"), axis, padded)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _masks(rng: np.random.Generator, counts: list[int]) -> list[np.ndarray]:
    masks = []
    for count in counts:
        flat = np.zeros(H * W, np.uint8)
        flat[rng.choice(H * W, count, replace=False)] = rng.integers(1, 256, count)
        masks.append(flat.reshape(H, W))
    return masks


def _odd_window_counts(how_many: int) -> list[int]:
    """Nonzero counts whose blur size 16 + ratio * 300 rounds clearly to an odd number (DALI needs odd windows)."""
    good = []
    for count in range(H * W + 1):
        size = 16 + np.float32(count / (H * W)) * np.float32(300)
        if abs(size - math.floor(size) - 0.5) > 0.05 and round(float(size)) % 2 == 1:
            good.append(count)
    picks = np.linspace(0, len(good) - 1, how_many).astype(int)
    return [good[i] for i in picks]


@pipeline_def(batch_size=8, num_threads=2, device_id=0)
def dynamic_blur():
    masks = fn.external_source(name="masks", dtype=types.UINT8, device="cpu")
    nonzero_ratio = fn.reductions.mean(fn.cast(masks > 0, dtype=types.FLOAT), axes=(0, 1))
    blur_size = fn.cast(16 + nonzero_ratio.cpu() * 300, dtype=types.INT32)
    return fn.gaussian_blur(masks, window_size=blur_size)


def test_dynamic_blur_matches_numpy():
    masks = _masks(np.random.default_rng(0), _odd_window_counts(8))
    pipe = dynamic_blur()
    (blurred,) = pipe.run(masks=masks)
    for i, mask in enumerate(masks):
        window = int(round(16 + (mask > 0).mean() * 300))
        expected = reference_blur(mask, window)
        got = blurred.at(i)
        assert got.dtype == np.uint8 and got.shape == (H, W)
        # float32 filtering against a float64 reference: at most one level apart after rounding
        assert np.max(np.abs(got.astype(int) - expected.astype(int))) <= 1, f"sample {i}, window {window}"


def test_dynamic_blur_round_trips_through_the_pipeline_file():
    masks = _masks(np.random.default_rng(1), _odd_window_counts(8))
    pipe = dynamic_blur()
    loaded = Pipeline.load(pipe.serialize())
    np.testing.assert_array_equal(pipe.run(masks=masks)[0].as_array(), loaded.run(masks=masks)[0].as_array())


def test_even_window_size_names_sample_op_and_argument():
    masks = _masks(np.random.default_rng(2), [0] * 8)  # ratio 0 gives window 16
    with pytest.raises(SampleError, match=r"gaussian_blur .*sample 0.*window_size must be odd, got 16"):
        dynamic_blur().run(masks=masks)


@needs_dali[0]
@needs_dali[1]
def test_dynamic_blur_matches_dali():
    from nvidia import dali

    masks = _masks(np.random.default_rng(4), _odd_window_counts(8))

    @dali.pipeline_def(batch_size=8, num_threads=2, device_id=None)
    def dali_blur():
        fed = dali.fn.external_source(source=lambda: masks, batch=True, layout="HW")
        nonzero_ratio = dali.fn.reductions.mean(dali.fn.cast(fed > 0, dtype=dali.types.FLOAT), axes=(0, 1))
        blur_size = dali.fn.cast(16 + nonzero_ratio * 300, dtype=dali.types.INT32)
        return dali.fn.gaussian_blur(fed, window_size=blur_size)

    theirs = dali_blur()
    theirs.build()
    expected = [np.array(t) for t in theirs.run()[0]]
    (ours,) = dynamic_blur().run(masks=masks)
    for i in range(8):
        assert np.max(np.abs(ours.at(i).astype(int) - expected[i].astype(int))) <= 1, f"sample {i}"


@pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=7)
def erase_with_mean():
    images = fn.external_source(name="images", dtype=types.FLOAT, device="cpu")
    x = fn.random.uniform(range=[0, H - P])
    y = fn.random.uniform(range=[0, W - P])
    mask = types.Constant(value=0, shape=(2, H, W), dtype=types.FLOAT, device="cpu")
    mean = fn.reductions.mean(images, axes=(0, 1))
    mask = fn.erase(mask, fill_value=mean, anchor=fn.stack(x, y), shape=fn.stack(P, P), axes=(1, 2))
    return mask, x, y


def test_erase_with_per_sample_mean_and_anchor_matches_numpy():
    rng = np.random.default_rng(3)
    images = [rng.uniform(0, 1, (H, W, 2)).astype(np.float32) for _ in range(4)]
    pipe = erase_with_mean()
    mask, xs, ys = pipe.run(images=images)
    assert mask.as_array().shape == (4, 2, H, W)
    for i, image in enumerate(images):
        x, y = float(xs.at(i)), float(ys.at(i))
        top, left = math.floor(x), math.floor(y)
        expected = np.zeros((2, H, W), np.float32)
        expected[:, top:math.floor(x + P), left:math.floor(y + P)] = image.mean(axis=(0, 1))[:, None, None]
        np.testing.assert_allclose(mask.at(i), expected, rtol=1e-6, atol=1e-7)
        assert np.count_nonzero(mask.at(i)[0]) == P * P
    loaded = Pipeline.load(pipe.serialize())
    again = erase_with_mean()
    np.testing.assert_array_equal(again.run(images=images)[0].as_array(), loaded.run(images=images)[0].as_array())
