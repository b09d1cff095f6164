"""noise.gaussian, noise.salt_and_pepper and noise.shot against DALI's CPU build. headrace draws from its own
per-sample Philox streams, so the noise itself differs from DALI's: element types, shapes and the deterministic
parts (which values salt and pepper take, saturation) are compared exactly, the noise by statistics over whole
images (means within 0.1 levels, 0.5 for shot noise; standard deviations and replaced fractions within 5% of the
expected value and of DALI's). Where DALI's CPU build departs from its own documentation (noise.shot with factor 0
gives zeros, not the input) headrace follows the documentation. The GPU kernels apply the same draws: GPU equals
CPU bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import fn
from headrace.errors import SampleError
from tests.gpu_helpers import cpu_and_gpu

SHAPE = (200, 150, 3)


def _flat(value, dtype=np.uint8) -> list[np.ndarray]:
    return [np.full(SHAPE, value, dtype)] * 2


def _both(op: str, batch: list[np.ndarray], **kwargs) -> list[tuple[str, np.ndarray]]:
    """The first output sample of headrace and of DALI, named."""
    return [("headrace", run_headrace(op, batch, layout="HWC", **kwargs)[0]),
            ("dali", run_dali(op, batch, layout="HWC", **kwargs)[0])]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("mean, stddev", [(0.0, 1.0), (3.0, 10.0), (-5.0, 0.5)])
def test_gaussian_statistics_as_dali(mean, stddev):
    for who, out in _both("noise.gaussian", _flat(100.0, np.float32), mean=mean, stddev=stddev):
        assert out.dtype == np.float32 and out.shape == SHAPE, who
        noise = out.astype(np.float64) - 100.0
        assert abs(noise.mean() - mean) < 0.1 and abs(noise.std() - stddev) < 0.05 * stddev, (who, noise.std())


@needs_dali[0]
@needs_dali[1]
def test_gaussian_rounds_and_saturates_integers_as_dali():
    results = dict(_both("noise.gaussian", _flat(250), stddev=10.0))
    for who, out in results.items():
        assert out.dtype == np.uint8, who
    at_max = {who: float((out == 255).mean()) for who, out in results.items()}
    assert abs(at_max["headrace"] - 0.309) < 0.02 and abs(at_max["headrace"] - at_max["dali"]) < 0.02, at_max
    signed = dict(_both("noise.gaussian", _flat(-32760, np.int16), stddev=20.0))
    assert all(out.min() == -32768 and out.dtype == np.int16 for out in signed.values())


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", [{}, {"prob": 0.3, "salt_vs_pepper": 0.2}, {"prob": 0.5, "salt_val": 200.0,
                                                                               "pepper_val": 10.0}])
def test_salt_and_pepper_replaces_whole_pixels_as_dali(kwargs):
    prob, split = kwargs.get("prob", 0.05), kwargs.get("salt_vs_pepper", 0.5)
    salt, pepper = kwargs.get("salt_val", 255), kwargs.get("pepper_val", 0)
    fractions = {}
    for who, out in _both("noise.salt_and_pepper", _flat(100), **kwargs):
        changed = out != 100
        assert np.array_equal(changed.any(-1), changed.all(-1)), who  # the channels of a pixel share the draw
        is_salt, is_pepper = (out == salt).all(-1), (out == pepper).all(-1)
        assert np.array_equal(changed.any(-1), is_salt | is_pepper), who
        fractions[who] = (is_salt.mean(), is_pepper.mean())
        assert abs(is_salt.mean() - prob * split) < 0.05 * prob + 0.003, (who, fractions[who])
        assert abs(is_pepper.mean() - prob * (1 - split)) < 0.05 * prob + 0.003, (who, fractions[who])
    np.testing.assert_allclose(fractions["headrace"], fractions["dali"], atol=0.05 * prob + 0.004)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_salt_and_pepper_default_values_and_per_channel_as_dali(dtype):
    values = {}
    for who, out in _both("noise.salt_and_pepper", _flat(3, dtype), prob=0.3, per_channel=True):
        changed = out != 3
        assert out.dtype == dtype and abs(changed.mean() - 0.3) < 0.015, who
        assert changed.any(-1).mean() > changed.all(-1).mean() + 0.2, who  # channels drawn independently
        values[who] = set(np.unique(out[changed]).tolist())
    assert values["headrace"] == values["dali"] and len(values["dali"]) == 2


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("factor", [None, 2.0, 30.0])
def test_shot_statistics_as_dali(factor):
    kwargs = {} if factor is None else {"factor": factor}
    effective = 12.0 if factor is None else factor  # what DALI applies when no factor is given
    spreads = {}
    for who, out in _both("noise.shot", _flat(60), **kwargs):
        assert out.dtype == np.uint8, who
        values = out.astype(np.float64)
        assert abs(values.mean() - 60) < 0.5, who
        assert np.all(np.fmod(values[values < 255], effective) == 0), who  # multiples of the factor
        spreads[who] = values.std()
        assert abs(spreads[who] - np.sqrt(60 * effective)) < 0.05 * np.sqrt(60 * effective), (who, spreads)
    assert abs(spreads["headrace"] - spreads["dali"]) < 0.05 * spreads["dali"]


def test_shot_factor_zero_is_the_identity_as_dali_documents():
    # DALI's documentation says "a factor of 0 makes this an identity operation"; its 2.4 CPU build returns zeros
    # instead (it multiplies by the factor after all). headrace follows the documentation.
    image = [np.random.default_rng(1).integers(0, 256, SHAPE, dtype=np.uint8)] * 2
    np.testing.assert_array_equal(run_headrace("noise.shot", image, factor=0.0)[0], image[0])


def test_noise_follows_the_seed_and_per_sample_arguments():
    image = _flat(100.0, np.float32)
    first, again = (run_headrace("noise.gaussian", image, seed=4)[0] for _ in range(2))
    np.testing.assert_array_equal(first, again)
    quiet, loud = run_headrace("noise.gaussian", image, arg_inputs={
        "stddev": [np.array(0.5, np.float32), np.array(8.0, np.float32)]})
    assert abs(quiet.std() - 0.5) < 0.05 and abs(loud.std() - 8.0) < 0.4
    none, all_ = run_headrace("noise.salt_and_pepper", _flat(100), arg_inputs={
        "prob": [np.array(0.0, np.float32), np.array(1.0, np.float32)]})
    assert np.all(none == 100) and not np.any(all_ == 100)


@pytest.mark.parametrize("op, batch, kwargs, message", [
    ("noise.salt_and_pepper", _flat(1), {"prob": 1.5}, "argument 'prob' must be in \\[0, 1\\], got 1.5"),
    ("noise.salt_and_pepper", _flat(1), {"salt_vs_pepper": -0.1}, "argument 'salt_vs_pepper' must be in"),
    ("noise.gaussian", _flat(1), {"stddev": -1.0}, "argument 'stddev' must not be negative"),
    ("noise.shot", _flat(1), {"factor": -2.0}, "argument 'factor' must not be negative"),
    ("noise.shot", [np.full((3,), np.nan, np.float32)], {}, "noise.shot needs finite values"),
    ("noise.gaussian", [np.zeros((3,), bool)], {}, "noise.gaussian expects numeric samples, got bool"),
])
def test_bad_input_names_op_sample_and_argument(op, batch, kwargs, message):
    with pytest.raises(SampleError, match=rf"{op.replace('.', '[.]')} .*sample 0.*{message}"):
        run_headrace(op, batch, **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_gpu_noise_equals_cpu_noise(dtype):
    rng = np.random.default_rng(3)
    batch = [rng.integers(0, 200, shape).astype(dtype) for shape in ((40, 30, 3), (17, 9, 3), (5, 7))]
    graphs = [lambda d, dev: fn.noise.gaussian(d, stddev=7.0, seed=2),
              lambda d, dev: fn.noise.salt_and_pepper(d, prob=0.3, seed=2),
              lambda d, dev: fn.noise.salt_and_pepper(d, prob=0.3, per_channel=True, salt_val=50.0, seed=2),
              lambda d, dev: fn.noise.shot(d, factor=3.0, seed=2)]
    for graph in graphs:
        cpu, gpu = cpu_and_gpu(batch, graph)
        for a, b in zip(cpu, gpu, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
