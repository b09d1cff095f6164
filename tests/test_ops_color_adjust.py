"""brightness, contrast, hue and saturation against DALI's CPU operators and a numpy formula, GPU against CPU.

Tolerances: uint8, int16 and int32 outputs of integer inputs are exact against DALI; float outputs within 1e-5 (float32
rounding); uint8 outputs of float inputs within one level (ties rounded after float32 arithmetic). GPU: exact for
integer outputs, 1e-5 for float ones."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import max_abs_diff, needs_dali, run_dali, run_headrace

from headrace import fn, types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(11)
IMAGES = [RNG.integers(0, 256, (9, 11, 3), dtype=np.uint8), RNG.integers(0, 256, (4, 6, 3), dtype=np.uint8)]
FLOATS = [RNG.uniform(0, 1, (5, 7, 3)).astype(np.float32), RNG.uniform(0, 1, (3, 2, 3)).astype(np.float32)]
SEQUENCES = [RNG.integers(0, 256, (3, 4, 5, 3), dtype=np.uint8), RNG.integers(0, 256, (2, 6, 2, 3), dtype=np.uint8)]
SHORTS = [RNG.integers(-3000, 3000, (4, 5, 3)).astype(np.int16)]
INTS = [RNG.integers(-70000, 70000, (3, 5, 3)).astype(np.int32)]

CASES = [("brightness", dict(brightness=1.3)), ("brightness", dict(brightness=0.7, brightness_shift=0.1)),
         ("brightness", dict(brightness_shift=-0.2, dtype=types.FLOAT)),
         ("contrast", dict(contrast=0.4)), ("contrast", dict(contrast=1.7, contrast_center=60.0)),
         ("contrast", dict(contrast=0.0, dtype=types.FLOAT)),
         ("hue", dict(hue=35.0)), ("hue", dict(hue=-150.0, image_type=types.BGR)), ("hue", dict(hue=90.0,
                                                                                             dtype=types.FLOAT)),
         ("saturation", dict(saturation=0.3)), ("saturation", dict(saturation=1.8)),
         ("saturation", dict(saturation=0.0, dtype=types.FLOAT))]


def _tolerance(out: np.ndarray, images: list[np.ndarray]) -> float:
    if out.dtype.kind == "f":
        return 1e-5 * max(1.0, float(np.abs(out).max(initial=0)))
    return 1 if images[0].dtype.kind == "f" else 0


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("op, kwargs", CASES, ids=[f"{op}-{kw}" for op, kw in CASES])
def test_matches_dali(op, kwargs):
    for images, layout in ((IMAGES, "HWC"), (FLOATS, "HWC"), (SEQUENCES, "FHWC"), (SHORTS, "HWC"), (INTS, "HWC")):
        ours = run_headrace(op, images, layout=layout, **kwargs)
        theirs = run_dali(op, images, layout=layout, **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, (op, kwargs, a.dtype, b.dtype, a.shape, b.shape)
            assert max_abs_diff(a, b) <= _tolerance(a, images), (op, kwargs, images[0].dtype)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("op, name, values", [("brightness", "brightness", [0.5, 1.9]),
                                              ("contrast", "contrast_center", [10.0, 200.0]),
                                              ("hue", "hue", [-40.0, 170.0]), ("saturation", "saturation", [0.2, 2.5])])
def test_per_sample_arguments_match_dali(op, name, values):
    arg_inputs = {name: [np.float32(v) for v in values]}
    ours = run_headrace(op, IMAGES, arg_inputs=arg_inputs, layout="HWC")
    theirs = run_dali(op, IMAGES, arg_inputs=arg_inputs, layout="HWC")
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


@needs_dali[0]
@needs_dali[1]
def test_every_uint8_value_under_many_factors_matches_dali():
    # ties (x.5 after float32 arithmetic) decide the rounding: every input level under 24 random factor sets
    rng = np.random.default_rng(2)
    levels = [np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)] * 24
    factors = {"contrast": rng.uniform(0, 3, 24),
               "contrast_center": rng.integers(0, 256, 24) + 0.5 * (rng.uniform(size=24) < 0.3),
               "brightness": rng.uniform(0, 2, 24), "brightness_shift": rng.uniform(-0.3, 0.3, 24)}
    for op, names in (("contrast", ("contrast", "contrast_center")),
                      ("brightness", ("brightness", "brightness_shift"))):
        arg_inputs = {name: [np.float32(v) for v in factors[name]] for name in names}
        ours = run_headrace(op, levels, arg_inputs=arg_inputs, layout="HWC")
        theirs = run_dali(op, levels, arg_inputs=arg_inputs, layout="HWC")
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b)


def test_gpu_arguments_reproduce_the_cpu_coefficients():
    # the GPU launch gets (multiplier, addend) through brightness_contrast's arguments; they must survive exactly
    from headrace_kernels.cpu.color_adjust_ops import affine_coefficients
    from headrace_kernels.cpu.color_ops import type_range
    from headrace_kernels.gpu.color_adjust_ops import scale_args

    rng = np.random.default_rng(3)
    for dtype in (np.uint8, np.int16, np.float32):
        for _ in range(200):
            args = {"contrast": rng.uniform(0, 3), "contrast_center": rng.uniform(-10, 300),
                    "brightness": rng.uniform(0, 2), "brightness_shift": rng.uniform(-1, 1), "dtype": None}
            multiplier, addend, out = affine_coefficients(args, np.dtype(dtype))
            gpu = scale_args(args, np.dtype(dtype))
            assert np.float32(gpu["brightness"]) * np.float32(gpu["contrast"]) == multiplier
            assert np.float32(gpu["brightness_shift"] * type_range(out)) == addend


def test_brightness_and_contrast_formulas():
    image = FLOATS[0]
    got = run_headrace("brightness", [image], brightness=1.5, brightness_shift=0.25)[0]
    np.testing.assert_allclose(got, 0.25 + 1.5 * image, atol=1e-6)
    got = run_headrace("contrast", [image], contrast=0.5)[0]
    np.testing.assert_allclose(got, 0.5 + 0.5 * (image - 0.5), atol=1e-6)
    # uint8: the shift is a fraction of 255, and the output saturates
    got = run_headrace("brightness", IMAGES, brightness_shift=0.5)[0]
    np.testing.assert_array_equal(got, np.clip(IMAGES[0].astype(np.int32) + 128, 0, 255).astype(np.uint8))


def test_hue_and_saturation_at_their_identity_and_extremes():
    np.testing.assert_array_equal(run_headrace("hue", IMAGES, hue=0.0)[0], IMAGES[0])
    np.testing.assert_array_equal(run_headrace("saturation", IMAGES)[0], IMAGES[0])
    grey = run_headrace("saturation", FLOATS, saturation=0.0)[0]
    assert grey.dtype == np.float32 and np.ptp(grey, axis=-1).max() < 3e-3  # R = G = B (YIQ's rounded matrix)
    turned = run_headrace("hue", FLOATS, hue=360.0)[0]
    np.testing.assert_allclose(turned, FLOATS[0], atol=1e-5)


def test_default_type_is_the_inputs():
    for op in ("brightness", "contrast", "hue", "saturation"):
        assert run_headrace(op, FLOATS)[0].dtype == np.float32
        assert run_headrace(op, IMAGES, dtype=types.FLOAT)[0].dtype == np.float32


def test_bad_input_names_op_sample_and_shape():
    with pytest.raises(SampleError, match=r"hue .*sample 1.*3 channels, got shape \(4, 4, 2\)"):
        run_headrace("hue", [IMAGES[0], np.zeros((4, 4, 2), np.uint8)], hue=10.0)
    with pytest.raises(SampleError, match=r"brightness .*sample 0.*HWC.*got shape \(4, 4\)"):
        run_headrace("brightness", [np.zeros((4, 4), np.uint8)], brightness=2.0)
    with pytest.raises(SchemaError, match=r"contrast .*HWC or FHWC or DHWC.*layout HW"):
        run_headrace("contrast", [np.zeros((4, 4), np.uint8)], layout="HW")


@pytest.mark.gpu
@pytest.mark.parametrize("op, kwargs", CASES, ids=[f"{op}-{kw}" for op, kw in CASES])
def test_gpu_matches_cpu(op, kwargs):
    from tests.gpu_helpers import cpu_and_gpu, max_level_difference

    for batch in (IMAGES, FLOATS, SEQUENCES, [IMAGES[0], IMAGES[0]]):
        cpu, gpu = cpu_and_gpu(batch, lambda data, device: getattr(fn, op)(data, **kwargs))
        tolerance = 1e-5 if cpu[0].dtype.kind == "f" else 0
        assert max_level_difference(cpu, gpu) <= tolerance, (op, kwargs)
