"""resize_crop_mirror against DALI's CPU operator (uint8 within one level: float32 sums; float within 1e-3) and against
headrace's own resize, crop and flip applied one after the other where the window falls on whole resized pixels
(within one level). Nearest neighbour is compared with DALI on a downscale only: when upscaling, a source position
that falls on a pixel boundary may round to the neighbouring row in DALI's float32 mapping of the window (a known
difference). The GPU kernel runs the CPU one on host copies: compared exactly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import assert_specs_agree, max_abs_diff, needs_dali, run_once

import headrace
from headrace import types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(18)
IMAGES = [RNG.integers(0, 256, (40, 50, 3), dtype=np.uint8), RNG.integers(0, 256, (33, 61, 3), dtype=np.uint8)]


def _source(samples: list) -> Callable[[], list]:
    return lambda: list(samples)


def run(api, build: Callable, images: list) -> list[np.ndarray]:
    """build(fn, images node) over one batch in `api` (headrace or nvidia.dali)."""
    @api.pipeline_def(batch_size=len(images), num_threads=1, device_id=None, seed=3)
    def pipe():
        return build(api.fn, api.fn.external_source(source=_source(images), batch=True, layout="HWC"))

    out = run_once(pipe())
    return [np.array(out.at(i)) for i in range(len(out))]


def close(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert max_abs_diff(got, expected) <= (1 if got.dtype.kind != "f" else 1e-3)


CASES = [
    dict(resize_shorter=30, crop=[20, 24]),
    dict(resize_x=70, resize_y=45, crop=[30, 30], crop_pos_x=0.2, crop_pos_y=0.9, mirror=1),
    dict(size=[25, 25], crop_h=11, crop_w=13, mirror=2),
    dict(resize_longer=20, interp_type=types.INTERP_CUBIC, crop=[10, 12], mirror=3),
    dict(resize_shorter=30.7, crop=[20, 24], rounding="truncate", crop_pos_x=0.3),
    dict(resize_shorter=30, crop=[20, 24], dtype=types.FLOAT),
    dict(resize_x=20, resize_y=15, crop=[10, 10], interp_type=types.INTERP_NN, mirror=1),
    dict(resize_x=25, resize_y=20, crop=[10, 12], antialias=False),
]


@pytest.mark.parametrize("kwargs", [
    dict(resize_shorter=30, crop=[20, 24]), dict(resize_x=70, resize_y=45, crop=[30, 30], crop_pos_x=0.25,
                                                 crop_pos_y=0.2, mirror=1),
    dict(size=[25, 25], crop_h=11, crop_w=13, mirror=2, interp_type=types.INTERP_CUBIC),
])
def test_equals_resize_then_crop_then_flip(kwargs):
    resize = {k: v for k, v in kwargs.items() if k.startswith(("resize", "size", "interp"))}
    crop = {k: v for k, v in kwargs.items() if k.startswith("crop")}
    mirror = kwargs.get("mirror", 0)

    def separate(fn, images):
        return fn.flip(fn.crop(fn.resize(images, **resize), **crop), horizontal=mirror & 1, vertical=mirror >> 1)

    fused = run(headrace, lambda fn, images: fn.resize_crop_mirror(images, **kwargs), IMAGES)
    for a, b in zip(fused, run(headrace, separate, IMAGES), strict=True):
        close(a, b)


def test_per_sample_mirror_and_errors():
    mirrors = [np.array(1, np.int32), np.array(2, np.int32)]

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        images = fn.external_source(source=_source(IMAGES), batch=True, layout="HWC")
        mirror = fn.external_source(source=_source(mirrors), batch=True)
        return (fn.resize_crop_mirror(images, resize_shorter=30, crop=[20, 24], mirror=mirror),
                fn.resize_crop_mirror(images, resize_shorter=30, crop=[20, 24]))

    p = pipe()
    flipped, plain = p.run()
    p.close()
    np.testing.assert_array_equal(np.array(flipped.at(0)), np.array(plain.at(0))[:, ::-1])
    np.testing.assert_array_equal(np.array(flipped.at(1)), np.array(plain.at(1))[::-1])
    with pytest.raises(SchemaError, match="give `crop` or crop_h / crop_w, not both"):
        run(headrace, lambda fn, images: fn.resize_crop_mirror(images, resize_x=10, crop=[5, 5], crop_h=3), IMAGES)
    with pytest.raises(SampleError, match=r"resize_crop_mirror .*sample 0.*expects HWC images"):
        run(headrace, lambda fn, images: fn.resize_crop_mirror(images, resize_x=10, crop=[5, 5]),
            [np.zeros((8, 8), np.uint8)] * 2)


@pytest.mark.parametrize("kwargs", CASES)
@needs_dali[0]
@needs_dali[1]
def test_matches_dali(kwargs):
    import nvidia.dali

    def build(fn, images):
        return fn.resize_crop_mirror(images, **kwargs)

    for a, b in zip(run(headrace, build, IMAGES), run(nvidia.dali, build, IMAGES), strict=True):
        close(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", CASES)
def test_gpu_matches_cpu(kwargs):
    cpu, gpu = cpu_and_gpu(IMAGES, lambda data, device: headrace.fn.resize_crop_mirror(data, device=device, **kwargs))
    for a, b in zip(cpu, gpu, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)




def test_output_specs_agree_with_the_outputs():
    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        images = fn.external_source(name="images", dtype=types.UINT8, ndim=3, layout="HWC")
        return (fn.resize_crop_mirror(images, resize_shorter=30, crop=[20, 24]),
                fn.resize_crop_mirror(images, resize_shorter=30, crop_h=20, dtype=types.FLOAT))

    assert_specs_agree(pipe(), images=IMAGES)
