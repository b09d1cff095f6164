"""windows.resize_plans, the batched resize_plan: the same output sizes and source regions, bit for bit, as the
scalar resize_plan of each sample, over random image sizes and every argument form; and the GPU host's choice
between the two (geometry_ops.plain_resize)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from headrace_kernels.cpu.geometry_ops import plain_resize, resize_region
from headrace_kernels.windows import resize_plan, resize_plans

EXTENTS = [1, 2, 3, 5000, 4999, 256, 255, 257, 224, 1000]
SHORTER = [256, 255.5, 224, 1, 0.5, 7.3, 4999.75, 10000.25, -256, 1e10, 1e15]  # 1e15: rows past 2**53
MAX_SIZES = [None, [300], [300, 400], [0, 300], [255.5], [1e6, 1]]
EXTENT_PAIRS = [(224, 224), (0, 224), (224, 0), (255.5, 0), (0, 0.5), (33.3, 51.7), (1, 1), (5000.5, 3.25)]
MODES = ["default", "stretch", "not_smaller", "not_larger"]


def _args_list() -> list[dict]:
    """Every argument form resize_plan reads: shorter / longer, explicit extents (resize_x / resize_y or size) in
    each mode, with and without max_size and subpixel_scale."""
    out = []
    for value, key, max_size in itertools.product(SHORTER, ["resize_shorter", "resize_longer"], MAX_SIZES):
        out.append({key: value, "max_size": max_size})
    for (y, x), mode, max_size in itertools.product(EXTENT_PAIRS, MODES, MAX_SIZES):
        out.append({"resize_y": y, "resize_x": x, "mode": mode, "max_size": max_size})
        out.append({"size": [y, x], "mode": mode, "max_size": max_size})
    out.append({})
    out.append({"mode": "not_smaller"})
    return out + [dict(a, subpixel_scale=False) for a in out]


ARGS = _args_list()


def _sizes(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` random (height, width) in 1..5000 plus every pair of the edge extents."""
    rng = np.random.default_rng(seed)
    edges = np.array(list(itertools.product(EXTENTS, EXTENTS)), np.int64)
    heights = np.concatenate([edges[:, 0], rng.integers(1, 5001, count)])
    widths = np.concatenate([edges[:, 1], rng.integers(1, 5001, count)])
    return heights, widths


def _scalar(heights: np.ndarray, widths: np.ndarray, args: dict) -> tuple[np.ndarray, np.ndarray]:
    plans = [resize_plan(h, w, args) for h, w in zip(heights.tolist(), widths.tolist(), strict=True)]
    return (np.array([p[:2] for p in plans], np.int64).reshape(-1, 2),
            np.array([p[2] for p in plans], np.float64).reshape(-1, 4))


def _assert_same(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    assert got[0].dtype == np.int64 and got[1].dtype == np.float64
    assert got[0].shape == want[0].shape and got[1].shape == want[1].shape
    assert np.array_equal(got[0], want[0])
    bad = np.nonzero((got[1].view(np.int64) != want[1].view(np.int64)).any(axis=1))[0]
    assert bad.size == 0, f"first differing row {bad[0]}: {got[1][bad[0]]} != {want[1][bad[0]]}"


@pytest.mark.parametrize("index", range(len(ARGS)), ids=lambda i: repr(ARGS[i]))
def test_resize_plans_match_the_scalar_plan(index):
    args = ARGS[index]
    heights, widths = _sizes(300, index)
    _assert_same(resize_plans(heights, widths, args), _scalar(heights, widths, args))


@pytest.mark.parametrize("target", [256, 255.5, 224, 320, 480.5, 1, 3.5])
def test_many_sizes_resize_shorter(target):
    """The validation pipeline's case, over many more sizes, with and without subpixel_scale."""
    heights, widths = _sizes(20000, 7)
    for args in ({"resize_shorter": target}, {"resize_shorter": target, "subpixel_scale": False},
                 {"resize_longer": target, "max_size": [target * 0.75]}):
        _assert_same(resize_plans(heights, widths, args), _scalar(heights, widths, args))


def test_zero_extents_and_one_sample():
    """A zero extent takes the scalar path inside resize_plans; a batch of one is a batch."""
    args = {"resize_x": 100, "resize_y": 0}
    heights, widths = np.array([0, 5, 0, 7]), np.array([0, 0, 9, 11])
    _assert_same(resize_plans(heights, widths, args), _scalar(heights, widths, args))
    _assert_same(resize_plans(np.array([1]), np.array([1]), {"resize_shorter": 255.5}),
                 _scalar(np.array([1]), np.array([1]), {"resize_shorter": 255.5}))


def test_errors_are_the_scalar_errors():
    """Arguments the scalar plan refuses raise the same type here (ValueError, which the GPU host turns into the
    failing sample's error through its per-sample path); sizes past int64 overflow as the per-sample path does."""
    heights, widths = np.array([10, 20]), np.array([30, 40])
    for args, error in (({"size": [1, 2, 3]}, ValueError), ({"resize_x": float("nan")}, ValueError),
                        ({"resize_shorter": 1e38}, OverflowError)):
        with pytest.raises(error):
            _scalar(heights, widths, args)
        with pytest.raises(error):
            resize_plans(heights, widths, args)


def test_plain_resize():
    """The batched plan applies where resize_region is resize_plan: no region of interest, no flipping extent."""
    assert plain_resize({"resize_shorter": 256})
    assert plain_resize({"resize_x": 0, "resize_y": 255.5, "max_size": [300]})
    assert not plain_resize({"resize_shorter": 256, "roi_start": [0, 0], "roi_end": [1, 1]})
    assert not plain_resize({"resize_x": -100, "resize_y": 50})
    assert not plain_resize({"size": [50, -100]})
    heights, widths = _sizes(50, 3)
    for args in ARGS:
        if plain_resize(args):
            regions = [resize_region(h, w, args) for h, w in zip(heights.tolist(), widths.tolist(), strict=True)]
            assert regions == [resize_plan(h, w, args) for h, w in zip(heights.tolist(), widths.tolist(),
                                                                          strict=True)]
