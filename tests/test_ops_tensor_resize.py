"""tensor_resize / experimental.tensor_resize against DALI's CPU operator on the same inputs, and the GPU kernel
against the CPU one.

Tolerances: NN exact; LINEAR 1e-5 on data in [0, 1) and 1 level for uint8 (both sum float32 taps, in other
orders); CUBIC and LANCZOS3 1e-3 (DALI samples its filters from tables, headrace evaluates them); the GPU 1e-5
(the same taps and sums)."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu, max_level_difference
from ops_support import max_abs_diff, needs_dali, run_dali, run_headrace

import headrace
from headrace import types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(2)
IMAGES = [RNG.random((6, 8)).astype(np.float32), RNG.random((5, 9)).astype(np.float32)]
VOLUME = [RNG.random((4, 6, 8, 3)).astype(np.float32), RNG.random((3, 5, 7, 3)).astype(np.float32)]
FIVE_D = [RNG.random((2, 3, 4, 5, 6)).astype(np.float32)]
BYTES = [RNG.integers(0, 256, (6, 8), dtype=np.uint8), RNG.integers(0, 256, (13, 7), dtype=np.uint8)]
SIGNALS = [RNG.random(10).astype(np.float32), RNG.random(3).astype(np.float32)]

CASES = [
    (IMAGES, dict(sizes=[3, 4])),
    (IMAGES, dict(sizes=[12, 17])),
    (IMAGES, dict(scales=[0.5, 1.5])),
    (IMAGES, dict(scales=[0.7, 1.3], size_rounding="ceil")),
    (IMAGES, dict(scales=[0.7, 1.3], size_rounding="truncate")),
    (IMAGES, dict(scales=[0.8])),
    (IMAGES, dict(sizes=[3], axes=[1])),
    (IMAGES, dict(sizes=[3], axes=[-1], mode="stretch")),
    (IMAGES, dict(sizes=[3, 0])),
    (IMAGES, dict(sizes=[0, 4], mode="stretch")),
    (IMAGES, dict(sizes=[4, 4], mode="not_larger")),
    (IMAGES, dict(sizes=[4, 4], mode="not_smaller", max_size=[5, 5])),
    (IMAGES, dict(sizes=[20, 30], max_size=[10, 40])),
    (IMAGES, dict(sizes=[3.5, 4.2])),
    (IMAGES, dict(sizes=[3.5, 4.2], subpixel_scale=False)),
    (IMAGES, dict(sizes=[3.3, 4.6], alignment=[0.0, 1.0])),
    (IMAGES, dict(scales=[0.55, 0.55], alignment=[0.0, 1.0])),
    (IMAGES, dict(sizes=[3, 4], roi_start=[1, 1], roi_end=[5, 7])),
    (IMAGES, dict(sizes=[3, 4], roi_start=[5, 7], roi_end=[1, 1])),
    (IMAGES, dict(sizes=[3, 4], roi_start=[0.1, 0.1], roi_end=[0.9, 0.7], roi_relative=True)),
    (IMAGES, dict(sizes=[3, 4], antialias=False)),
    (IMAGES, dict(sizes=[3, 4], interp_type=types.INTERP_NN)),
    (IMAGES, dict(sizes=[13, 17], interp_type=types.INTERP_NN)),
    (IMAGES, dict(sizes=[3, 14], interp_type=types.INTERP_CUBIC)),
    (IMAGES, dict(sizes=[3, 14], interp_type=types.INTERP_LANCZOS3)),
    (IMAGES, dict(sizes=[3, 14], min_filter=types.INTERP_NN, mag_filter=types.INTERP_CUBIC)),
    (VOLUME, dict(sizes=[3, 4], axes=[1, 2])),
    (VOLUME, dict(sizes=[3, 4], axes=[0, 2])),
    (FIVE_D, dict(sizes=[3, 4], axes=[2, 4])),
    (FIVE_D, dict(sizes=[3, 4, 7], axes=[1, 2, 3])),
    (BYTES, dict(sizes=[3, 5])),
    (BYTES, dict(sizes=[17, 11])),
    (BYTES, dict(sizes=[3, 5], dtype=types.FLOAT)),
    (SIGNALS, dict(sizes=[4])),
]
IDS = [f"{len(data[0].shape)}d-{'-'.join(f'{k}={v}' for k, v in kwargs.items())}" for data, kwargs in CASES]


def _tolerance(data: list[np.ndarray], kwargs: dict) -> float:
    filters = {kwargs.get(k) for k in ("interp_type", "min_filter", "mag_filter")}
    if filters & {types.INTERP_CUBIC, types.INTERP_LANCZOS3}:
        return 1e-3
    if kwargs.get("interp_type") == types.INTERP_NN:
        return 0.0
    return 1.0 if data[0].dtype == np.uint8 and "dtype" not in kwargs else 1e-4 if "dtype" in kwargs else 1e-5


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("data, kwargs", CASES, ids=IDS)
def test_matches_dali(data, kwargs):
    want = run_dali("tensor_resize", data, **kwargs)
    got = run_headrace("tensor_resize", data, **kwargs)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert max_abs_diff(g, w) <= _tolerance(data, kwargs) * (255 if "dtype" in kwargs else 1)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_experimental_name_and_per_sample_sizes_match_dali():
    sizes = [np.array([3, 10], np.float32), np.array([7, 2], np.float32)]
    want = run_dali("experimental.tensor_resize", IMAGES, arg_inputs={"sizes": sizes})
    got = run_headrace("experimental.tensor_resize", IMAGES, arg_inputs={"sizes": sizes})
    assert [g.shape for g in got] == [w.shape for w in want] == [(3, 10), (7, 2)]
    assert max(max_abs_diff(g, w) for g, w in zip(got, want, strict=True)) <= 1e-5


def test_identity_and_axis_names_through_the_layout():
    same = run_headrace("tensor_resize", VOLUME, scales=[1.0], axes=[0, 1, 2])
    assert all(np.array_equal(g, d) for g, d in zip(same, VOLUME, strict=True))
    by_names = run_headrace("tensor_resize", VOLUME, layout="DHWC", axis_names="HW", sizes=[3, 4])
    by_axes = run_headrace("tensor_resize", VOLUME, sizes=[3, 4], axes=[1, 2])
    for a, b in zip(by_names, by_axes, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.shape[1:3] == (3, 4)


def test_upscaling_linear_interpolates_between_samples():
    (got,) = run_headrace("tensor_resize", [np.array([0.0, 1.0], np.float32)], sizes=[4])
    np.testing.assert_allclose(got, [0.0, 0.25, 0.75, 1.0], atol=1e-6)  # pixel centres at -0.25, 0.25, 0.75, 1.25


def test_errors_name_the_op_sample_and_argument():
    with pytest.raises(SchemaError, match=r"tensor_resize.*one way: sizes or scales"):
        run_headrace("tensor_resize", IMAGES)
    with pytest.raises(SchemaError, match=r"tensor_resize.*one way: sizes or scales"):
        run_headrace("tensor_resize", IMAGES, sizes=[3, 3], scales=[1.0, 1.0])
    with pytest.raises(SampleError, match=r"tensor_resize.*sample 0.*'sizes' has 3 values for 2 resized axes"):
        run_headrace("tensor_resize", IMAGES, sizes=[3, 3, 3])
    with pytest.raises(SampleError, match=r"tensor_resize.*sample 0.*'axes' has 2, out of range"):
        run_headrace("tensor_resize", IMAGES, sizes=[3], axes=[2])
    with pytest.raises(SampleError, match=r"tensor_resize.*sample 0.*at most 3 consecutive.*spans 4"):
        run_headrace("tensor_resize", VOLUME, sizes=[2, 2, 2, 2])
    with pytest.raises(SampleError, match=r"tensor_resize.*sample 0.*'dtype' must be the input's type"):
        run_headrace("tensor_resize", BYTES, sizes=[2, 2], dtype=types.INT32)


def test_output_layout_is_the_input_layout():
    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        data = headrace.fn.external_source(source=lambda: VOLUME, batch=True, layout="DHWC")
        return headrace.fn.tensor_resize(data, sizes=[3, 4], axis_names="HW")

    p = pipe()
    (out,) = p.run()
    p.close()
    assert out.layout() == "DHWC" and np.array(out.at(0)).shape == (4, 3, 4, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("data, kwargs", CASES, ids=IDS)
def test_gpu_matches_cpu(data, kwargs):
    cpu, gpu = cpu_and_gpu(data, lambda node, device: headrace.fn.tensor_resize(node, **kwargs))
    assert max_level_difference(cpu, gpu) <= (1.0 if data[0].dtype == np.uint8 and "dtype" not in kwargs else 1e-4)
