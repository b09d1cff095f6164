"""Every GPU op against its CPU twin on the same inputs.

Tolerance: none. The GPU resamples with the CPU's own tap tables and sums in the CPU's order in float32 without
FMA; crop, flip, cast and crop_mirror_normalize use the same float32 formulas and DALI's saturating casts (round half
away from zero) on both devices. So every image op, fused resize -> crop_mirror_normalize included, is bit-exact;
arithmetic is exact except float pow/division, within 1e-6 relative."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import fn, types
from tests.gpu_helpers import cpu_and_gpu, max_level_difference

pytestmark = pytest.mark.gpu

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def _images(shapes, channels=3, dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    from headrace.data.synthetic import synthetic_image

    out = []
    for h, w in shapes:
        if h >= 8 and w >= 8:
            image = synthetic_image(rng, h, w)
        else:
            image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        image = image[..., :channels] if channels <= 3 else np.concatenate([image, image[..., :1]], axis=2)
        out.append(image.astype(dtype) if dtype != np.uint8 else np.ascontiguousarray(image))
    return out


ODD_SHAPES = [(1, 1), (4097, 3), (75, 100), (240, 320), (33, 517)]


@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_TRIANGULAR, types.INTERP_CUBIC,
                                    types.INTERP_NN, types.INTERP_LANCZOS3])
@pytest.mark.parametrize("size", [(224, 224), (37, 61), (1, 1), (500, 90)])
def test_resize_matches_cpu(interp, size):
    batch = _images(ODD_SHAPES)
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.resize(d, resize_y=size[0], resize_x=size[1],
                                                           interp_type=interp))
    per_sample = [max_level_difference([a], [b]) for a, b in zip(cpu, gpu, strict=True)]
    assert max(per_sample) == 0, list(zip(ODD_SHAPES, per_sample, strict=True))


@pytest.mark.parametrize("antialias", [True, False])
def test_resize_shorter_grayscale_and_float(antialias):
    gray = _images(ODD_SHAPES, channels=1)
    cpu, gpu = cpu_and_gpu(gray, lambda d, dev: fn.resize(d, resize_shorter=50, antialias=antialias))
    assert max_level_difference(cpu, gpu) == 0
    floats = [image.astype(np.float32) / 7 for image in _images(ODD_SHAPES[2:])]
    cpu, gpu = cpu_and_gpu(floats, lambda d, dev: fn.resize(d, size=[64, 48], antialias=antialias))
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_CUBIC])
def test_resize_other_types_and_float_output(interp):
    """int16 input (resampled in float32, rounded back half away from zero) and a float output of uint8 images
    (no rounding to uint8 levels in between), with a fractional scale (sub-pixel source region)."""
    wide = [image.astype(np.int16) * 100 - 9000 for image in _images(ODD_SHAPES[2:])]
    cpu, gpu = cpu_and_gpu(wide, lambda d, dev: fn.resize(d, resize_shorter=41.3, interp_type=interp))
    assert max_level_difference(cpu, gpu) == 0 and cpu[0].dtype == gpu[0].dtype == np.int16
    batch = _images(ODD_SHAPES[2:])
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.resize(d, resize_x=57.5, resize_y=31, dtype=types.FLOAT,
                                                           interp_type=interp))
    assert max_level_difference(cpu, gpu) == 0 and cpu[0].dtype == gpu[0].dtype == np.float32


@pytest.mark.parametrize("dtype", [types.FLOAT, types.FLOAT16, types.UINT8, types.INT16])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_crop_mirror_normalize_is_bit_exact(dtype, layout):
    batch = _images(ODD_SHAPES[2:] + [(224, 224)])

    def graph(d, dev):
        mirror = fn.random.coin_flip(probability=0.5, seed=9)
        return fn.crop_mirror_normalize(d, crop=(60, 70), crop_pos_x=0.3, crop_pos_y=0.8, mirror=mirror, mean=MEAN,
                                        std=STD, dtype=dtype, output_layout=layout, scale=1.5, shift=0.25,
                                        out_of_bounds_policy="pad", fill_values=[3, 4, 5])

    cpu, gpu = cpu_and_gpu(batch, graph)
    assert max_level_difference(cpu, gpu) == 0


def test_crop_mirror_normalize_padding_and_pad_output():
    batch = _images([(20, 30), (75, 100), (1, 1)])

    def graph(d, dev):
        return fn.crop_mirror_normalize(d, crop=(50, 40), out_of_bounds_policy="pad", fill_values=[10, 20, 30, 40],
                                        mean=[5.0], std=[2.0], pad_output=True, mirror=1)

    cpu, gpu = cpu_and_gpu(batch, graph)
    assert max_level_difference(cpu, gpu) == 0


def test_crop_with_padding_trim_and_dtype():
    batch = _images([(20, 30), (75, 100), (1, 1), (4097, 3)])
    for kwargs in ({"crop": (40, 40), "out_of_bounds_policy": "pad", "fill_values": [7]},
                   {"crop": (40, 40), "out_of_bounds_policy": "trim_to_shape", "crop_pos_x": 0.0},
                   {"crop_h": 1, "crop_w": 1, "crop_pos_x": 1.0, "crop_pos_y": 0.0, "dtype": types.FLOAT}):
        cpu, gpu = cpu_and_gpu(batch, lambda d, dev, kw=kwargs: fn.crop(d, **kw))
        assert max_level_difference(cpu, gpu) == 0


def test_flip_is_exact():
    batch = _images(ODD_SHAPES) + _images([(9, 5)], channels=1)[0:0]
    for horizontal, vertical in ((1, 0), (0, 1), (1, 1)):
        cpu, gpu = cpu_and_gpu(batch, lambda d, dev, h=horizontal, v=vertical: fn.flip(d, horizontal=h, vertical=v))
        assert max_level_difference(cpu, gpu) == 0


def test_random_resized_crop_uses_the_cpu_windows():
    batch = _images(ODD_SHAPES[2:] * 3)
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.random_resized_crop(d, size=[64, 64], seed=21))
    assert max_level_difference(cpu, gpu) == 0


@pytest.mark.parametrize("dtype", [types.UINT8, types.INT8, types.INT16, types.INT32, types.FLOAT16, types.FLOAT,
                                   types.BOOL])
def test_cast_is_exact(dtype):
    rng = np.random.default_rng(4)
    batch = [(rng.normal(0, 300, (5, 7)) + 0.5).astype(np.float32), np.array([2.5, -3.5, 1e9, -1e9, 0.49999997],
                                                                              np.float32)]
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.cast(d, dtype=dtype))
    assert max_level_difference(cpu, gpu) == 0
    ints = [rng.integers(0, 256, (4, 4)).astype(np.uint8)]
    cpu, gpu = cpu_and_gpu(ints, lambda d, dev: fn.cast(d, dtype=dtype))
    assert max_level_difference(cpu, gpu) == 0


def test_arithmetic_and_constant():
    rng = np.random.default_rng(5)
    batch = [rng.integers(0, 200, (6, 4, 3)).astype(np.uint8) for _ in range(3)]
    graphs = [lambda d, dev: d + 1, lambda d, dev: d * 2.5, lambda d, dev: d / 3, lambda d, dev: -d,
              lambda d, dev: abs(d - 100), lambda d, dev: d > 50, lambda d, dev: (d & 7) | 8,
              lambda d, dev: d * d, lambda d, dev: 2 ** (d // 64),
              lambda d, dev: d + types.Constant(np.arange(3, dtype=np.float32), device=dev)]
    for graph in graphs:
        cpu, gpu = cpu_and_gpu(batch, graph)
        for a, b in zip(cpu, gpu, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64), rtol=1e-6)


def test_fused_resize_normalize_matches_cpu():
    batch = _images(ODD_SHAPES[2:] + [(500, 375), (120, 90)])

    def graph(d, dev):
        images = fn.resize(d, resize_x=224, resize_y=224)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD,
                                        mirror=fn.random.coin_flip(probability=0.5, seed=4))

    cpu, gpu = cpu_and_gpu(batch, graph)
    assert max_level_difference(cpu, gpu) == 0


def _colour_chain(flip: bool, colours: list, crop=(224, 224), mirror=True):
    """graph(d, dev): [flip with random coins ->] resize -> the colour ops (name, kwargs) -> crop_mirror_normalize,
    the chain the fused kernel replaces; random per-sample arguments as a detection pipeline draws them."""

    def graph(d, dev):
        images = d
        if flip:
            images = fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5, seed=5),
                             vertical=fn.random.coin_flip(probability=0.3, seed=6))
        images = fn.resize(images, resize_x=224, resize_y=200)
        for k, (op, kwargs) in enumerate(colours):
            images = getattr(fn, op)(images, **{name: value(k) if callable(value) else value
                                                for name, value in kwargs.items()})
        return fn.crop_mirror_normalize(images, crop=crop, dtype=types.FLOAT, output_layout="CHW", mean=MEAN,
                                        std=STD, mirror=fn.random.coin_flip(probability=0.5, seed=4) if mirror else 0,
                                        out_of_bounds_policy="pad")

    return graph


def _uniform(lo, hi):
    return lambda k: fn.random.uniform(range=[lo, hi], seed=10 + k)


HSV = ("hsv", {"hue": _uniform(-30, 30), "saturation": _uniform(0.5, 1.5), "dtype": types.FLOAT})
CONTRAST = ("brightness_contrast", {"brightness": _uniform(0.875, 1.125), "contrast": _uniform(0.5, 1.5),
                                    "contrast_center": 128, "dtype": types.UINT8})


@pytest.mark.parametrize("flip, colours", [
    (True, [HSV, CONTRAST]),  # the SSD300 example's chain
    (True, []),
    (False, [("hsv", {"hue": 20.0, "saturation": 1.3, "value": 0.9})]),  # uint8 between: rounded and saturated
    (False, [("color_twist", {"brightness": _uniform(0.5, 1.5), "hue": 11.0, "dtype": types.INT16}),
             ("brightness_contrast", {"contrast": 1.7, "brightness_shift": 0.1, "dtype": types.FLOAT16})]),
    (True, [("brightness_contrast", {"brightness": 2.5, "contrast": _uniform(0.0, 3.0)})]),
], ids=["ssd", "flip", "hsv_u8", "twist_i16_contrast_f16", "flip_contrast"])
def test_fused_flip_resize_colour_normalize_matches_cpu(flip, colours):
    """The longer fused chains (a flip before the resize, colour ops between it and crop_mirror_normalize; every
    intermediate type rounded as the op would store it) give the CPU's bits; the crop pads past the resized
    image."""
    batch = _images(ODD_SHAPES[2:] + [(500, 375), (120, 90), (16, 9)])
    cpu, gpu = cpu_and_gpu(batch, _colour_chain(flip, colours, crop=(210, 230)))
    assert max_level_difference(cpu, gpu) == 0


def test_the_flip_resize_colour_normalize_chain_runs_as_one_step():
    from headrace import Pipeline

    pipe = Pipeline(batch_size=2, num_threads=1, device_id=0, seed=1)
    with pipe:
        data = fn.external_source(source=lambda: _images([(64, 48), (30, 70)]), name="data")
        pipe.set_outputs(_colour_chain(True, [HSV, CONTRAST])(data.gpu(), "gpu"))
    pipe.build()
    chains = [step.kernel.__class__.__name__ for kind, step in pipe._executor.gpu.steps if kind == "gpu"]
    ops = [tuple(n.schema.name for n in step.chain) for kind, step in pipe._executor.gpu.steps if kind == "gpu"]
    assert ("flip", "resize", "hsv", "brightness_contrast", "crop_mirror_normalize") in ops, (chains, ops)
    pipe.run()
    pipe.close()


@pytest.mark.parametrize("limit", [1, 300_000])
def test_resampling_in_chunks_of_samples_gives_the_same_bits(monkeypatch, limit):
    """A batch whose vertical-pass rows exceed RESIZE_ROWS_BYTES is resampled in chunks of samples reusing one
    block (limit 1: one sample per chunk; 300 kB: a few per chunk): the outputs equal the CPU's."""
    from headrace_kernels.gpu import image_ops

    monkeypatch.setattr(image_ops, "RESIZE_ROWS_BYTES", limit)
    batch = _images(ODD_SHAPES + [(500, 375), (120, 90), (8, 8)])

    def graph(d, dev):
        images = fn.resize(d, resize_x=150, resize_y=120)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD,
                                        crop=(100, 140))

    cpu, gpu = cpu_and_gpu(batch, graph)
    assert max_level_difference(cpu, gpu) == 0
    cpu, gpu = cpu_and_gpu(batch, lambda d, dev: fn.resize(d, resize_shorter=64))
    assert max_level_difference(cpu, gpu) == 0


def test_copy_round_trip_and_zero_copy_views():
    import cupy as cp
    import torch

    from headrace import Pipeline

    batch = _images([(32, 48)] * 4)
    pipe = Pipeline(batch_size=4, num_threads=1, device_id=0, seed=1)
    with pipe:
        data = fn.external_source(source=lambda: batch)
        on_gpu = fn.crop_mirror_normalize(data.gpu(), dtype=types.FLOAT, output_layout="CHW")
        pipe.set_outputs(on_gpu, on_gpu.cpu(), data.gpu().cpu())
    gpu_out, cpu_out, round_trip = pipe.run()
    assert gpu_out.device == "gpu" and cpu_out.device == "cpu"
    np.testing.assert_array_equal(round_trip.as_array(), np.stack(batch))
    np.testing.assert_array_equal(gpu_out.as_cpu().as_array(), cpu_out.as_array())
    tensor = torch.from_dlpack(gpu_out)
    view = cp.asarray(gpu_out)
    assert tensor.is_cuda and tuple(tensor.shape) == (4, 3, 32, 48)
    assert tensor.data_ptr() == gpu_out.as_array().data.ptr == view.data.ptr  # zero copy
    torch.testing.assert_close(tensor.cpu(), torch.from_numpy(cpu_out.as_array()))
    pipe.close()
