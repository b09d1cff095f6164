"""random.coin_flip / uniform / normal: statistics within stated bounds, determinism per seed, independence from
num_threads. Bounds are 5 standard errors of the estimate (a false failure about once in 3 million runs; the
seeds are fixed, so a run is reproducible anyway)."""

from __future__ import annotations

import numpy as np
import pytest
from oprun import run_headrace

from headrace import fn, types

BATCH, PER_SAMPLE = 64, 256  # 16384 draws per statistic


def draws(build, seed=5, num_threads=1, iterations=1):
    out = run_headrace(lambda x: build(), [np.zeros(1)] * BATCH, seed=seed, num_threads=num_threads,
                       iterations=iterations)
    batches = out if iterations > 1 else [out]
    return np.stack([np.stack(b[0]) for b in batches])


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_coin_flip_frequency(p):
    values = draws(lambda: fn.random.coin_flip(probability=p, shape=[PER_SAMPLE]))
    assert values.dtype == np.int32 and set(np.unique(values)) <= {0, 1}
    n = values.size
    assert abs(values.mean() - p) <= 5 * np.sqrt(p * (1 - p) / n)


def test_coin_flip_scalar_default_and_dtype():
    values = draws(lambda: fn.random.coin_flip(dtype=types.UINT8))
    assert values.shape == (1, BATCH) and values.dtype == np.uint8


def test_coin_flip_extremes():
    assert draws(lambda: fn.random.coin_flip(probability=0.0, shape=[8])).max() == 0
    assert draws(lambda: fn.random.coin_flip(probability=1.0, shape=[8])).min() == 1


@pytest.mark.parametrize("low, high", [(-1.0, 1.0), (0.0, 255.0), (3.0, 3.5)])
def test_uniform_moments_and_range(low, high):
    values = draws(lambda: fn.random.uniform(range=[low, high], shape=[PER_SAMPLE])).astype(np.float64)
    n, width = values.size, high - low
    assert values.min() >= low and values.max() < high
    assert abs(values.mean() - (low + high) / 2) <= 5 * width / np.sqrt(12 * n)
    # variance of a uniform: width^2 / 12; the sample variance's standard error is width^2 * sqrt(1/180 / n)
    assert abs(values.var() - width**2 / 12) <= 5 * width**2 * np.sqrt(1 / 180 / n)
    # every tenth of the range gets its share
    counts = np.histogram(values, bins=10, range=(low, high))[0]
    assert np.all(np.abs(counts - n / 10) <= 5 * np.sqrt(n * 0.1 * 0.9))


def test_uniform_discrete_values():
    values = draws(lambda: fn.random.uniform(values=[1.0, 5.0, 7.0], shape=[PER_SAMPLE], dtype=types.INT32))
    assert values.dtype == np.int32 and set(np.unique(values)) == {1, 5, 7}
    for v in (1, 5, 7):
        assert abs((values == v).mean() - 1 / 3) <= 5 * np.sqrt(2 / 9 / values.size)


@pytest.mark.parametrize("mean, stddev", [(0.0, 1.0), (10.0, 3.0)])
def test_normal_moments(mean, stddev):
    values = draws(lambda: fn.random.normal(mean=mean, stddev=stddev, shape=[PER_SAMPLE])).astype(np.float64)
    n = values.size
    assert abs(values.mean() - mean) <= 5 * stddev / np.sqrt(n)
    assert abs(values.std() - stddev) <= 5 * stddev / np.sqrt(2 * n)
    z = (values - mean) / stddev
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) <= 5 * np.sqrt(0.6827 * 0.3173 / n)
    assert abs(np.mean(z**3)) <= 5 * np.sqrt(15 / n)  # skewness of a normal is 0, its estimate's variance 15/n


def test_per_sample_arguments():
    """A per-sample mean: each sample's draws centre on its own mean."""
    out = run_headrace(lambda m: fn.random.normal(mean=m, stddev=0.01, shape=[64]),
                       [np.float32(v) for v in (0.0, 100.0, -50.0)])[0]
    for sample, want in zip(out, (0.0, 100.0, -50.0), strict=True):
        assert abs(sample.mean() - want) < 0.01


GENERATORS = {
    "coin_flip": lambda: fn.random.coin_flip(shape=[16]),
    "uniform": lambda: fn.random.uniform(range=[0, 1], shape=[16]),
    "normal": lambda: fn.random.normal(shape=[16]),
}


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_same_seed_same_draws_any_thread_count(name):
    one = draws(GENERATORS[name], seed=11, num_threads=1, iterations=3)
    three = draws(GENERATORS[name], seed=11, num_threads=3, iterations=3)
    np.testing.assert_array_equal(one, three)
    other = draws(GENERATORS[name], seed=12, num_threads=1, iterations=3)
    assert not np.array_equal(one, other)
    # batches and samples differ from each other (the stream moves on)
    assert not np.array_equal(one[0], one[1]) and not np.array_equal(one[0][0], one[0][1])


def test_two_generators_in_one_pipeline_are_independent():
    a, b = run_headrace(lambda x: (fn.random.uniform(shape=[PER_SAMPLE]), fn.random.uniform(shape=[PER_SAMPLE])),
                        [np.zeros(1)] * 16)
    a, b = np.stack(a).ravel(), np.stack(b).ravel()
    assert not np.array_equal(a, b)
    assert abs(np.corrcoef(a, b)[0, 1]) <= 5 / np.sqrt(a.size)


def test_explicit_op_seed_overrides_pipeline_seed():
    a = draws(lambda: fn.random.uniform(shape=[8], seed=42), seed=1)
    b = draws(lambda: fn.random.uniform(shape=[8], seed=42), seed=2)
    np.testing.assert_array_equal(a, b)
