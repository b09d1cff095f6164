"""power_spectrum against DALI's CPU operator and numpy's rfft (float64), and the GPU kernel against the CPU one.

Tolerances: relative 1e-5 of each sample's largest value against numpy and DALI (both round a float64 or float32
FFT to float32); 1e-4 relative for the GPU, whose cuFFT runs in float32."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import needs_dali, run_dali, run_headrace

from headrace.errors import SampleError

RNG = np.random.default_rng(11)
SIGNALS = [RNG.standard_normal((3, 40)).astype(np.float32), RNG.standard_normal((2, 33)).astype(np.float32)]
ONE_D = [RNG.standard_normal(50).astype(np.float32), RNG.standard_normal(17).astype(np.float32)]


def _close(got: list[np.ndarray], want: list[np.ndarray], rtol: float = 1e-5) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float32 and g.shape == w.shape, (g.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=0, atol=rtol * max(float(np.abs(w).max()), 1.0))


def _numpy(data: np.ndarray, axis: int = -1, nfft: int | None = None, power: int = 2) -> np.ndarray:
    magnitude = np.abs(np.fft.rfft(data.astype(np.float64), n=nfft, axis=axis))
    return magnitude ** power


CASES = [dict(), dict(nfft=64), dict(nfft=16), dict(axis=0), dict(axis=0, power=1), dict(power=1, nfft=31)]


@pytest.mark.parametrize("kwargs", CASES)
def test_matches_numpy(kwargs):
    got = run_headrace("power_spectrum", SIGNALS, **kwargs)
    _close(got, [_numpy(s, **kwargs) for s in SIGNALS])


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("data", [SIGNALS, ONE_D], ids=["2d", "1d"])
def test_matches_dali(kwargs, data):
    if kwargs.get("axis") == 0 and data is ONE_D:
        kwargs = {**kwargs, "axis": -1}  # 1D data has one axis
    elif kwargs.get("axis") == 0:
        data = SIGNALS[:1]  # DALI's FFT cannot plan nfft 2 (SIGNALS[1] has 2 rows)
    _close(run_headrace("power_spectrum", data, **kwargs), run_dali("power_spectrum", data, **kwargs))


def test_layout_is_kept():
    import headrace
    from headrace import fn

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.power_spectrum(fn.external_source(source=lambda: SIGNALS, batch=True, layout="ct"))

    p = pipe()
    (out,) = p.run()
    p.close()
    assert out.layout() == "ct" and np.array(out.at(0)).shape == (3, 21)


def test_bad_input_names_the_op_sample_and_argument():
    with pytest.raises(SampleError, match=r"power_spectrum.*sample 0.*float32"):
        run_headrace("power_spectrum", [s.astype(np.int16) for s in SIGNALS])
    with pytest.raises(SampleError, match=r"power_spectrum.*sample 0.*'axis' \(2\) is out of range"):
        run_headrace("power_spectrum", SIGNALS, axis=2)
    with pytest.raises(SampleError, match=r"power_spectrum.*sample 1.*'nfft'.*empty"):
        run_headrace("power_spectrum", [ONE_D[0], np.zeros(0, np.float32)])


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", CASES)
def test_gpu_matches_cpu(kwargs):
    from headrace import fn

    cpu, gpu = cpu_and_gpu(SIGNALS, lambda data, device: fn.power_spectrum(data, **kwargs))
    _close(gpu, cpu, rtol=1e-4)
