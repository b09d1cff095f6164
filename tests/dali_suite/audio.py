"""DALI's audio examples: docs/examples/audio_processing/audio_decoder.ipynb, spectrogram.ipynb, mel_filter_bank, mfcc
and the RNN-T speech preprocessing of dali/test/python/test_RNNT_data_pipeline.py (preemphasis, spectrogram, mel,
decibels, normalize), with the trimming of silence (nonsilent_region + slice) and resampling."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case

DECODER = "DALI docs/examples/audio_processing/audio_decoder.ipynb"
SPECTROGRAM = "DALI docs/examples/audio_processing/spectrogram.ipynb"


def audio_pipeline(lib: Lib, data: SuiteData, body: Callable, batch_size: int = 4) -> Pipe:
    """readers.file over the WAV files, decoders.audio (float, mono), then `body(fn, types, audio, rate)`."""
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=2)
    def pipe():
        encoded, _ = fn.readers.file(files=wav_files(data))
        audio, rate = fn.decoders.audio(encoded, dtype=types.FLOAT, downmix=True)
        return body(fn, types, audio, rate)

    return pipe()


def wav_files(data: SuiteData) -> list[str]:
    return sorted(str(p) for p in Path(data.audio).rglob("*.wav"))


@case(DECODER + " (readers.file over a folder of WAV files)", atol=1e-6)
def audio_file_root_decoder(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        encoded, label = fn.readers.file(file_root=data.audio)
        audio, rate = fn.decoders.audio(encoded, dtype=types.FLOAT, downmix=True)
        return audio, rate, label

    return pipe()


@case(DECODER, atol=1e-6)
def audio_decoder_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        encoded, _ = fn.readers.file(files=wav_files(data))
        audio, rate = fn.decoders.audio(encoded, dtype=types.FLOAT, downmix=True)
        pcm, _ = fn.decoders.audio(encoded, dtype=types.INT16)
        return audio, rate, pcm

    return pipe()


# Resampling: DALI's windowed-sinc resampler in float32, within 1e-5 (the sums of many terms).
@case(DECODER + " (sample_rate: resampled at decode, and audio_resample)", atol=1e-5)
def audio_resample_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        encoded, _ = fn.readers.file(files=wav_files(data))
        resampled_at_decode, rate = fn.decoders.audio(encoded, dtype=types.FLOAT, downmix=True, sample_rate=8000)
        audio, _ = fn.decoders.audio(encoded, dtype=types.FLOAT, downmix=True)
        return resampled_at_decode, rate, fn.audio_resample(audio, scale=0.5)

    return pipe()


# Spectrogram: float32 FFT sums, relative 1e-3 of DALI's (plus 1e-4 absolute for the near-zero bins).
@case(SPECTROGRAM, atol=1e-4, rtol=1e-3)
def spectrogram_example(lib: Lib, data: SuiteData) -> Pipe:
    return audio_pipeline(lib, data, lambda fn, types, audio, rate: (
        fn.spectrogram(audio, nfft=256, window_length=256, window_step=128),
        fn.spectrogram(audio, nfft=200, window_length=160, window_step=80, power=1, center_windows=False,
                       layout="tf")))


@case(SPECTROGRAM + " (mel spectrogram in decibels)", atol=1e-3, rtol=1e-3)
def mel_spectrogram_example(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, audio, rate):
        spec = fn.spectrogram(audio, nfft=256, window_length=256, window_step=128)
        mel = fn.mel_filter_bank(spec, sample_rate=16000, nfilter=40)
        return (mel, fn.to_decibels(mel, multiplier=10.0, reference=1.0, cutoff_db=-80),
                fn.to_decibels(mel))

    return audio_pipeline(lib, data, body)


@case("DALI docs/examples/audio_processing/mfcc.ipynb", atol=5e-3, rtol=1e-3)
def mfcc_example(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, audio, rate):
        spec = fn.spectrogram(audio, nfft=256, window_length=256, window_step=128)
        mel = fn.mel_filter_bank(spec, sample_rate=16000, nfilter=40, mel_formula="htk")
        db = fn.to_decibels(mel, multiplier=10.0, cutoff_db=-80)
        return fn.mfcc(db, n_mfcc=13, dct_type=2, normalize=True), fn.mfcc(db, n_mfcc=10, lifter=22.0)

    return audio_pipeline(lib, data, body)


@case(DECODER + " (trimming silence: nonsilent_region + slice)", atol=1e-6)
def nonsilent_region_trim(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, audio, rate):
        begin, length = fn.nonsilent_region(audio, cutoff_db=-40)
        trimmed = fn.slice(audio, begin, length, axes=[0])
        return begin, length, trimmed

    return audio_pipeline(lib, data, body)


@case("DALI dali/test/python/test_RNNT_data_pipeline.py (speech preprocessing: preemphasis, log-mel, "
      "normalize, pad)", atol=1e-4, rtol=1e-4)
def asr_preprocessing(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, audio, rate):
        audio = fn.preemphasis_filter(audio, preemph_coeff=0.97)
        spec = fn.spectrogram(audio, nfft=512, window_length=320, window_step=160)
        mel = fn.mel_filter_bank(spec, sample_rate=16000, nfilter=64)
        log = fn.to_decibels(mel, multiplier=np.log(10), reference=1.0, cutoff_db=np.log(1e-20))
        norm = fn.normalize(log, axes=[1])
        return fn.pad(norm, axes=(1,), align=16, fill_value=0)

    return audio_pipeline(lib, data, body)


@case("DALI dali/test/python/operator_1/test_preemphasis.py", atol=1e-6)
def preemphasis_example(lib: Lib, data: SuiteData) -> Pipe:
    return audio_pipeline(lib, data, lambda fn, types, audio, rate: (
        fn.preemphasis_filter(audio), fn.preemphasis_filter(audio, preemph_coeff=0.5, border="zero"),
        fn.preemphasis_filter(audio, border="reflect", dtype=types.FLOAT)))


@case("DALI dali/test/python/operator_1/test_power_spectrum.py", atol=1e-5, rtol=1e-4)
def power_spectrum_example(lib: Lib, data: SuiteData) -> Pipe:
    return audio_pipeline(lib, data, lambda fn, types, audio, rate: (
        fn.power_spectrum(fn.reshape(audio, shape=[-1, 1]), nfft=64, axis=0)))


@case(SPECTROGRAM + " (window_fn, reflect_padding, htk mel without normalization, band limits)", atol=1e-4,
      rtol=1e-3)
def spectrogram_mel_variants(lib: Lib, data: SuiteData) -> Pipe:
    window = np.hamming(200).astype(np.float32).tolist()

    def body(fn, types, audio, rate):
        spec = fn.spectrogram(audio, nfft=256, window_length=200, window_step=100, window_fn=window,
                              reflect_padding=False, power=2)
        return (spec, fn.mel_filter_bank(spec, sample_rate=16000, nfilter=32, mel_formula="htk", normalize=False,
                                         freq_low=100.0, freq_high=6000.0),
                fn.to_decibels(spec, multiplier=20.0, reference=10.0))

    return audio_pipeline(lib, data, body)


@case(DECODER + " (nonsilent_region: window, reference power, reset interval)")
def nonsilent_region_arguments(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, audio, rate):
        return (*fn.nonsilent_region(audio, cutoff_db=-30, window_length=512),
                *fn.nonsilent_region(audio, cutoff_db=-20, reference_power=0.01, window_length=256,
                                     reset_interval=1024))

    return audio_pipeline(lib, data, body)
