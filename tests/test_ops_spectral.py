"""spectrogram, mel_filter_bank, to_decibels and mfcc against DALI's CPU build and librosa; the GPU against the CPU.

Inputs: synthetic float32 signals (sines plus noise, several lengths in one batch) and their spectrograms.

Tolerances, as |ours - reference| <= rtol * |reference| + peak * max|reference of the sample|:
- spectrogram vs DALI and librosa: rtol 1e-4, peak 1e-5. The FFTs round differently (DALI: ffts in float32; ours:
  numpy in float64, rounded to float32; librosa: float64): the error of a bin is about 1e-7 of the sample's
  largest bin whatever its own size, so small bins need the peak term. Measured: 4e-7 of the peak.
- mel_filter_bank and mfcc vs DALI: rtol 1e-4, peak 1e-5. Same float32 coefficients up to their last bit (DALI
  builds them in float32 steps, we in float64), sums in another order. Measured 4e-6 of the peak for mel, 5e-7
  for mfcc.
- to_decibels vs DALI: 1e-4 dB absolute (log2 in float32 on both: a few ulp of values up to 200).
- librosa (mel filters, power_to_db / amplitude_to_db, mfcc through scipy's DCT): rtol 1e-5, peak 1e-6 in
  float64 (measured 2e-7); scipy's unnormalized DCTs are twice DALI's (DALI follows Wikipedia's formulas).
- GPU vs CPU: spectrogram rtol 1e-4, peak 1e-5 (cuFFT in float32 against numpy in float64, as against DALI);
  mel_filter_bank / mfcc rtol 1e-5, peak 1e-6 (same float32 tables, sums over the same terms in another order);
  to_decibels 1e-4 dB (CUDA's log2f and numpy's float32 log2 differ by an ulp).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from ops_support import needs_dali

import headrace.ops.spectral  # noqa: F401  (registers the schemas wherever headrace.ops does not yet)
from headrace.errors import SampleError, SchemaError

SR = 16000.0
RNG = np.random.default_rng(21)


def _signal(n: int, freq: float, noise: float = 0.1) -> np.ndarray:
    t = np.arange(n) / SR
    return (0.6 * np.sin(2 * np.pi * freq * t) + 0.3 * np.sin(2 * np.pi * 2.7 * freq * t)
            + noise * RNG.standard_normal(n)).astype(np.float32)


SIGNALS = [_signal(6000, 440.0), _signal(2501, 1000.0), _signal(700, 3100.0), _signal(97, 200.0)]
ASR = dict(nfft=512, window_length=400, window_step=160)


def _build(api, op: str, samples, in_layout: str | None, kwargs: dict):
    fn = api.fn

    @api.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=3)
    def pipe():
        data = fn.external_source(source=lambda: list(samples), batch=True,
                                  **({"layout": in_layout} if in_layout else {}))
        return getattr(fn, op)(data, **kwargs)

    return pipe()


def ours(op: str, samples, in_layout: str | None = None, **kwargs) -> list[np.ndarray]:
    """The op's outputs in headrace (CPU) for one batch whose layout is `in_layout`."""
    import headrace

    pipe = _build(headrace, op, samples, in_layout, kwargs)
    (out,) = pipe.run()
    pipe.close()
    return [np.array(out.at(i)) for i in range(len(out))]


def dali(op: str, samples, in_layout: str | None = None, **kwargs) -> list[np.ndarray]:
    """The same in DALI's CPU build."""
    from nvidia import dali as nvidia_dali

    pipe = _build(nvidia_dali, op, samples, in_layout, kwargs)
    pipe.build()
    (out,) = pipe.run()
    return [np.array(out.at(i)) for i in range(len(out))]


def assert_close(got: list, want: list, rtol: float, peak: float) -> None:
    """Every sample within rtol * |want| + peak * max|want| (shapes and float32 type equal)."""
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape, (i, a.shape, b.shape)
        assert a.dtype == np.float32, (i, a.dtype)
        if not b.size:
            continue
        reference = np.asarray(b, np.float64)
        bound = rtol * np.abs(reference) + peak * np.abs(reference).max()
        excess = np.abs(a.astype(np.float64) - reference) - bound
        assert excess.max() <= 0, (i, float(np.abs(a - reference).max()), float(np.abs(reference).max()))


def _librosa():
    return pytest.importorskip("librosa")


# ---------------------------------------------------------------------------------------------------- spectrogram

SPECTROGRAM_CASES = [
    dict(),
    ASR,
    dict(nfft=1024, window_length=300, window_step=128, power=1),
    dict(window_length=256, window_step=100, center_windows=False),
    dict(window_length=128, window_step=64, reflect_padding=False, layout="tf"),
    dict(window_length=200, window_step=80, window_fn=list(np.hamming(200)), layout="tf", power=1),
]


@pytest.mark.parametrize("kwargs", SPECTROGRAM_CASES, ids=lambda k: ",".join(f"{a}" for a in k) or "defaults")
@needs_dali[0]
@needs_dali[1]
def test_spectrogram_matches_dali(kwargs):
    signals = SIGNALS if kwargs.get("center_windows", True) else SIGNALS[:3]
    got = ours("spectrogram", signals, **kwargs)
    assert_close(got, dali("spectrogram", signals, **kwargs), rtol=1e-4, peak=1e-5)
    bins = (kwargs.get("nfft") or kwargs.get("window_length", 512)) // 2 + 1
    assert got[0].shape[0 if kwargs.get("layout", "ft") == "ft" else 1] == bins


@needs_dali[0]
@needs_dali[1]
def test_spectrogram_of_signals_shorter_than_the_window_matches_dali():
    """Centered: a window per step, the signal mirrored (repeatedly) or zero-padded; not centered: one window when
    the signal is less than a step shorter than the window (C's division), zeros beyond it."""
    short = [np.arange(1, n + 1, dtype=np.float32) / n for n in (1, 2, 5, 13)]
    for kwargs in (dict(nfft=16, window_length=8, window_step=4), dict(nfft=8, window_length=8, window_step=3,
                                                                       reflect_padding=False)):
        assert_close(ours("spectrogram", short, **kwargs), dali("spectrogram", short, **kwargs), 1e-4, 1e-5)
    not_centered = [np.ones(5, np.float32), np.ones(6, np.float32)]
    kwargs = dict(nfft=8, window_length=8, window_step=4, center_windows=False)
    got = ours("spectrogram", not_centered, **kwargs)
    assert [g.shape for g in got] == [(5, 1), (5, 1)]
    assert_close(got, dali("spectrogram", not_centered, **kwargs), 1e-4, 1e-5)


@needs_dali[0]
@needs_dali[1]
def test_spectrogram_takes_degenerate_2d_signals_like_dali():
    signals = [SIGNALS[1][None, :].copy(), SIGNALS[2][:, None].copy()]
    assert_close(ours("spectrogram", signals, **ASR), dali("spectrogram", signals, **ASR), 1e-4, 1e-5)


@pytest.mark.filterwarnings("ignore:n_fft=512 is too large")  # the 97-sample signal: mirrored repeatedly
@pytest.mark.parametrize("reflect, pad_mode", [(True, "reflect"), (False, "constant")])
def test_spectrogram_matches_librosa_stft(reflect, pad_mode):
    """librosa's periodic Hann window given as window_fn (DALI's own Hann is shifted by half a sample)."""
    librosa = _librosa()
    window = librosa.filters.get_window("hann", 512, fftbins=True)
    got = ours("spectrogram", SIGNALS, nfft=512, window_length=512, window_step=128, window_fn=list(window),
               reflect_padding=reflect)
    want = [np.abs(librosa.stft(s.astype(np.float64), n_fft=512, hop_length=128, window="hann", center=True,
                                pad_mode=pad_mode)) ** 2 for s in SIGNALS]
    assert_close(got, want, rtol=1e-4, peak=1e-6)


def test_spectrogram_default_window_is_dalis_hann():
    from headrace_kernels.cpu.spectral_ops import hann_window

    n = np.arange(8)
    np.testing.assert_allclose(hann_window(8), 0.5 * (1 - np.cos(2 * np.pi * (n + 0.5) / 8)), atol=1e-7)
    impulse = [np.zeros(64, np.float32)]
    impulse[0][32] = 1.0
    got = ours("spectrogram", impulse, nfft=8, window_length=8, window_step=64, power=1, center_windows=False,
               layout="tf")
    assert got[0].shape == (1, 5) and np.all(got[0] == 0)  # the only window [0, 8) misses the impulse


@pytest.mark.parametrize("signals, kwargs, message", [
    ([np.zeros(0, np.float32)], {}, r"sample 0.*empty signals"),
    ([np.ones(100, np.float32), np.ones(10, np.float32)], dict(window_length=64, window_step=32,
                                                               center_windows=False),
     r"sample 1.*too short \(10 samples\).*window_length 64"),
    ([np.ones(100, np.float32)], dict(nfft=8, window_length=16), r"window_length \(16\) can't be bigger than nfft"),
    ([np.ones(100, np.float32)], dict(window_length=16, window_fn=[1.0] * 5), r"window_fn has 5 values"),
    ([np.ones(100, np.float32), np.ones((2, 50), np.float32)], dict(window_length=16), r"sample 1.*shape \(2, 50\)"),
    ([np.ones(100, np.int16)], dict(window_length=16), r"float32 signals, got int16"),
])
def test_spectrogram_bad_input_names_the_op_the_sample_and_the_argument(signals, kwargs, message):
    with pytest.raises(SampleError, match=r"spectrogram .*" + message):
        ours("spectrogram", signals, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(power=3), r"spectrogram .*argument 'power'.*\[1, 2\]"),
    (dict(layout="xy"), r"spectrogram .*argument 'layout'"),
    (dict(window_length=0), r"spectrogram .*argument 'window_length'"),
    (dict(window_step=-1), r"spectrogram .*argument 'window_step'"),
])
def test_spectrogram_bad_arguments_fail_where_the_graph_is_made(kwargs, message):
    with pytest.raises(SchemaError, match=message):
        ours("spectrogram", SIGNALS, **kwargs)


# ------------------------------------------------------------------------------------------------ mel_filter_bank

SPECTRA = [s.astype(np.float32) for s in ours("spectrogram", SIGNALS, **ASR)]

MEL_CASES = [
    dict(sample_rate=SR, nfilter=64),
    dict(sample_rate=SR, nfilter=40, normalize=False, mel_formula="htk"),
    dict(sample_rate=SR, nfilter=80, freq_low=100.0, freq_high=7000.0),
    dict(sample_rate=SR, nfilter=24, freq_low=300.0, mel_formula="htk", normalize=True),
    dict(sample_rate=44100.0, nfilter=128, normalize=False),
]


@pytest.mark.parametrize("kwargs", MEL_CASES)
@needs_dali[0]
@needs_dali[1]
def test_mel_filter_bank_matches_dali_in_both_layouts(kwargs):
    assert_close(ours("mel_filter_bank", SPECTRA, "ft", **kwargs), dali("mel_filter_bank", SPECTRA, "ft", **kwargs),
                 1e-4, 1e-5)
    transposed = [np.ascontiguousarray(s.T) for s in SPECTRA]
    got = ours("mel_filter_bank", transposed, "tf", **kwargs)
    assert got[0].shape == (SPECTRA[0].shape[1], kwargs["nfilter"])
    assert_close(got, dali("mel_filter_bank", transposed, "tf", **kwargs), 1e-4, 1e-5)


@needs_dali[0]
@needs_dali[1]
def test_mel_filter_bank_without_layout_and_above_nyquist_matches_dali():
    """No layout: the second last axis of 2D / 3D data, the only axis of 1D data. freq_high above sample_rate / 2
    (allowed up to sample_rate) is compared on spectrograms of several windows in "ft" only: DALI's time-major path
    (which it also takes for a single window) reads past the last bin there."""
    kwargs = dict(sample_rate=SR, nfilter=20, freq_high=12000.0, mel_formula="htk")
    several = SPECTRA[:3]
    assert_close(ours("mel_filter_bank", several, **kwargs), dali("mel_filter_bank", several, **kwargs), 1e-4, 1e-5)
    cube = [np.stack([SPECTRA[1], SPECTRA[1] * 2])]
    column = [np.ascontiguousarray(SPECTRA[0][:, 3])]
    for data in (cube, column):
        got = ours("mel_filter_bank", data, sample_rate=SR, nfilter=16)
        assert_close(got, dali("mel_filter_bank", data, sample_rate=SR, nfilter=16), 1e-4, 1e-5)
    assert got[0].shape == (16,)


@pytest.mark.parametrize("normalize, formula", [(True, "slaney"), (False, "slaney"), (True, "htk"), (False, "htk")])
def test_mel_filter_bank_matches_librosa(normalize, formula):
    librosa = _librosa()
    got = ours("mel_filter_bank", SPECTRA, sample_rate=SR, nfilter=40, freq_low=20.0, freq_high=7600.0,
               normalize=normalize, mel_formula=formula)
    bank = librosa.filters.mel(sr=SR, n_fft=512, n_mels=40, fmin=20.0, fmax=7600.0, htk=formula == "htk",
                               norm="slaney" if normalize else None)
    assert_close(got, [bank @ s.astype(np.float64) for s in SPECTRA], rtol=1e-5, peak=1e-6)


def test_mel_filter_bank_bad_input():
    with pytest.raises(SchemaError, match=r"mel_filter_bank .*axis_names 'f'.*not in the input's layout 'xy'"):
        ours("mel_filter_bank", SPECTRA, "xy", sample_rate=SR)
    with pytest.raises(SampleError, match=r"mel_filter_bank .*sample 0.*freq_high \(100.0\) must be above freq_low"):
        ours("mel_filter_bank", SPECTRA, sample_rate=SR, freq_low=200.0, freq_high=100.0)
    with pytest.raises(SampleError, match=r"mel_filter_bank .*sample_rate must be positive"):
        ours("mel_filter_bank", SPECTRA, sample_rate=0.0)
    with pytest.raises(SchemaError, match=r"mel_filter_bank .*argument 'mel_formula'"):
        ours("mel_filter_bank", SPECTRA, mel_formula="fast")
    with pytest.raises(SampleError, match=r"mel_filter_bank .*sample 0.*float32 data, got int32"):
        ours("mel_filter_bank", [np.ones((5, 3), np.int32)])


# ------------------------------------------------------------------------------------------------- to_decibels

MELS = ours("mel_filter_bank", SPECTRA, sample_rate=SR, nfilter=64)


@pytest.mark.parametrize("kwargs", [dict(), dict(multiplier=20.0, cutoff_db=-80.0), dict(reference=1.0),
                                    dict(reference=3.5, cutoff_db=-60.0), dict(cutoff_db=-8000.0, multiplier=20.0)])
@needs_dali[0]
@needs_dali[1]
def test_to_decibels_matches_dali(kwargs):
    data = [*MELS, np.array([[1e-30, 0.0, 2.0]], np.float32)]
    for a, b in zip(ours("to_decibels", data, **kwargs), dali("to_decibels", data, **kwargs), strict=True):
        assert a.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)


@needs_dali[0]
@needs_dali[1]
def test_to_decibels_of_zeros_nans_and_negative_references_matches_dali():
    """A sample whose maximum is 0 (reference 0: every ratio saturates), NaNs (skipped by the maximum, saturated),
    a negative reference; every ratio below the cutoff saturates at cutoff_db."""
    data = [np.zeros((3, 2), np.float32), np.array([[np.nan, 1.0, 0.5]], np.float32),
            np.array([[-1.0, 0.0]], np.float32), np.zeros((0, 2), np.float32)]
    for kwargs in (dict(), dict(reference=-1.0), dict(multiplier=0.0, cutoff_db=-80.0)):
        for a, b in zip(ours("to_decibels", data, **kwargs), dali("to_decibels", data, **kwargs), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)
    np.testing.assert_allclose(ours("to_decibels", data)[0], -200.0, atol=1e-4)


def test_to_decibels_matches_librosa():
    librosa = _librosa()
    power = ours("to_decibels", MELS, reference=1.0, cutoff_db=-80.0)
    amplitude = ours("to_decibels", MELS, multiplier=20.0, reference=1.0, cutoff_db=-80.0)
    for p, a, m in zip(power, amplitude, MELS, strict=True):
        m = m.astype(np.float64)
        np.testing.assert_allclose(p, librosa.power_to_db(m, ref=1.0, amin=1e-8, top_db=None), rtol=0, atol=1e-4)
        np.testing.assert_allclose(a, librosa.amplitude_to_db(m, ref=1.0, amin=1e-4, top_db=None), rtol=0, atol=1e-4)


def test_to_decibels_reference_zero_is_an_error():
    with pytest.raises(SampleError, match=r"to_decibels .*sample 0.*reference must not be 0"):
        ours("to_decibels", MELS, reference=0.0)


# -------------------------------------------------------------------------------------------------------- mfcc

LOG_MELS = ours("to_decibels", MELS, cutoff_db=-80.0)

MFCC_CASES = [
    dict(),
    dict(n_mfcc=13, normalize=True),
    dict(dct_type=1, n_mfcc=30),
    dict(dct_type=3, normalize=True, lifter=22.0),
    dict(dct_type=3),
    dict(dct_type=4, n_mfcc=100),
    dict(dct_type=4, normalize=True, lifter=-3.0),
    dict(axis=1, n_mfcc=5, lifter=10.0),
]


@pytest.mark.parametrize("kwargs", MFCC_CASES)
@needs_dali[0]
@needs_dali[1]
def test_mfcc_matches_dali(kwargs):
    got = ours("mfcc", LOG_MELS, "ft", **kwargs)
    assert_close(got, dali("mfcc", LOG_MELS, "ft", **kwargs), 1e-4, 1e-5)
    axis = kwargs.get("axis", 0)
    assert all(g.shape[axis] == min(kwargs.get("n_mfcc", 20), m.shape[axis]) for g, m in zip(got, LOG_MELS,
                                                                                              strict=True))


@needs_dali[0]
@needs_dali[1]
def test_mfcc_of_3d_data_matches_dali():
    cube = [np.stack([LOG_MELS[0], -LOG_MELS[0]]), np.stack([LOG_MELS[2]] * 3)]
    for kwargs in (dict(axis=1, n_mfcc=12, normalize=True), dict(axis=0, n_mfcc=1), dict(axis=2, dct_type=4)):
        assert_close(ours("mfcc", cube, **kwargs), dali("mfcc", cube, **kwargs), 1e-4, 1e-5)


@needs_dali[0]
@needs_dali[1]
def test_empty_spectrograms_match_dali():
    """No windows or no mel bands: empty outputs of the right shape, as DALI's."""
    cases = [("mfcc", [np.ones((0, 3), np.float32), LOG_MELS[3]], dict(n_mfcc=2)),
             ("mel_filter_bank", [np.ones((33, 0), np.float32), SPECTRA[3][:33]], dict(nfilter=4)),
             ("to_decibels", [np.ones((5, 0), np.float32), MELS[3]], {})]
    for op, data, kwargs in cases:
        assert_close(ours(op, data, **kwargs), dali(op, data, **kwargs), 1e-4, 1e-5)


@pytest.mark.parametrize("dct_type, normalize", [(1, False), (2, False), (2, True), (3, False), (3, True),
                                                 (4, False), (4, True)])
def test_mfcc_matches_librosa(dct_type, normalize):
    """librosa's mfcc of the same log-mel spectrogram (scipy's DCT: twice DALI's without normalization)."""
    librosa = _librosa()
    got = ours("mfcc", LOG_MELS, n_mfcc=13, dct_type=dct_type, normalize=normalize, lifter=22.0)
    want = [librosa.feature.mfcc(S=m.astype(np.float64), n_mfcc=13, dct_type=dct_type,
                                 norm="ortho" if normalize else None, lifter=22.0) / (1 if normalize else 2)
            for m in LOG_MELS]
    assert_close(got, want, rtol=1e-5, peak=1e-6)


def test_mfcc_bad_input():
    with pytest.raises(SampleError, match=r"mfcc .*sample 0.*normalize is not supported with dct_type 1"):
        ours("mfcc", LOG_MELS, dct_type=1, normalize=True)
    with pytest.raises(SampleError, match=r"mfcc .*sample 0.*axis 2 is out of range for 2-dimensional data"):
        ours("mfcc", LOG_MELS, axis=2)
    with pytest.raises(SampleError, match=r"mfcc .*sample 1.*dct_type 1 needs at least 2 values along axis 0"):
        ours("mfcc", [np.ones((3, 2), np.float32), np.ones((1, 2), np.float32)], dct_type=1)
    with pytest.raises(SchemaError, match=r"mfcc .*argument 'dct_type'"):
        ours("mfcc", LOG_MELS, dct_type=5)
    with pytest.raises(SchemaError, match=r"mfcc .*argument 'axis'"):
        ours("mfcc", LOG_MELS, axis=-1)


# ---------------------------------------------------------------------------------------- the chain and its specs


def _chain(api, device: str = "cpu"):
    fn = api.fn

    @api.pipeline_def(batch_size=len(SIGNALS), num_threads=2, device_id=None if device == "cpu" else 0, seed=1)
    def pipe():
        audio = fn.external_source(source=lambda: list(SIGNALS), batch=True)
        audio = audio.gpu() if device == "gpu" else audio
        spectrogram = fn.spectrogram(audio, **ASR)
        mel = fn.mel_filter_bank(spectrogram, sample_rate=SR, nfilter=64, freq_high=7600.0)
        decibels = fn.to_decibels(mel, multiplier=10.0, cutoff_db=-80.0)
        return spectrogram, mel, decibels, fn.mfcc(decibels, n_mfcc=13, normalize=True, lifter=22.0)

    return pipe()


def _outputs(pipe) -> list[list[np.ndarray]]:
    outs = pipe.run()
    return [[np.array((o.as_cpu() if hasattr(o, "as_cpu") else o).at(i)) for i in range(len(o))] for o in outs]


def test_the_asr_chain_declares_what_it_produces():
    import headrace

    pipe = _chain(headrace)
    specs = [o.spec for o in pipe.outputs]
    assert [(s.dtype, s.layout, s.dims) for s in specs] == [
        (np.float32, "ft", (257, -1)), (np.float32, "ft", (64, -1)), (np.float32, "ft", (64, -1)),
        (np.float32, "ft", (13, -1))]
    for spec, batch in zip(specs, _outputs(pipe), strict=True):
        assert all(s.dtype == spec.dtype and s.shape[0] == spec.dims[0] for s in batch)
    pipe.close()


def test_the_asr_chain_survives_a_pipeline_file_round_trip():
    from headrace import Pipeline, fn, pipeline_def

    @pipeline_def(batch_size=len(SIGNALS), num_threads=1, device_id=None, seed=1)
    def pipe():
        audio = fn.external_source(name="audio")
        spectrogram = fn.spectrogram(audio, window_fn=list(np.hanning(400)), layout="tf", **ASR)
        mel = fn.mel_filter_bank(spectrogram, sample_rate=SR, nfilter=40, mel_formula="htk", normalize=False)
        return fn.mfcc(fn.to_decibels(mel, reference=2.0), n_mfcc=10, axis=1, dct_type=3, lifter=5.0)

    original = pipe()
    text = original.serialize()
    loaded = Pipeline.load(text)
    assert loaded.serialize() == text
    mel_args = next(node["args"] for node in json.loads(text)["nodes"] if node["op"] == "mel_filter_bank")
    assert mel_args["axes"] == [1]  # the frequency axis, resolved from the spectrogram's "tf" layout
    (first,), (second,) = original.run(audio=SIGNALS), loaded.run(audio=SIGNALS)
    for i in range(len(SIGNALS)):
        np.testing.assert_array_equal(np.array(first.at(i)), np.array(second.at(i)))
    original.close()
    loaded.close()


@needs_dali[0]
@needs_dali[1]
def test_the_asr_chain_matches_dali():
    from nvidia import dali as nvidia_dali

    import headrace

    pipe = _chain(headrace)
    got = _outputs(pipe)
    pipe.close()
    reference = _chain(nvidia_dali)
    reference.build()
    want = _outputs(reference)
    for a, b in zip(got[:2], want[:2], strict=True):
        assert_close(a, b, 1e-4, 1e-5)
    for a, b in zip(got[2], want[2], strict=True):  # dB of values >= 1e-8 of the peak: 1e-4 relative is 4e-4 dB
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-3)
    assert_close(got[3], want[3], 1e-4, 1e-5)


# ------------------------------------------------------------------------------------------------- GPU vs CPU


def _run_device(op_graph, samples, device: str, layout: str | None = None):
    from headrace import Pipeline, fn

    pipe = Pipeline(batch_size=len(samples), num_threads=2, device_id=0, seed=3)
    with pipe:
        data = fn.external_source(source=lambda: list(samples), batch=True,
                                  **({"layout": layout} if layout else {}))
        pipe.set_outputs(op_graph(data.gpu() if device == "gpu" else data))
    (out,) = pipe.run()
    if out.device == "gpu":
        out = out.as_cpu()
    result = [np.array(out.at(i)) for i in range(len(out))]
    pipe.close()
    return result


def _gpu_vs_cpu(op_graph, samples, rtol: float, peak: float, layout: str | None = None) -> None:
    cpu = _run_device(op_graph, samples, "cpu", layout)
    gpu = _run_device(op_graph, samples, "gpu", layout)
    assert_close(gpu, cpu, rtol, peak)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", SPECTROGRAM_CASES, ids=lambda k: ",".join(f"{a}" for a in k) or "defaults")
def test_gpu_spectrogram_matches_cpu(kwargs):
    from headrace import fn

    signals = SIGNALS if kwargs.get("center_windows", True) else SIGNALS[:3]
    _gpu_vs_cpu(lambda d: fn.spectrogram(d, **kwargs), signals, 1e-4, 1e-5)
    same_length = [_signal(4000, f) for f in (300.0, 2000.0, 5000.0)]  # a dense batch
    _gpu_vs_cpu(lambda d: fn.spectrogram(d, **kwargs), same_length, 1e-4, 1e-5)


@pytest.mark.gpu
def test_gpu_spectrogram_of_short_and_degenerate_signals_matches_cpu():
    from headrace import fn

    short = [np.arange(1, n + 1, dtype=np.float32) / n for n in (1, 2, 5, 13)]
    _gpu_vs_cpu(lambda d: fn.spectrogram(d, nfft=16, window_length=8, window_step=4), short, 1e-4, 1e-5)
    _gpu_vs_cpu(lambda d: fn.spectrogram(d, nfft=8, window_length=8, window_step=4, center_windows=False),
                [np.ones(5, np.float32), np.ones(6, np.float32)], 1e-4, 1e-5)
    _gpu_vs_cpu(lambda d: fn.spectrogram(d, **ASR), [SIGNALS[1][None, :].copy()], 1e-4, 1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", MEL_CASES[:4])
def test_gpu_mel_filter_bank_matches_cpu(kwargs):
    from headrace import fn

    _gpu_vs_cpu(lambda d: fn.mel_filter_bank(d, **kwargs), SPECTRA, 1e-5, 1e-6, layout="ft")
    transposed = [np.ascontiguousarray(s.T) for s in SPECTRA]
    _gpu_vs_cpu(lambda d: fn.mel_filter_bank(d, **kwargs), transposed, 1e-5, 1e-6, layout="tf")
    _gpu_vs_cpu(lambda d: fn.mel_filter_bank(d, **kwargs), [np.stack([SPECTRA[0], SPECTRA[0] * 3])], 1e-5, 1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", MFCC_CASES)
def test_gpu_mfcc_matches_cpu(kwargs):
    from headrace import fn

    _gpu_vs_cpu(lambda d: fn.mfcc(d, **kwargs), LOG_MELS, 1e-5, 1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", [dict(), dict(multiplier=20.0, cutoff_db=-80.0), dict(reference=3.5)])
def test_gpu_to_decibels_matches_cpu(kwargs):
    from headrace import fn

    data = [*MELS, np.zeros((3, 2), np.float32), np.array([np.nan, 1.0, -2.0], np.float32), np.zeros(0, np.float32)]
    cpu = _run_device(lambda d: fn.to_decibels(d, **kwargs), data, "cpu")
    gpu = _run_device(lambda d: fn.to_decibels(d, **kwargs), data, "gpu")
    for a, b in zip(gpu, cpu, strict=True):
        assert a.shape == b.shape and a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)


@pytest.mark.gpu
def test_gpu_asr_chain_matches_cpu():
    import headrace

    cpu = _outputs(_chain(headrace))
    gpu = _outputs(_chain(headrace, "gpu"))
    assert_close(gpu[0], cpu[0], 1e-4, 1e-5)
    assert_close(gpu[1], cpu[1], 1e-4, 1e-5)
    for a, b in zip(gpu[2], cpu[2], strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-3)
    assert_close(gpu[3], cpu[3], 1e-4, 1e-5)


@pytest.mark.gpu
def test_gpu_bad_input_names_the_sample():
    from headrace import fn

    with pytest.raises(SampleError, match=r"spectrogram .*GPU.*sample 1.*too short"):
        _run_device(lambda d: fn.spectrogram(d, window_length=64, window_step=32, center_windows=False),
                    [np.ones(100, np.float32), np.ones(10, np.float32)], "gpu")
    with pytest.raises(SampleError, match=r"mfcc .*GPU.*sample 0.*normalize is not supported"):
        _run_device(lambda d: fn.mfcc(d, dct_type=1, normalize=True), LOG_MELS, "gpu")
