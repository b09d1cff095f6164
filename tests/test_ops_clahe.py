"""clahe.

Against DALI's CPU operator on the same inputs: exact (RGB with luma_only on and off, 1-channel HWC, several tile
grids and clip limits, tiles that do not divide the image). HW images, which DALI refuses, against OpenCV's
createCLAHE: exact. The algorithm the GPU kernel runs (`clahe_plane`) against OpenCV's createCLAHE: exact on these
inputs (its float32 blend could fall one level off where OpenCV's rounding meets a half). GPU against CPU: within one
level.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu, max_level_difference
from ops_support import needs_dali, run_dali, run_headrace

import headrace
from headrace import types
from headrace.errors import SampleError
from headrace_kernels.cpu.clahe_ops import clahe_plane

RNG = np.random.default_rng(18)


def _smooth(shape: tuple[int, ...]) -> np.ndarray:
    """A low-contrast image with a gradient: where CLAHE has something to do."""
    ramp = np.linspace(60, 160, shape[1])[None, :, None] if len(shape) == 3 else np.linspace(60, 160, shape[1])
    return np.clip(RNG.normal(0, 12, shape) + ramp, 0, 255).astype(np.uint8)


RGB = [_smooth((48, 64, 3)), RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8), _smooth((20, 19, 3))]
GRAY = [np.ascontiguousarray(image[..., :1]) for image in RGB]
CASES = [dict(tiles_x=8, tiles_y=8, clip_limit=2.0), dict(tiles_x=4, tiles_y=3, clip_limit=3.5),
         dict(tiles_x=1, tiles_y=1, clip_limit=0.0), dict(tiles_x=5, tiles_y=2, clip_limit=40.0)]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("luma_only", [True, False])
def test_clahe_matches_dali(kwargs, luma_only):
    for images in (RGB, GRAY):
        ours = run_headrace("clahe", images, layout="HWC", luma_only=luma_only, **kwargs)
        theirs = run_dali("clahe", images, layout="HWC", luma_only=luma_only, **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype == np.uint8
            np.testing.assert_array_equal(a, b)


@needs_dali[0]
@needs_dali[1]
def test_bins_change_nothing_on_uint8_as_in_dali():
    for bins in (64, 128):
        ours = run_headrace("clahe", RGB, layout="HWC", tiles_x=4, tiles_y=4, clip_limit=2.0, bins=bins)
        theirs = run_dali("clahe", RGB, layout="HWC", tiles_x=4, tiles_y=4, clip_limit=2.0, bins=bins)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b)


def test_hw_images_match_opencv():
    images = [np.ascontiguousarray(g[..., 0]) for g in GRAY]
    for out, image in zip(run_headrace("clahe", images, tiles_x=3, tiles_y=4, clip_limit=2.5), images, strict=True):
        np.testing.assert_array_equal(out, cv2.createCLAHE(2.5, (3, 4)).apply(image))


@pytest.mark.parametrize("kwargs", CASES + [dict(tiles_x=7, tiles_y=3, clip_limit=1.0)])
def test_the_gpu_algorithm_is_opencvs(kwargs):
    for image in RGB:
        for c in range(3):
            plane = np.ascontiguousarray(image[..., c])
            expected = cv2.createCLAHE(kwargs["clip_limit"], (kwargs["tiles_x"], kwargs["tiles_y"])).apply(plane)
            np.testing.assert_array_equal(
                clahe_plane(np, plane, kwargs["tiles_x"], kwargs["tiles_y"], kwargs["clip_limit"]), expected)


def test_bad_input_names_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"clahe.*sample 0.*expects uint8 images, got float32"):
        run_headrace("clahe", [RGB[0].astype(np.float32)], tiles_x=2, tiles_y=2, clip_limit=2.0)
    with pytest.raises(SampleError, match=r"clahe.*sample 0.*'bins' must be a power of 2, got 100"):
        run_headrace("clahe", RGB[:1], tiles_x=2, tiles_y=2, clip_limit=2.0, bins=100)
    with pytest.raises(SampleError, match=r"clahe.*sample 2.*'tiles_x' must be from 1 to the image's extent 19"):
        run_headrace("clahe", RGB, tiles_x=30, tiles_y=2, clip_limit=2.0)
    with pytest.raises(SampleError, match=r"clahe.*sample 0.*1 or 3 channels, got shape \(4, 4, 2\)"):
        run_headrace("clahe", [np.zeros((4, 4, 2), np.uint8)], tiles_x=2, tiles_y=2, clip_limit=2.0)
    with pytest.raises(headrace.errors.SchemaError, match=r"clahe.*missing required argument 'clip_limit'"):
        run_headrace("clahe", RGB, tiles_x=2, tiles_y=2)


@needs_dali[0]
@needs_dali[1]
def test_arguments_are_dalis():
    from nvidia.dali import backend

    from headrace.schema import REQUIRED, get_schema

    theirs, ours = backend.GetSchema("Clahe"), get_schema("clahe")
    for arg in ours.args:
        assert theirs.HasArgument(arg.name), arg.name
        assert theirs.IsArgumentOptional(arg.name) == (arg.default is not REQUIRED), arg.name
    assert theirs.GetArgumentDefaultValueString("bins") == str(ours.arg({}, "bins"))
    assert theirs.GetArgumentDefaultValueString("luma_only") == str(ours.arg({}, "luma_only"))


def test_output_spec_agrees_with_the_output():
    @headrace.pipeline_def(batch_size=len(RGB), num_threads=1, device_id=None)
    def pipe():
        images = headrace.fn.external_source(name="images", dtype=types.UINT8, ndim=3, layout="HWC")
        return headrace.fn.clahe(images, tiles_x=2, tiles_y=2, clip_limit=2.0)

    p = pipe()
    (out,) = p.run(images=RGB)
    spec = p.outputs[0].spec
    assert spec.dtype == np.uint8 and spec.layout == "HWC" and len(spec.dims) == 3
    for i, image in enumerate(RGB):
        assert np.asarray(out.at(i)).shape == image.shape
    p.close()


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("luma_only", [True, False])
def test_gpu_matches_cpu(kwargs, luma_only):
    for images in (RGB, GRAY):
        cpu, gpu = cpu_and_gpu(images, lambda data, device: headrace.fn.clahe(data, device=device,
                                                                             luma_only=luma_only, **kwargs))
        assert max_level_difference(cpu, gpu) <= 1
