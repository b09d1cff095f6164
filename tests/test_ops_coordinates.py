"""coord_transform against numpy (float64 M @ x + T, within 1e-4 of the float32 result; integer outputs rounded half
away from zero and clamped: exact) and DALI's CPU operator (float32 both: within 1e-5 relative, integers exact).
The GPU kernel against the CPU one (float32 matrix products: within 1e-5 relative, integers exact)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import assert_specs_agree, needs_dali, run_once

import headrace
from headrace import types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(81)
POINTS = [RNG.uniform(-50, 50, (7, 2)).astype(np.float32), RNG.uniform(-50, 50, (3, 2)).astype(np.float32)]
CLOUDS = [RNG.uniform(-5, 5, (4, 6, 3)).astype(np.float32), RNG.uniform(-5, 5, (2, 2, 3)).astype(np.float32)]
PIXELS = [RNG.integers(0, 256, (5, 4, 3), dtype=np.uint8), RNG.integers(0, 256, (2, 9, 3), dtype=np.uint8)]
INTS = [RNG.integers(-1000, 1000, (6, 2), dtype=np.int32), np.array([[3, 5], [-3, -5]], np.int32)]


def _source(samples: list) -> Callable[[], list]:
    return lambda: list(samples)


def run(api, samples: list, arg_inputs: dict | None = None, **kwargs) -> list[np.ndarray]:
    """coord_transform over one batch in `api` (headrace or nvidia.dali)."""
    fn = api.fn

    @api.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=3)
    def pipe():
        args = {k: fn.external_source(source=_source(v), batch=True) for k, v in (arg_inputs or {}).items()}
        return fn.coord_transform(fn.external_source(source=_source(samples), batch=True), **args, **kwargs)

    out = run_once(pipe())
    return [np.array(out.at(i)) for i in range(len(out))]


def reference(points: np.ndarray, matrix: np.ndarray, shift: np.ndarray) -> np.ndarray:
    return points.astype(np.float64) @ matrix.T + shift


def half_away(values: np.ndarray, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(np.where(values >= 0, np.floor(values + 0.5), np.ceil(values - 0.5)), info.min, info.max).astype(
        dtype)


CASES = [
    (POINTS, dict(M=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], T=[1.0, -1.0, 0.5]),
     np.array([[1, 2], [3, 4], [5, 6]], float), np.array([1, -1, 0.5])),
    (POINTS, dict(M=2.0, T=1.0), 2 * np.eye(2), np.ones(2)),
    (POINTS, dict(MT=[0.5, -0.25, 3.0, 0.75, 1.5, -2.0]), np.array([[0.5, -0.25], [0.75, 1.5]]), np.array([3.0, -2])),
    (POINTS, dict(M=[1.0, 1.0]), np.array([[1.0, 1.0]]), np.zeros(1)),
    (CLOUDS, dict(MT=[1, 0, 0, 5, 0, 0, 1, -5, 0, 1, 0, 0]), np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]], float),
     np.array([5, -5, 0.0])),
    (PIXELS, dict(M=[0.299, 0.587, 0.114]), np.array([[0.299, 0.587, 0.114]]), np.zeros(1)),
    (POINTS, dict(), np.eye(2), np.zeros(2)),
]


@pytest.mark.parametrize("samples, kwargs, matrix, shift", CASES)
def test_matches_numpy(samples, kwargs, matrix, shift):
    for got, points in zip(run(headrace, samples, **kwargs), samples, strict=True):
        expected = reference(points, matrix, shift)
        assert got.dtype == np.float32 and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_integer_output_rounds_half_away_and_clamps():
    got = run(headrace, INTS, M=[0.5, 0, 0, 0.5], T=[0.0, 300.0], dtype=types.INT32)
    for out, points in zip(got, INTS, strict=True):
        np.testing.assert_array_equal(out, half_away(reference(points, 0.5 * np.eye(2), np.array([0, 300])),
                                                     np.int32))
    got = run(headrace, PIXELS, MT=[2, 0, 0, -100, 0, 1, 0, 0, 0, 0, 1, 0.5], dtype=types.UINT8)
    for out, pixels in zip(got, PIXELS, strict=True):
        expected = reference(pixels, np.diag([2.0, 1.0, 1.0]), np.array([-100, 0, 0.5]))
        np.testing.assert_array_equal(out, half_away(expected, np.uint8))


def test_per_sample_matrix_from_data_nodes():
    matrices = [np.array([[0, 1], [1, 0]], np.float32), np.array([[2, 0], [0, 3]], np.float32)]
    got = run(headrace, POINTS, arg_inputs={"M": matrices})
    for out, points, matrix in zip(got, POINTS, matrices, strict=True):
        np.testing.assert_allclose(out, reference(points, matrix.astype(float), np.zeros(2)), rtol=1e-6)


def test_bad_arguments_name_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"coord_transform .*sample 0.*'M' has 3 values, not a multiple of 2"):
        run(headrace, POINTS, M=[1.0, 2.0, 3.0])
    with pytest.raises(SampleError, match=r"coord_transform .*sample 0.*'T' needs 1 or 2 values"):
        run(headrace, POINTS, M=[1.0, 0, 0, 1], T=[1.0, 2.0, 3.0])
    with pytest.raises(SampleError, match=r"coord_transform .*sample 0.*'dtype' must be FLOAT or the input's type"):
        run(headrace, INTS, dtype=types.UINT8)
    with pytest.raises(SampleError, match=r"coord_transform .*sample 0.*innermost axis"):
        run(headrace, [np.zeros(3, np.float32)])
    with pytest.raises(SchemaError, match="`MT` argument cannot be used together with `M` or `T`"):
        run(headrace, POINTS, M=[1.0], MT=[1.0])


@pytest.mark.parametrize("samples, kwargs", [(c[0], c[1]) for c in CASES] + [
    (INTS, dict(M=[0.5, 0, 0, 0.5], T=[0.0, 300.0], dtype=types.INT32)),
    (PIXELS, dict(MT=[2, 0, 0, -100, 0, 1, 0, 0, 0, 0, 1, 0.5], dtype=types.UINT8)),
])
@needs_dali[0]
@needs_dali[1]
def test_matches_dali(samples, kwargs):
    import nvidia.dali

    for ours, theirs in zip(run(headrace, samples, **kwargs), run(nvidia.dali, samples, **kwargs), strict=True):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        if ours.dtype.kind == "f":
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.gpu
@pytest.mark.parametrize("samples, kwargs", [(c[0], c[1]) for c in CASES] + [
    (PIXELS, dict(MT=[2, 0, 0, -100, 0, 1, 0, 0, 0, 0, 1, 0.5], dtype=types.UINT8))])
def test_gpu_matches_cpu(samples, kwargs):
    def graph(data, device):
        return headrace.fn.coord_transform(data, device=device, **kwargs)

    cpu, gpu = cpu_and_gpu(samples, graph)
    for a, b in zip(cpu, gpu, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
        else:
            np.testing.assert_array_equal(a, b)




def test_output_specs_agree_with_the_outputs():
    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        points = fn.external_source(name="points", dtype=types.FLOAT, ndim=2)
        ints = fn.external_source(name="ints", dtype=types.INT32, ndim=2)
        return (fn.coord_transform(points, M=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), fn.coord_transform(points, MT=2.0),
                fn.coord_transform(ints, M=[1.0, 1.0], dtype=types.INT32), fn.coord_transform(points))

    assert_specs_agree(pipe(), points=POINTS, ints=INTS)


@pytest.mark.parametrize("layout", ["NX", None])
@needs_dali[0]
@needs_dali[1]
def test_output_keeps_the_input_layout_as_dali(layout):
    import nvidia.dali

    def layout_of(api):
        @api.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            points = api.fn.external_source(source=lambda: [np.ones((3, 2), np.float32)], layout=layout)
            return api.fn.coord_transform(points, M=[2.0, 0, 0, 1, 1, 1])

        return run_once(pipe()).layout()

    assert layout_of(headrace) == layout_of(nvidia.dali) == (layout or "")
