"""random.normal, random.uniform and random.coin_flip with a shape-like input (DALI's `shape_like`:
`fn.random.normal(audio)`, the dither of NVIDIA's Jasper / QuartzNet pipelines): output shapes and types as DALI's
CPU build gives them (exact), statistics of headrace's and DALI's draws within 5 standard errors of the
distribution's (as tests/test_random.py), each sample's draws from its own stream (the same numbers as `shape=` of
that shape), and the GPU kernel's draws equal to the CPU's bit for bit (its host half here; on the device with marker
gpu)."""

from __future__ import annotations

import numpy as np
import pytest
from oprun import needs_dali, run_dali, run_headrace

from headrace import Pipeline, fn, pipeline_def, types
from headrace.errors import SampleError
from headrace.schema import get_schema
from headrace_kernels.cpu import random_ops
from headrace_kernels.rng import sample_rng

BATCH, PER_SAMPLE = 64, 256  # 16384 draws per statistic
RAGGED = [np.zeros((3, 5), np.int16), np.zeros((0, 4), np.int16), np.zeros((7, 2), np.int16), np.ones((1, 1), np.int16)]
GENERATORS = {
    "normal": lambda f, x, **kw: f.random.normal(x, **kw),
    "uniform": lambda f, x, **kw: f.random.uniform(x, **kw),
    "coin_flip": lambda f, x, **kw: f.random.coin_flip(x, **kw),
}


def _shapes_and_types(outputs) -> list[tuple]:
    return [(s.shape, s.dtype) for s in outputs]


DTYPES = [(name, dtype) for name in sorted(GENERATORS)
          for dtype in ((None, types.UINT8, types.BOOL) if name == "coin_flip" else (None, types.FLOAT64, types.INT16))]
"""Each generator with its default element type and two others it takes (coin_flip: DALI's INT32, UINT8, BOOL)."""


@pytest.mark.parametrize("name, dtype", DTYPES)
def test_output_takes_the_input_shape(name, dtype):
    kw = {} if dtype is None else {"dtype": dtype}
    (out,) = run_headrace(lambda x: GENERATORS[name](fn, x, **kw), RAGGED)
    default = np.dtype(np.int32 if name == "coin_flip" else np.float32)
    want = default if dtype is None else types.to_numpy_dtype(dtype)
    assert _shapes_and_types(out) == [(s.shape, want) for s in RAGGED]


@needs_dali
@pytest.mark.dali
@pytest.mark.parametrize("name, dtype", DTYPES)
def test_shapes_and_types_are_dalis(name, dtype):
    from nvidia.dali import types as dali_types

    ours = run_headrace(lambda x: GENERATORS[name](fn, x, **({} if dtype is None else {"dtype": dtype})), RAGGED)[0]
    kw = {} if dtype is None else {"dtype": getattr(dali_types, dtype.name)}
    dali = run_dali(lambda x, dfn: GENERATORS[name](dfn, x, **kw), RAGGED)[0]
    assert _shapes_and_types(ours) == _shapes_and_types(dali)


def test_scalar_and_one_dimensional_inputs():
    audio = [np.zeros(n, np.float32) for n in (5, 17, 1, 0)]
    assert [s.shape for s in run_headrace(lambda x: fn.random.normal(x), audio)[0]] == [(5,), (17,), (1,), (0,)]
    scalars = [np.float32(v) for v in (1, 2, 3)]
    assert [s.shape for s in run_headrace(lambda x: fn.random.uniform(x), scalars)[0]] == [()] * 3


def _check_moments(name: str, draws: np.ndarray, **kw) -> None:
    """The draws' mean, spread and shape of distribution within 5 standard errors of `name`'s with arguments kw."""
    values = draws.astype(np.float64).ravel()
    n = values.size
    if name == "normal":
        mean, stddev = kw.get("mean", 0.0), kw.get("stddev", 1.0)
        assert abs(values.mean() - mean) <= 5 * stddev / np.sqrt(n)
        assert abs(values.std() - stddev) <= 5 * stddev / np.sqrt(2 * n)
        z = (values - mean) / stddev
        assert abs(np.mean(np.abs(z) < 1) - 0.6827) <= 5 * np.sqrt(0.6827 * 0.3173 / n)
    elif name == "coin_flip":
        p = kw.get("probability", 0.5)
        assert set(np.unique(values)) <= {0.0, 1.0}
        assert abs(values.mean() - p) <= 5 * np.sqrt(p * (1 - p) / n)
    elif name == "uniform" and "values" in kw:
        for v in kw["values"]:
            share = 1 / len(kw["values"])
            assert abs((values == v).mean() - share) <= 5 * np.sqrt(share * (1 - share) / n)
    else:
        low, high = kw.get("range", (-1.0, 1.0))
        width = high - low
        assert values.min() >= low and values.max() < high
        assert abs(values.mean() - (low + high) / 2) <= 5 * width / np.sqrt(12 * n)
        assert abs(values.var() - width**2 / 12) <= 5 * width**2 * np.sqrt(1 / 180 / n)


CASES = [("normal", {}), ("normal", {"mean": 10.0, "stddev": 3.0}), ("uniform", {}),
         ("uniform", {"range": [0.0, 255.0]}), ("uniform", {"values": [1.0, 5.0, 7.0]}), ("coin_flip", {}),
         ("coin_flip", {"probability": 0.2})]
ZEROS = [np.zeros(PER_SAMPLE, np.float32)] * BATCH


@pytest.mark.parametrize("name, kw", CASES)
def test_statistics(name, kw):
    (out,) = run_headrace(lambda x: GENERATORS[name](fn, x, **kw), ZEROS, seed=3)
    _check_moments(name, np.stack(out), **kw)


@needs_dali
@pytest.mark.dali
@pytest.mark.parametrize("name, kw", CASES)
def test_dalis_draws_have_the_same_statistics(name, kw):
    """The reference the statistics above stand for: DALI's own draws meet the same bounds."""
    (out,) = run_dali(lambda x, dfn: GENERATORS[name](dfn, x, **kw), ZEROS, seed=3)
    _check_moments(name, np.stack(out), **kw)


def test_dither_as_the_asr_examples_write_it():
    """`audio + fn.random.normal(audio) * dither`: float32 audio of each sample's length plus N(0, dither)."""
    rng = np.random.default_rng(0)
    audio = [rng.uniform(-0.5, 0.5, n).astype(np.float32) for n in (16000, 9000, 12345, 20000)]
    (out,) = run_headrace(lambda x: x + fn.random.normal(x) * 1e-3, audio)
    assert _shapes_and_types(out) == [(a.shape, np.dtype(np.float32)) for a in audio]
    _check_moments("normal", np.concatenate([(o - a) / 1e-3 for o, a in zip(out, audio, strict=True)]))


def test_per_sample_arguments_with_a_shape_like_input():
    means = [np.float32(v) for v in (0.0, 100.0, -50.0)]
    (out,) = run_headrace(lambda x, m: fn.random.normal(x, mean=m, stddev=0.01), [np.zeros(64)] * 3, means)
    for sample, want in zip(out, (0.0, 100.0, -50.0), strict=True):
        assert sample.shape == (64,) and abs(sample.mean() - want) < 0.01


@pytest.mark.parametrize("name, kw", CASES)
def test_draws_are_the_samples_stream_as_with_shape(name, kw):
    """Sample k of iteration i draws from sample_rng(seed, i * batch + k): a (16,) input gives what shape=[16]
    gives, and any other shape the same stream's first draws."""
    shapes = [(16,), (4, 4), (0,), (3,)]
    draw = random_ops.DRAWS[f"random.{name}"]
    args = get_schema(f"random.{name}").resolve(kw)
    like, shaped = run_headrace(lambda x: (GENERATORS[name](fn, x, seed=9, **kw),
                                           getattr(fn.random, name)(shape=[16], seed=9, **kw)),
                                [np.zeros(s) for s in shapes], iterations=2)[1]
    for k, shape in enumerate(shapes):
        expected = draw(args, sample_rng(9, len(shapes) + k), shape)
        assert like[k].dtype == expected.dtype
        np.testing.assert_array_equal(like[k], expected)
    np.testing.assert_array_equal(like[0], shaped[0])


def test_input_less_draws_are_unchanged():
    """Without an input: a scalar by default, `shape` otherwise, from the sample's stream as before."""
    scalar, shaped, flips = run_headrace(lambda x: (fn.random.normal(seed=4), fn.random.uniform(shape=[2, 3], seed=4),
                                                    fn.random.coin_flip(shape=[5], seed=4)), [np.zeros(1)] * 3)
    for k in range(3):
        assert scalar[k].shape == () and scalar[k] == np.float32(sample_rng(4, k).normal(0.0, 1.0, ()))
        np.testing.assert_array_equal(shaped[k], sample_rng(4, k).uniform(-1.0, 1.0, (2, 3)).astype(np.float32))
        np.testing.assert_array_equal(flips[k], (sample_rng(4, k).random(5) < 0.5).astype(np.int32))


def test_same_draws_with_any_thread_count():
    one = run_headrace(lambda x: fn.random.normal(x), RAGGED * 4, seed=11, num_threads=1, iterations=2)
    three = run_headrace(lambda x: fn.random.normal(x), RAGGED * 4, seed=11, num_threads=3, iterations=2)
    for a, b in zip(one, three, strict=True):
        for x, y in zip(a[0], b[0], strict=True):
            np.testing.assert_array_equal(x, y)


def test_shape_and_a_shape_like_input_together_are_refused():
    with pytest.raises(SampleError, match='"shape" cannot be given with a shape-like input'):
        run_headrace(lambda x: fn.random.normal(x, shape=[2]), RAGGED)


@needs_dali
@pytest.mark.dali
def test_dali_refuses_them_together_too():
    with pytest.raises(RuntimeError, match="incompatible with providing a shape-like input"):
        run_dali(lambda x, dfn: dfn.random.normal(x, shape=[2]), RAGGED)


def test_output_spec_follows_the_input():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        x = fn.reshape(fn.external_source(name="x"), shape=[2, 8])
        like, shaped, scalar = fn.random.normal(x), fn.random.uniform(shape=[3], dtype=types.FLOAT64), \
            fn.random.coin_flip()
        assert (like.spec.dtype, like.spec.dims) == (np.float32, (2, 8))
        assert (shaped.spec.dtype, shaped.spec.dims) == (np.float64, (3,))
        assert (scalar.spec.dtype, scalar.spec.dims) == (np.int32, ())
        return like

    pipe()


class _HostBatch:
    """What the GPU kernel reads of a batch, on the host: the input's samples, arguments, the samples' streams."""

    def __init__(self, samples, args, seed, first=0):
        self.samples, self.args, self.seed, self.first = samples, args, seed, first
        self.size = len(samples) if samples is not None else 3

    def num_inputs(self):
        return 0 if self.samples is None else 1

    def value(self, k=0):
        return self.samples

    def sample_args(self):
        return [self.args] * self.size

    def rng(self, index):
        return sample_rng(self.seed, self.first + index)


def _host_upload(arrays: list) -> tuple:
    """staging.upload_arrays' contract in numpy: one (N, ...) array when the samples share shape and type."""
    first = np.asarray(arrays[0])
    if all(np.shape(a) == first.shape and np.asarray(a).dtype == first.dtype for a in arrays):
        return np.stack(arrays), None
    return None, [np.asarray(a) for a in arrays]


@pytest.mark.parametrize("name, kw", CASES)
@pytest.mark.parametrize("inputs", ["ragged", "dense", "none"])
def test_gpu_kernel_draws_the_cpu_kernels_numbers_on_the_host(name, kw, inputs, monkeypatch):
    """The GPU kernel's host half (its upload replaced by numpy: no GPU needed) gives the CPU kernel's samples."""
    from headrace_kernels.gpu import random_ops as gpu_random

    monkeypatch.setattr(gpu_random, "upload_arrays", _host_upload)
    samples = {"ragged": RAGGED, "dense": [np.zeros((2, 3))] * 4, "none": None}[inputs]
    op = f"random.{name}"
    args = get_schema(op).resolve({**kw, **({"shape": [5]} if inputs == "none" else {})})

    class Ctx:
        def __init__(self, index):
            self.rng = sample_rng(13, 40 + index)

    dense, listed = gpu_random.HostDraws(type("Setup", (), {"op": op})).run(_HostBatch(samples, args, 13, 40))
    got = list(dense) if dense is not None else listed
    assert (dense is not None) == (inputs != "ragged")
    cpu = getattr(random_ops, name)
    for k, sample in enumerate(got):
        expected = cpu([samples[k]] if samples is not None else [], args, Ctx(k))
        assert sample.dtype == expected.dtype
        np.testing.assert_array_equal(sample, expected)


def _run_on(device: str, build, batch: list[np.ndarray], iterations: int = 2) -> list[list[np.ndarray]]:
    """build(data) with the data on `device` (uploaded for 'gpu'), over `iterations` runs of the batch."""
    pipe = Pipeline(batch_size=len(batch), num_threads=2, device_id=0, seed=3)
    with pipe:
        data = fn.external_source(source=lambda: batch, name="data")
        out = build(data.gpu() if device == "gpu" else data)
        pipe.set_outputs(out)
    runs = []
    for _ in range(iterations):
        (result,) = pipe.run()
        assert result.device == device
        result = result.as_cpu() if device == "gpu" else result
        runs.append([np.asarray(result.at(i)) for i in range(len(result))])
    pipe.close()
    return runs


GPU_GRAPHS = {
    "normal": lambda x: fn.random.normal(x, seed=21, mean=1.0, stddev=2.0),
    "uniform": lambda x: fn.random.uniform(x, seed=21, range=[0.0, 5.0], dtype=types.FLOAT64),
    "uniform_values": lambda x: fn.random.uniform(x, seed=21, values=[1.0, 2.0, 3.0], dtype=types.INT32),
    "dither": lambda x: x + fn.random.normal(x, seed=21) * 1e-5,
    "coin_flip": lambda x: fn.random.coin_flip(x, seed=21, probability=0.3, dtype=types.UINT8),
}


def _assert_same(gpu_runs, cpu_runs, rtol: float = 0.0) -> None:
    for g, c in zip(gpu_runs, cpu_runs, strict=True):
        for a, b in zip(g, c, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            if rtol:
                np.testing.assert_allclose(a, b, rtol=rtol, atol=0)
            else:
                np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("graph", sorted(GPU_GRAPHS))
@pytest.mark.parametrize("batch", ["ragged", "dense"])
def test_gpu_draws_equal_the_cpu_draws(graph, batch):
    """Exact for the draws; the dithered audio within float32 arithmetic (the GPU may fuse the multiply-add)."""
    rng = np.random.default_rng(1)
    shapes = [(160,), (7,), (0,), (1600,)] if batch == "ragged" else [(4, 6)] * 5
    samples = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    _assert_same(_run_on("gpu", GPU_GRAPHS[graph], samples), _run_on("cpu", GPU_GRAPHS[graph], samples),
                 rtol=1e-6 if graph == "dither" else 0.0)


@pytest.mark.gpu
def test_gpu_draws_without_an_input_and_with_per_sample_arguments():
    means = [np.float32(v) for v in (0.0, 10.0, -5.0)]
    batch = [np.zeros(6, np.float32)] * 3
    _assert_same(_run_on("gpu", lambda x: fn.random.normal(shape=[6], seed=8, device="gpu"), batch),
                 _run_on("cpu", lambda x: fn.random.normal(shape=[6], seed=8), batch))
    with_means = lambda x: fn.random.normal(x, mean=fn.external_source(source=lambda: means), seed=8)  # noqa: E731
    _assert_same(_run_on("gpu", with_means, batch), _run_on("cpu", with_means, batch))


@pytest.mark.gpu
def test_gpu_draws_with_per_sample_shapes_and_values():
    shapes = [np.array(s, np.int32) for s in ([2, 3], [4, 1], [0, 5])]
    values = [np.array(v, np.float32) for v in ([1.0, 2.0], [5.0], [-1.0, 0.5, 7.0])]
    batch = [np.zeros(1, np.float32)] * 3

    def graph(device):
        return lambda x: fn.random.uniform(shape=fn.external_source(source=lambda: shapes), seed=8, device=device,
                                           values=fn.external_source(source=lambda: values))

    _assert_same(_run_on("gpu", graph("gpu"), batch), _run_on("cpu", graph("cpu"), batch))
