"""fn.reductions.* against numpy (float64 accumulation) and DALI's CPU operators."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(1)
IMAGES = [RNG.integers(0, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
FLOATS = [RNG.normal(0, 3, (5, 7, 2)).astype(np.float32), RNG.normal(1, 1, (4, 2, 2)).astype(np.float32)]

NUMPY = {
    "sum": lambda x, axes, keep: x.sum(axis=axes, keepdims=keep, dtype=np.float64),
    "mean": lambda x, axes, keep: x.mean(axis=axes, keepdims=keep, dtype=np.float64),
    "mean_square": lambda x, axes, keep: np.square(x, dtype=np.float64).mean(axis=axes, keepdims=keep),
    "rms": lambda x, axes, keep: np.sqrt(np.square(x, dtype=np.float64).mean(axis=axes, keepdims=keep)),
    "min": lambda x, axes, keep: x.min(axis=axes, keepdims=keep),
    "max": lambda x, axes, keep: x.max(axis=axes, keepdims=keep),
}
OUT_TYPES = {"sum": {np.uint8: np.uint64, np.float32: np.float32}, "mean": np.float32, "mean_square": np.float32,
             "rms": np.float32, "min": None, "max": None}


@pytest.mark.parametrize("name", list(NUMPY))
@pytest.mark.parametrize("axes, keep", [((0, 1), False), ((2,), True), (None, False), ((-1, 0), False)])
def test_matches_numpy(name, axes, keep):
    for samples in (IMAGES, FLOATS):
        kwargs = {"keep_dims": keep, **({"axes": list(axes)} if axes is not None else {})}
        for got, x in zip(run_headrace(f"reductions.{name}", samples, **kwargs), samples, strict=True):
            expected = NUMPY[name](x, tuple(a % x.ndim for a in axes) if axes else None, keep)
            kind = OUT_TYPES[name]
            want_type = (kind.get(x.dtype.type) if isinstance(kind, dict) else kind) or x.dtype
            assert got.dtype == want_type and got.shape == np.shape(expected)
            # float32 outputs of a float64 accumulation: relative 1e-6
            np.testing.assert_allclose(got.astype(np.float64), expected, rtol=1e-6, atol=1e-6)


def test_axis_names_use_the_layout_of_the_dimension_count():
    got = run_headrace("reductions.mean", IMAGES, axis_names="HW")
    for out, image in zip(got, IMAGES, strict=True):
        np.testing.assert_allclose(out, image.mean(axis=(0, 1)), rtol=1e-6)
    with pytest.raises(SampleError, match=r"axis_names 'D'.*layout 'HWC'"):
        run_headrace("reductions.mean", IMAGES, axis_names="D")


def test_sum_dtype_and_integer_widening():
    ints = [np.full((4, 4), 100, np.int8)] * 2
    assert run_headrace("reductions.sum", ints)[0].dtype == np.int64
    assert int(run_headrace("reductions.sum", ints)[0]) == 1600
    assert run_headrace("reductions.sum", ints, dtype=types.FLOAT)[0].dtype == np.float32


@pytest.mark.parametrize("ddof", [0, 1])
def test_std_dev_and_variance_from_a_mean(ddof):
    from headrace import fn, pipeline_def

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: FLOATS, batch=True)
        mean = fn.reductions.mean(x, axes=[0, 1])
        return (fn.reductions.std_dev(x, mean, axes=[0, 1], ddof=ddof),
                fn.reductions.variance(x, mean, axes=[0, 1], ddof=ddof, keep_dims=True))

    std, var = pipe().run()
    for i, x in enumerate(FLOATS):
        np.testing.assert_allclose(std.at(i), x.astype(np.float64).std(axis=(0, 1), ddof=ddof), rtol=1e-5)
        np.testing.assert_allclose(var.at(i), x.astype(np.float64).var(axis=(0, 1), ddof=ddof, keepdims=True),
                                   rtol=1e-5)


def test_reducing_an_empty_axis_is_an_error():
    with pytest.raises(SampleError, match="cannot reduce an empty axis"):
        run_headrace("reductions.max", [np.zeros((0, 3), np.float32)])


@pytest.mark.parametrize("name", list(NUMPY))
@needs_dali[0]
@needs_dali[1]
def test_matches_dali(name):
    for kwargs in ({"axes": [0, 1]}, {"axis_names": "HW"}, {"axes": [1], "keep_dims": True}, {}):
        ours = run_headrace(f"reductions.{name}", IMAGES, layout="HWC", **kwargs)
        theirs = run_dali(f"reductions.{name}", IMAGES, layout="HWC", **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=2e-7 * 16)
