"""random.choice and random.beta against DALI's CPU build. headrace draws from its own per-sample Philox streams, so
the draws themselves differ from DALI's: shapes and element types are compared exactly, the distributions by
statistics over many draws (frequencies within 0.02, means within 0.01, variances within 15% of the expected value
and of DALI's). The GPU kernels draw on the host from the same streams: GPU equals CPU bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import fn, pipeline_def, types
from headrace.errors import SampleError, SchemaError
from tests.gpu_helpers import cpu_and_gpu

N = 20000  # draws per sample for the statistics
LIKE = [np.zeros(N, np.float32)] * 2  # a shape-like input: N draws per sample


def _scalar(value: int) -> list[np.ndarray]:
    return [np.array(value, np.int32)] * 2


CHOICE_CASES = [
    ("scalar n", _scalar(5), {}),
    ("scalar n, shape", _scalar(7), {"shape": [3, 2]}),
    ("float values, p", [np.array([1.5, 2.5, 7.0], np.float32)] * 2, {"shape": [4], "p": [0.1, 0.1, 0.8]}),
    ("int16 rows", [np.array([[1, 2], [3, 4], [5, 6]], np.int16)] * 2, {"shape": [5]}),
    ("uint8 rows, no shape", [np.arange(12, dtype=np.uint8).reshape(4, 3)] * 2, {}),
]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("name, candidates, kwargs", CHOICE_CASES, ids=[c[0] for c in CHOICE_CASES])
def test_choice_shapes_types_and_values_as_dali(name, candidates, kwargs):
    ours, theirs = run_headrace("random.choice", candidates, **kwargs), run_dali("random.choice", candidates, **kwargs)
    for got, want, pool in zip(ours, theirs, candidates, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
        rows = {tuple(np.atleast_1d(r)) for r in (np.arange(int(pool)) if pool.ndim == 0 else pool)}
        assert {tuple(np.atleast_1d(r)) for r in got.reshape(-1, *pool.shape[1:])} <= rows


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("p", [None, [0.1, 0.2, 0.7], [0.5, 0.0, 0.5]])
def test_choice_frequencies_follow_p_as_dali(p):
    kwargs = {"shape": [N]} | ({"p": p} if p else {})
    expected = np.array(p if p else [1 / 3] * 3)
    for run in (run_headrace, run_dali):
        for sample in run("random.choice", _scalar(3), **kwargs):
            frequencies = np.bincount(sample, minlength=3) / N
            np.testing.assert_allclose(frequencies, expected, atol=0.02, err_msg=run.__name__)


@needs_dali[0]
@needs_dali[1]
def test_choice_shape_like_input_gives_the_shape():
    like = [np.zeros((2, 3), np.float32), np.zeros((4, 1), np.float32)]
    pool = [np.array([10, 20, 30], np.int16)] * 2
    ours, theirs = run_headrace("random.choice", pool, like), run_dali("random.choice", pool, like)
    assert [o.shape for o in ours] == [t.shape for t in theirs] == [(2, 3), (4, 1)]
    assert all(o.dtype == np.int16 and set(o.ravel()) <= {10, 20, 30} for o in ours)


def test_choice_per_sample_p_from_a_data_node():
    p = [np.array([1.0, 0.0, 0.0], np.float32), np.array([0.0, 0.0, 1.0], np.float32)]
    first, second = run_headrace("random.choice", _scalar(3), arg_inputs={"p": p}, shape=[50])
    assert set(first.tolist()) == {0} and set(second.tolist()) == {2}


@pytest.mark.parametrize("candidates, kwargs, message", [
    (_scalar(0), {}, "the number of candidates must be positive, got 0"),
    ([np.array(3.0, np.float32)] * 2, {}, "must be an integer, got float32"),
    ([np.zeros((0, 2), np.int32)] * 2, {}, "the candidates input is empty"),
    (_scalar(3), {"p": [0.5, 0.6, 0.1]}, "argument 'p' must sum to 1, got 1.2"),
    (_scalar(3), {"p": [0.5, 0.5]}, "argument 'p' gives 2 probabilities for 3 candidates"),
    (_scalar(3), {"p": [1.5, -0.5, 0.0]}, "argument 'p' has a negative probability"),
])
def test_choice_bad_input_names_op_sample_and_argument(candidates, kwargs, message):
    with pytest.raises(SampleError, match=rf"random\.choice .*sample 0.*{message}"):
        run_headrace("random.choice", candidates, **kwargs)


@needs_dali[0]
@needs_dali[1]
def test_choice_per_sample_shape_from_a_data_node_as_dali():
    shapes = {"shape": [np.array([2, 3], np.int32), np.array([4, 1], np.int32)]}
    ours = run_headrace("random.choice", _scalar(4), arg_inputs=shapes)
    theirs = run_dali("random.choice", _scalar(4), arg_inputs=shapes)
    assert [o.shape for o in ours] == [t.shape for t in theirs] == [(2, 3), (4, 1)]
    assert all(o.dtype == np.int32 and o.max() < 4 for o in ours)


def test_choice_shape_and_shape_like_together_are_refused():
    with pytest.raises(SampleError, match='"shape" cannot be given with a shape-like input'):
        run_headrace("random.choice", _scalar(3), [np.zeros(2)] * 2, shape=[2])


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (2.0, 5.0), (0.5, 0.5)])
def test_beta_statistics_as_dali(alpha, beta):
    mean = alpha / (alpha + beta)
    variance = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    ours = run_headrace("random.beta", LIKE, alpha=alpha, beta=beta)
    theirs = run_dali("random.beta", LIKE, alpha=alpha, beta=beta)
    for sample in (*ours, *theirs):
        assert sample.dtype == np.float32 and sample.shape == (N,)
        assert 0.0 <= sample.min() and sample.max() <= 1.0
        assert abs(sample.mean() - mean) < 0.01
        assert abs(sample.var() - variance) < 0.15 * variance
    assert abs(ours[0].var() - theirs[0].var()) < 0.15 * variance


@needs_dali[0]
@needs_dali[1]
def test_beta_dtype_and_shape_like_as_dali():
    like = [np.zeros((3, 4), np.uint8), np.zeros((5, 2), np.uint8)]
    ours = run_headrace("random.beta", like, dtype=types.FLOAT64)
    from nvidia.dali import types as dali_types

    theirs = run_dali("random.beta", like, dtype=dali_types.FLOAT64)
    assert [(o.shape, o.dtype) for o in ours] == [(t.shape, t.dtype) for t in theirs]
    assert ours[0].dtype == np.float64


def test_beta_per_sample_parameters_and_errors():
    alphas = [np.array(1.0, np.float32), np.array(9.0, np.float32)]
    low, high = run_headrace("random.beta", LIKE, arg_inputs={"alpha": alphas}, beta=1.0)
    assert abs(low.mean() - 0.5) < 0.01 and abs(high.mean() - 0.9) < 0.01
    with pytest.raises(SampleError, match=r"random\.beta .*sample 0.*argument 'beta' must be positive, got 0"):
        run_headrace("random.beta", LIKE, beta=0.0)
    with pytest.raises(SchemaError, match=r"random\.beta .*argument 'dtype'"):
        run_headrace("random.beta", LIKE, dtype=types.INT32)


def test_draws_repeat_with_the_seed_and_differ_between_samples():
    like = [np.zeros(8, np.float32)] * 2
    first = run_headrace("random.beta", like, seed=11)
    again = run_headrace("random.beta", like, seed=11)
    other = run_headrace("random.beta", like, seed=12)
    np.testing.assert_array_equal(first[0], again[0])
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[0], other[0])


def test_output_specs_agree_with_the_output():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        like = fn.external_source(name="like", dtype=types.FLOAT, ndim=2)
        rows = fn.external_source(name="rows", dtype=types.INT16, ndim=2)
        return (fn.random.choice(5), fn.random.choice(rows, shape=[3]), fn.random.choice(rows, like),
                fn.random.beta(shape=[4]), fn.random.beta(like, dtype=types.FLOAT64))

    built = pipe()
    feed = {"like": [np.zeros((2, 3), np.float32)] * 2, "rows": [np.arange(6, dtype=np.int16).reshape(3, 2)] * 2}
    expected = [(np.int32, ()), (np.int16, (3, -1)), (np.int16, (-1, -1, -1)), (np.float32, (4,)),
                (np.float64, (-1, -1))]
    for node, batch, (dtype, dims) in zip(built.outputs, built.run(**feed), expected, strict=True):
        assert node.spec.dtype == dtype and batch.dtype == dtype and node.spec.dims == dims, node.spec
        for i in range(2):
            shape = np.asarray(batch.at(i)).shape
            assert len(shape) == len(dims) and all(want in (-1, got) for want, got in zip(dims, shape, strict=True))
    built.close()


@pytest.mark.gpu
def test_gpu_draws_equal_cpu_draws():
    pools = [np.array([4, 8, 15, 16, 23, 42], np.int32), np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)]
    for pool in pools:
        cpu, gpu = cpu_and_gpu([pool] * 3, lambda d, dev: fn.random.choice(d, shape=[7], seed=5))
        for a, b in zip(cpu, gpu, strict=True):
            np.testing.assert_array_equal(a, b)
    like = [np.zeros((3, 5), np.float32), np.zeros((2,), np.float32)]
    cpu, gpu = cpu_and_gpu(like, lambda d, dev: fn.random.beta(d, alpha=2.0, beta=3.0, seed=5))
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a, b)
