"""water, sphere, grid_mask, jpeg_compression_distortion and jitter. The first four against DALI's CPU build on the
same images: exact, except float32 images with INTERP_LINEAR (within 1e-5: numpy's float32 sin may differ from
DALI's sinf by an ulp) and jpeg_compression_distortion (within 2 levels on 99.9% of values: DALI bundles its own
OpenCV and libjpeg-turbo; identical with the pinned versions). DALI has no CPU jitter, so jitter is checked against
its definition: every pixel read from a neighbour at most nDegree/2 away per axis, offsets uniform in
[-(n//2), n - n//2), clamped to the image. GPU output equals CPU output (linear blends within 1 level)."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import fn, pipeline_def, types
from headrace.errors import SampleError, SchemaError
from tests.gpu_helpers import cpu_and_gpu, max_level_difference

RNG = np.random.default_rng(0)
IMAGES = [RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8), RNG.integers(0, 256, (20, 16, 3), dtype=np.uint8)]
FLOATS = [image.astype(np.float32) / 255 for image in IMAGES]
WAVES = [{}, {"ampl_x": 3.5, "ampl_y": -2.0, "freq_x": 0.3, "freq_y": 0.2, "phase_x": 1.0, "phase_y": 0.5,
              "fill_value": 7.0}]


def _dali_interp(name: str):
    from nvidia.dali import types as dali_types

    return getattr(dali_types, name)


def _compare(op: str, images: list[np.ndarray], interp: str | None, **kwargs) -> None:
    ours = run_headrace(op, images, layout="HWC", **({"interp_type": getattr(types, interp)} if interp else {}),
                        **kwargs)
    theirs = run_dali(op, images, layout="HWC", **({"interp_type": _dali_interp(interp)} if interp else {}),
                      **kwargs)
    for got, want in zip(ours, theirs, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        if got.dtype == np.float32 and interp == "INTERP_LINEAR":
            np.testing.assert_allclose(got, want, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
@pytest.mark.parametrize("images", [IMAGES, FLOATS], ids=["uint8", "float32"])
@pytest.mark.parametrize("kwargs", WAVES, ids=["defaults", "custom"])
def test_water_as_dali(kwargs, images, interp):
    _compare("water", images, interp, **kwargs)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
@pytest.mark.parametrize("images", [IMAGES, FLOATS], ids=["uint8", "float32"])
@pytest.mark.parametrize("fill", [0.0, 100.0])
def test_sphere_as_dali(fill, images, interp):
    _compare("sphere", images, interp, fill_value=fill)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("op", ["water", "sphere"])
def test_mask_zero_passes_the_sample_through_as_dali(op):
    masks = {"mask": [np.array(0, np.int32), np.array(1, np.int32)]}
    ours = run_headrace(op, IMAGES, layout="HWC", arg_inputs=masks)
    theirs = run_dali(op, IMAGES, layout="HWC", arg_inputs=masks)
    np.testing.assert_array_equal(ours[0], IMAGES[0])
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(got, want)


GRIDS = [{}, {"tile": 10, "ratio": 0.3}, {"tile": 10, "ratio": 0.3, "shift_x": 3.0, "shift_y": 1.0},
         {"tile": 16, "ratio": 0.4, "angle": 0.5, "shift_x": 4.5, "shift_y": -2.0},
         {"tile": 3, "ratio": 0.2, "angle": -0.7, "shift_x": -1.3, "shift_y": 0.7}]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("images", [IMAGES, FLOATS], ids=["uint8", "float32"])
@pytest.mark.parametrize("kwargs", GRIDS)
def test_grid_mask_as_dali(kwargs, images):
    _compare("grid_mask", images, None, **kwargs)


@needs_dali[0]
@needs_dali[1]
def test_grid_mask_per_sample_arguments_as_dali():
    per_sample = {"tile": [np.array(8, np.int32), np.array(5, np.int32)],
                  "angle": [np.array(0.3, np.float32), np.array(1.2, np.float32)]}
    ours = run_headrace("grid_mask", IMAGES, layout="HWC", arg_inputs=per_sample, ratio=0.6)
    theirs = run_dali("grid_mask", IMAGES, layout="HWC", arg_inputs=per_sample, ratio=0.6)
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(got, want)


def test_grid_mask_of_gray_images_masks_as_the_rgb_one():
    gray = [image[..., 0] for image in IMAGES]
    for got, rgb in zip(run_headrace("grid_mask", gray, tile=9), run_headrace("grid_mask", IMAGES, tile=9),
                        strict=True):
        np.testing.assert_array_equal(got, rgb[..., 0])


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("quality", [1, 50, 95, 0, 150])
def test_jpeg_compression_distortion_as_dali(quality):
    ours = run_headrace("jpeg_compression_distortion", IMAGES, layout="HWC", quality=quality)
    theirs = run_dali("jpeg_compression_distortion", IMAGES, layout="HWC", quality=quality)
    for got, want in zip(ours, theirs, strict=True):
        assert got.dtype == want.dtype == np.uint8 and got.shape == want.shape
        difference = np.abs(got.astype(np.int16) - want)
        assert np.mean(difference > 2) <= 0.001, difference.max()


def test_jpeg_quality_is_clamped_and_per_sample():
    lowest, low = run_headrace("jpeg_compression_distortion", IMAGES[:1] * 2, arg_inputs={
        "quality": [np.array(-5, np.int32), np.array(1, np.int32)]})
    np.testing.assert_array_equal(lowest, low)
    best = run_headrace("jpeg_compression_distortion", IMAGES[:1], quality=100)[0]
    worst_error = np.abs(low.astype(np.int16) - IMAGES[0]).mean()
    assert np.abs(best.astype(np.int16) - IMAGES[0]).mean() < worst_error


def _positions(h: int, w: int) -> list[np.ndarray]:
    """An image whose pixel values are their own positions (y * w + x), as float32 HW1."""
    return [np.arange(h * w, dtype=np.float32).reshape(h, w, 1)] * 2


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_jitter_moves_pixels_by_its_definition(n):
    h, w = 60, 70
    out = run_headrace("jitter", _positions(h, w), nDegree=n, seed=9)[0][..., 0].astype(np.int64)
    y, x = np.mgrid[0:h, 0:w]
    dy, dx = out // w - y, out % w - x
    low, high = -(n // 2), n - n // 2 - 1
    inner = (slice(n, h - n), slice(n, w - n))  # away from the clamped borders
    for moves in (dx[inner], dy[inner]):
        assert moves.min() == low and moves.max() == high
        counts = np.bincount((moves - low).ravel(), minlength=n) / moves.size
        np.testing.assert_allclose(counts, 1 / n, atol=0.03)
    assert out.min() >= 0 and out.max() < h * w  # clamped to the image, never filled
    assert np.all((np.abs(dx) <= n // 2 + 1) & (np.abs(dy) <= n // 2 + 1))


def test_jitter_keeps_types_seed_and_mask():
    first, again = (run_headrace("jitter", IMAGES, seed=3) for _ in range(2))
    for a, b, image in zip(first, again, IMAGES, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == np.uint8 and a.shape == image.shape and not np.array_equal(a, image)
    kept = run_headrace("jitter", IMAGES, arg_inputs={"mask": [np.array(0, np.int32)] * 2})
    np.testing.assert_array_equal(kept[1], IMAGES[1])
    linear = run_headrace("jitter", IMAGES, seed=3, interp_type=types.INTERP_LINEAR)  # whole pixels: no blending
    np.testing.assert_array_equal(linear[0], first[0])


@pytest.mark.parametrize("op, batch, kwargs, message", [
    ("water", [np.zeros((3,), np.uint8)], {}, "water expects HWC \\(or HW\\) images, got shape \\(3,\\)"),
    ("sphere", [np.zeros((2, 2, 3), bool)], {}, "sphere expects numeric images, got bool"),
    ("grid_mask", IMAGES, {"tile": 0}, "argument 'tile' must be positive, got 0"),
    ("jitter", IMAGES, {"nDegree": 0}, "argument 'nDegree' must be at least 1, got 0"),
    ("jpeg_compression_distortion", [np.zeros((4, 4), np.uint8)], {}, "expects uint8 RGB HWC images"),
    ("jpeg_compression_distortion", [np.zeros((4, 4, 3), np.float32)], {}, "expects uint8 RGB HWC images"),
])
def test_bad_input_names_op_sample_and_argument(op, batch, kwargs, message):
    with pytest.raises(SampleError, match=rf"{op} .*sample 0.*{message}"):
        run_headrace(op, batch, **kwargs)


def test_only_nearest_and_linear_interpolation():
    with pytest.raises(SchemaError, match="water .*argument 'interp_type'"):
        run_headrace("water", IMAGES, interp_type=types.INTERP_CUBIC)


def test_output_specs_agree_with_the_output():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        x = fn.external_source(name="x", dtype=types.UINT8, ndim=3, layout="HWC")
        return (fn.water(x), fn.sphere(x), fn.jitter(x), fn.grid_mask(x), fn.jpeg_compression_distortion(x),
                fn.noise.gaussian(x), fn.noise.salt_and_pepper(x), fn.noise.shot(x))

    built = pipe()
    for node, batch in zip(built.outputs, built.run(x=IMAGES), strict=True):
        spec = node.spec
        assert spec.dtype == np.uint8 and spec.layout == "HWC" and spec.dims == (-1, -1, -1), spec
        assert batch.dtype == spec.dtype and all(np.asarray(batch.at(i)).shape == IMAGES[i].shape for i in range(2))
    built.close()


@pytest.mark.gpu
@pytest.mark.parametrize("images", [IMAGES, FLOATS], ids=["uint8", "float32"])
def test_gpu_equals_cpu(images):
    batch = [*images, images[0][:5, :9]]
    nearest = [lambda d, dev: fn.water(d, ampl_x=4.0, fill_value=3.0), lambda d, dev: fn.sphere(d),
               lambda d, dev: fn.jitter(d, nDegree=4, seed=1), lambda d, dev: fn.grid_mask(d, tile=7, angle=0.4)]
    for graph in nearest:
        cpu, gpu = cpu_and_gpu(batch, graph)
        assert max_level_difference(cpu, gpu) == 0
    linear = [lambda d, dev: fn.water(d, interp_type=types.INTERP_LINEAR),
              lambda d, dev: fn.sphere(d, interp_type=types.INTERP_LINEAR)]
    for graph in linear:
        cpu, gpu = cpu_and_gpu(batch, graph)
        assert max_level_difference(cpu, gpu) <= (1 if images[0].dtype == np.uint8 else 1e-5)


@pytest.mark.gpu
def test_gpu_jpeg_compression_distortion_equals_cpu():
    cpu, gpu = cpu_and_gpu(IMAGES, lambda d, dev: fn.jpeg_compression_distortion(d, quality=30))
    assert max_level_difference(cpu, gpu) == 0
