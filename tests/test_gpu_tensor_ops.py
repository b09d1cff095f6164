"""GPU reductions, stack, cat, reshape, transpose, pad, one_hot, Constant and comparisons against their CPU twins
(same graph, same batch), and the two pipelines of issue 7 with their GPU parts on the GPU.

Tolerances: min / max, every reduction of integer or boolean data (sums exact in 64-bit integers or doubles),
and all memory-movement ops are bit-exact. Reductions of float data accumulate in float64 on both sides, in a
different order; rounded to float32 they agree within 1e-6 relative."""

from __future__ import annotations

import math

import numpy as np
import pytest

from headrace import Pipeline, fn, pipeline_def, types
from headrace.errors import SampleError
from tests.gpu_helpers import cpu_and_gpu, max_level_difference, run_graph

pytestmark = pytest.mark.gpu

# HWC samples of different sizes: the largest needs many 2048-element chunks, (1, 1, 3) almost none
SHAPES = [(300, 500, 3), (7, 9, 3), (1, 1, 3), (64, 33, 3), (129, 2, 3)]
DTYPES = [np.uint8, np.int32, np.float32, np.float16, np.int64]


def _batch(dtype, shapes=SHAPES, seed=0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes:
        if np.dtype(dtype).kind == "f":
            out.append(rng.normal(10, 50, shape).astype(dtype))
        elif np.dtype(dtype) == np.bool_:
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            low = 0 if np.dtype(dtype).kind == "u" else -1000
            out.append(rng.integers(low, 1000, shape).astype(dtype))
    return out


def _assert_matches(cpu: list, gpu: list, exact: bool) -> None:
    for a, b in zip(cpu, gpu, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if exact:
            np.testing.assert_array_equal(b, a)
        else:
            np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64), rtol=1e-6, atol=0)


AXES = [dict(), dict(axes=(0, 1)), dict(axes=(2,)), dict(axes=(0, 2), keep_dims=True), dict(axis_names="HW"),
        dict(axes=(-1, 0)), dict(axes=(1,), keep_dims=True)]


@pytest.mark.parametrize("op", ["sum", "mean", "mean_square", "rms", "min", "max"])
@pytest.mark.parametrize("axes", AXES, ids=[str(a) for a in AXES])
def test_reductions_match_cpu(op, axes):
    for dtype in DTYPES:
        batch = _batch(dtype)
        cpu, gpu = cpu_and_gpu(batch, lambda d, dev: getattr(fn.reductions, op)(d, **axes))
        exact = op in ("min", "max") or np.dtype(dtype).kind != "f"
        if op == "rms" or (op == "mean_square" and np.dtype(dtype).itemsize == 8):
            exact = False  # a root (or squares beyond 2**53) rounds once more
        _assert_matches(cpu, gpu, exact)


@pytest.mark.parametrize("op", ["sum", "mean", "min", "max"])
def test_reductions_of_booleans_and_output_types(op):
    batch = _batch(np.bool_)
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: getattr(fn.reductions, op)(d, axes=(0, 1)))
    _assert_matches(cpu, gpu, exact=True)
    if op in ("sum", "mean"):
        ints = _batch(np.int16)
        cpu, gpu = cpu_and_gpu(ints, lambda d, dev: getattr(fn.reductions, op)(d, dtype=types.FLOAT64))
        _assert_matches(cpu, gpu, exact=True)


def test_reductions_of_a_dense_batch_and_of_nan():
    batch = _batch(np.float32, [(40, 50, 3)] * 4)
    batch[1][3, 4, 1] = np.nan
    for op in ("min", "max", "sum", "mean"):
        cpu, gpu = cpu_and_gpu(batch, lambda d, dev, op=op: getattr(fn.reductions, op)(d, axes=(0, 1)))
        for a, b in zip(cpu, gpu, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-6, equal_nan=True)
        assert np.isnan(gpu[1][1]) and not np.isnan(gpu[1][0])


@pytest.mark.parametrize("op", ["std_dev", "variance"])
@pytest.mark.parametrize("axes", [dict(), dict(axes=(0, 1)), dict(axes=(2,), keep_dims=True)])
def test_std_dev_and_variance_match_cpu(op, axes):
    for dtype in (np.uint8, np.float32):
        batch = _batch(dtype, [s for s in SHAPES if s[0] > 1])  # ddof=1 needs two elements per output

        def graph(d, dev, axes=axes):
            mean = fn.reductions.mean(d, **axes)
            return getattr(fn.reductions, op)(d, mean, ddof=1, **axes)

        cpu, gpu = cpu_and_gpu(batch, graph)
        _assert_matches(cpu, gpu, exact=False)


def test_reduction_of_an_empty_axis_names_the_op():
    batch = [np.zeros((0, 4), np.float32), np.ones((2, 4), np.float32)]
    with pytest.raises(SampleError, match=r"reductions.mean .*GPU.* sample 0 .*cannot reduce an empty axis"):
        run_graph(batch, lambda d, dev: fn.reductions.mean(d, axes=(0,)), "gpu")


@pytest.mark.parametrize("shapes", [[(6, 5, 3)] * 3, [(6, 5, 3), (2, 9, 3), (1, 1, 3)]], ids=["dense", "ragged"])
def test_stack_cat_transpose_reshape_match_cpu(shapes):
    batch = _batch(np.int16, shapes, seed=2)
    graphs = [lambda d, dev: fn.stack(d, d + d, axis=0), lambda d, dev: fn.stack(d, d, d, axis=-1),
              lambda d, dev: fn.stack(d, -d, axis=2), lambda d, dev: fn.cat(d, d + d, axis=1),
              lambda d, dev: fn.cat(d, d, axis=-1), lambda d, dev: fn.transpose(d, perm=[2, 0, 1]),
              lambda d, dev: fn.transpose(d, perm=[1, 0, 2]), lambda d, dev: fn.transpose(d),
              lambda d, dev: fn.reshape(d, shape=[-1, 3]),
              lambda d, dev: fn.reshape(d, rel_shape=[1, -1, 1]), lambda d, dev: fn.reshape(d, shape=[-1]),
              lambda d, dev: fn.reshape(fn.reductions.sum(d, axes=(2,), keep_dims=True), src_dims=[2, 0, 1])]
    for graph in graphs:
        cpu, gpu = cpu_and_gpu(batch, graph)
        _assert_matches(cpu, gpu, exact=True)


def test_reshape_with_a_per_sample_shape_from_the_cpu():
    batch = [np.arange(24, dtype=np.float32).reshape(2, 12), np.arange(12, dtype=np.float32).reshape(3, 4)]
    shapes = [np.array([4, 6], np.int32), np.array([6, 2], np.int32)]

    def graph(d, dev):
        shape = fn.external_source(source=lambda: shapes, name="shapes")
        return fn.reshape(d, shape=shape)

    cpu, gpu = cpu_and_gpu(batch, graph)
    _assert_matches(cpu, gpu, exact=True)
    assert gpu[0].shape == (4, 6) and gpu[1].shape == (6, 2)


def test_stack_of_different_shapes_is_a_clear_error():
    batch = [np.zeros((2, 3), np.float32)]
    with pytest.raises(SampleError, match=r"stack .*GPU.* sample 0 .*different shapes"):
        run_graph(batch, lambda d, dev: fn.stack(d, fn.transpose(d, perm=[1, 0])), "gpu")


@pytest.mark.parametrize("shapes", [[(5, 7, 3), (9, 2, 3), (1, 1, 3)], [(4, 4, 3)] * 3], ids=["ragged", "dense"])
def test_pad_matches_cpu(shapes):
    batch = _batch(np.uint8, shapes, seed=3)
    graphs = [lambda d, dev: fn.pad(d, axes=(0, 1), fill_value=7),
              lambda d, dev: fn.pad(d, axes=(0,), fill_value=300, align=4),
              lambda d, dev: fn.pad(fn.reshape(d, layout="HWC"), axis_names="HW", shape=[-1, 12], fill_value=-5),
              lambda d, dev: fn.pad(fn.cast(d, dtype=types.FLOAT), fill_value=0.5, align=[2, 3, 5])]
    for graph in graphs:
        cpu, gpu = cpu_and_gpu(batch, graph)
        _assert_matches(cpu, gpu, exact=True)


@pytest.mark.parametrize("shapes", [[(3, 4), (2, 5)], [(3, 4)] * 3], ids=["ragged", "dense"])
def test_axis_names_match_cpu(shapes):
    """cat / stack / one_hot / pad by layout letters (the layout given by a reshape), GPU against CPU."""
    batch = [a % 7 for a in _batch(np.int32, shapes, seed=4)]
    graphs = [lambda d, dev: fn.cat(fn.reshape(d, layout="HW"), d, axis_name="W"),
              lambda d, dev: fn.cat(fn.reshape(d, layout="HW"), d, axis_name="H"),
              lambda d, dev: fn.stack(fn.reshape(d, layout="HW"), d, axis=-2, axis_name="C"),
              lambda d, dev: fn.one_hot(fn.reshape(d, layout="HW"), num_classes=7, axis=0, axis_name="C"),
              lambda d, dev: fn.pad(fn.reshape(d, layout="HW"), axis_names="W", fill_value=-1)]
    for graph in graphs:
        cpu, gpu = cpu_and_gpu(batch, graph)
        _assert_matches(cpu, gpu, exact=True)


@pytest.mark.parametrize("graph, message", [
    (lambda d, dev: fn.cat(d, d, axis_name="W"), "cat: axis_name 'W' is not an axis of the first input's layout"),
    (lambda d, dev: fn.stack(d, d, axis_name="C"), "stack: axis_name 'C' names the new axis"),
    (lambda d, dev: fn.stack(d, d, axis=-3), r"stack: axis -3 is out of range \[-2, 2\]"),
    (lambda d, dev: fn.one_hot(d, num_classes=3, axis_name="C"), "one_hot: axis_name 'C' .* must have 2 letters"),
    (lambda d, dev: fn.pad(d, axis_names="W"), "pad: axis_names 'W': 'W' is not an axis of the input's layout ''"),
])
@pytest.mark.parametrize("shapes", [[(3, 4), (2, 5)], [(3, 4)] * 2], ids=["ragged", "dense"])
def test_axis_names_without_a_layout_are_errors_on_the_gpu(graph, message, shapes):
    with pytest.raises(SampleError, match=message):
        run_graph(_batch(np.int32, shapes), graph, "gpu")


def test_one_hot_matches_cpu():
    scalars = [np.array(v, np.int32) for v in (0, 3, 9, 4)]
    single = [np.array([v], np.int64) for v in (1, 2, 0, 5)]
    vectors = [np.array([1, 0, 2], np.int32), np.array([3, 3], np.int32)]
    floats = [np.array([2.0, 1.0], np.float32), np.array([0.0, 4.0], np.float32)]
    cases = [(scalars, dict(num_classes=10)), (single, dict(num_classes=6, dtype=types.UINT8, on_value=300)),
             (vectors, dict(num_classes=4, axis=0, on_value=2.5, off_value=-1)),
             (floats, dict(num_classes=5, dtype=types.INT32)), (vectors, dict())]  # DALI's default: 0 classes
    for batch, args in cases:
        cpu, gpu = cpu_and_gpu(batch, lambda d, dev, args=args: fn.one_hot(d, **args))
        _assert_matches(cpu, gpu, exact=True)


def test_one_hot_truncates_fractional_labels_as_the_cpu():
    batch = [np.array([1.0, 2.7, -0.5, -1.5, np.nan, np.inf], np.float32), np.array([0.5], np.float64)]
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.one_hot(d, num_classes=3))
    _assert_matches(cpu, gpu, exact=True)


def test_constant_on_the_gpu_and_comparisons_on_gpu_data():
    pipe = Pipeline(batch_size=3, num_threads=1, device_id=0)
    masks = [np.array([[0, 2], [5, 0]], np.uint8), np.zeros((2, 2), np.uint8), np.full((2, 2), 9, np.uint8)]
    with pipe:
        data = fn.external_source(source=lambda: masks, device="gpu")
        zeros = types.Constant(value=0, shape=(2, 4, 5), dtype=types.FLOAT, device="gpu")
        ramp = types.Constant(np.arange(6, dtype=np.int16).reshape(2, 3), device="gpu")
        positive = data > 0
        ratio = fn.reductions.mean(fn.cast(positive, dtype=types.FLOAT), axes=(0, 1))
        pipe.set_outputs(zeros, ramp, positive, ratio)
    zeros, ramp, positive, ratio = pipe.run()
    assert all(b.device == "gpu" for b in (zeros, ramp, positive, ratio))
    np.testing.assert_array_equal(zeros.as_cpu().as_array(), np.zeros((3, 2, 4, 5), np.float32))
    np.testing.assert_array_equal(ramp.as_cpu().as_array(), np.broadcast_to(np.arange(6).reshape(2, 3), (3, 2, 3)))
    assert ramp.dtype == np.int16
    np.testing.assert_array_equal(positive.as_cpu().as_array(), np.stack(masks) > 0)
    np.testing.assert_array_equal(ratio.as_cpu().as_array(), np.array([0.5, 0.0, 1.0], np.float32))
    pipe.close()


# The pipelines of issue 7, their GPU parts on the GPU

H, W, P = 24, 32, 6


@pipeline_def(batch_size=8, num_threads=2, device_id=0)
def dynamic_blur_gpu():
    masks = fn.external_source(name="masks", dtype=types.UINT8, device="gpu")
    nonzero_ratio = fn.reductions.mean(fn.cast(masks > 0, dtype=types.FLOAT), axes=(0, 1))
    blur_size = fn.cast(16 + nonzero_ratio.cpu() * 300, dtype=types.INT32)
    return fn.gaussian_blur(masks, window_size=blur_size), nonzero_ratio, blur_size


def test_dynamic_blur_ratio_and_window_sizes_on_the_gpu():
    from test_dynamic_pipelines import _masks, _odd_window_counts

    masks = _masks(np.random.default_rng(0), _odd_window_counts(8))
    _, ratio, size = dynamic_blur_gpu().run(masks=masks)
    assert ratio.device == "gpu" and size.device == "cpu"
    expected = np.array([(m > 0).astype(np.float32).mean(dtype=np.float64) for m in masks], np.float32)
    np.testing.assert_array_equal(ratio.as_cpu().as_array(), expected)
    np.testing.assert_array_equal(size.as_array(), [int(np.rint(16 + np.float32(r) * np.float32(300)))
                                                    for r in expected])


def test_dynamic_blur_on_the_gpu_matches_numpy():
    from test_dynamic_pipelines import _masks, _odd_window_counts, reference_blur

    masks = _masks(np.random.default_rng(0), _odd_window_counts(8))
    blurred, _, _ = dynamic_blur_gpu().run(masks=masks)
    assert blurred.device == "gpu"
    for i, mask in enumerate(masks):
        window = int(round(16 + (mask > 0).mean() * 300))
        got = np.asarray(blurred.as_cpu().at(i))
        assert got.dtype == np.uint8 and got.shape == (H, W)
        assert np.max(np.abs(got.astype(int) - reference_blur(mask, window).astype(int))) <= 1, f"sample {i}"


@pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=7)
def erase_with_gpu_mean():
    images = fn.external_source(name="images", dtype=types.FLOAT, device="gpu")
    x = fn.random.uniform(range=[0, H - P])
    y = fn.random.uniform(range=[0, W - P])
    mask = types.Constant(value=0, shape=(2, H, W), dtype=types.FLOAT, device="gpu")
    mean = fn.reductions.mean(images, axes=(0, 1))
    anchor = fn.stack(x, y)
    mask = fn.erase(mask, fill_value=mean.cpu(), anchor=anchor, shape=fn.stack(P, P), axes=(1, 2))
    return mask, mean, anchor


def test_erase_pipeline_parts_on_the_gpu():
    rng = np.random.default_rng(3)
    images = [rng.uniform(0, 1, (H, W, 2)).astype(np.float32) for _ in range(4)]
    mask, mean, anchor = erase_with_gpu_mean().run(images=images)
    assert mask.device == "gpu" and mean.device == "gpu"
    expected_means = np.stack([im.mean(axis=(0, 1), dtype=np.float64) for im in images]).astype(np.float32)
    np.testing.assert_allclose(mean.as_cpu().as_array(), expected_means, rtol=1e-6)
    assert anchor.as_array().shape == (4, 2)


def test_erase_pipeline_on_the_gpu_matches_numpy():
    rng = np.random.default_rng(3)
    images = [rng.uniform(0, 1, (H, W, 2)).astype(np.float32) for _ in range(4)]
    mask, _, anchor = erase_with_gpu_mean().run(images=images)
    for i, image in enumerate(images):
        x, y = (float(v) for v in anchor.at(i))
        top, left = math.floor(x), math.floor(y)
        expected = np.zeros((2, H, W), np.float32)
        expected[:, top:math.floor(x + P), left:math.floor(y + P)] = image.mean(axis=(0, 1))[:, None, None]
        np.testing.assert_allclose(np.asarray(mask.as_cpu().at(i)), expected, rtol=1e-6, atol=1e-7)


def test_reduction_of_large_ragged_images_is_exact():
    """Full HD and HD frames and a tiny one in one segmented reduction (speed lives in benchmarks/)."""
    batch = _batch(np.uint8, [(1080, 1920, 3), (720, 1280, 3), (17, 3, 3)], seed=9)
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.reductions.sum(d, axes=(0, 1)))
    assert max_level_difference(cpu, gpu) == 0
