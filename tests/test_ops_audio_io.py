"""decoders.audio, audio_resample and readers.nemo_asr against DALI's CPU build, on sine sweeps and noise written
here with soundfile (8 / 16 / 22.05 / 44.1 kHz, mono and stereo, WAV, FLAC and OGG Vorbis).

Tolerances:
* WAV and FLAC decoding (any dtype, downmix, resampling): exact. Both read through libsndfile's own conversions
  (16-bit integers to float are x / 32768), and the resampler is DALI's, step by step in float32.
* OGG Vorbis: float within 1e-6 of DALI, int16 within 1 level, int32 within 4096 levels (1e-6 of full scale) and
  everything else exact: DALI's wheel carries another libsndfile / libvorbis build, whose float synthesis rounds
  differently (we measured up to 2.4e-7). The files, their lengths and rates agree exactly.
* audio_resample: bit-exact with DALI on x86-64 today (the sinc table uses the C library's float sin, as DALI's);
  asserted within 2e-7 for float and 1 level for integers, the slack of one float32 rounding.
* Against soxr's very-high-quality resampler on tones below both Nyquist rates: within 3e-4 at quality 50 and
  100, 5e-3 at quality 0 (3 lobes), away from the signal's edges.
* GPU audio_resample against the CPU kernel (marker gpu): the GPU follows the CPU's float32 order without FMA, so it
  is expected bit-exact; asserted within 2e-7 / 1 level.
A WAV whose data chunk declares more bytes than the file holds is refused here, where DALI decodes what is there.
"""

from __future__ import annotations

import json
import os
import struct
import warnings

import numpy as np
import pytest
import soundfile as sf
from ops_support import needs_dali
from ops_support import run_dali as run_dali_op
from ops_support import run_headrace as run_headrace_op

import headrace
from headrace import SampleError, SchemaError, fn, pipeline_def, types

DURATION = 0.25
# name -> (rate, channels, format, subtype)
FILES = {
    "sweep_16k_mono.wav": (16000, 1, "WAV", "PCM_16"),
    "noise_44k_stereo.wav": (44100, 2, "WAV", "PCM_16"),
    "float_22k_stereo.wav": (22050, 2, "WAV", "FLOAT"),
    "sweep_8k_mono.flac": (8000, 1, "FLAC", "PCM_16"),
    "sweep_22k_stereo.flac": (22050, 2, "FLAC", "PCM_24"),
    "sweep_22k_mono.ogg": (22050, 1, "OGG", "VORBIS"),
    "sweep_44k_stereo.ogg": (44100, 2, "OGG", "VORBIS"),
}
BAD = ("truncated.flac", "lying.wav", "empty.wav", "notes.txt")


def _signal(rate: int, channels: int, seed: int) -> np.ndarray:
    """A log sine sweep from 60 Hz to 0.45 of the rate, then uniform noise on the other channels."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * DURATION) + seed) / rate
    f0, f1 = 60.0, 0.45 * rate
    sweep = 0.6 * np.sin(2 * np.pi * f0 * DURATION / np.log(f1 / f0) * (np.exp(t / DURATION * np.log(f1 / f0)) - 1))
    columns = [sweep] + [rng.uniform(-0.5, 0.5, t.size) for _ in range(channels - 1)]
    return np.stack(columns, axis=1)


@pytest.fixture(scope="module")
def audio_dir(tmp_path_factory):
    """The files of FILES and the bad files of BAD."""
    root = tmp_path_factory.mktemp("audio")
    for seed, (name, (rate, channels, fmt, subtype)) in enumerate(FILES.items()):
        sf.write(root / name, _signal(rate, channels, seed), rate, format=fmt, subtype=subtype)
    flac = (root / "sweep_8k_mono.flac").read_bytes()
    (root / "truncated.flac").write_bytes(flac[:len(flac) // 2])
    lying = bytearray((root / "sweep_16k_mono.wav").read_bytes())
    data = lying.find(b"data")
    struct.pack_into("<I", lying, data + 4, 10 * len(lying))  # the data chunk claims ten times the file
    (root / "lying.wav").write_bytes(bytes(lying))
    (root / "empty.wav").write_bytes(b"")
    (root / "notes.txt").write_text("this is a text file, not audio\n" * 20)
    return root


def dali_test(test):
    """ops_support's marks of a test against DALI's CPU build (marker dali, skipped without it)."""
    for mark in needs_dali:
        test = mark(test)
    return test


def _paths(audio_dir, names=tuple(FILES)) -> list[str]:
    return [str(audio_dir / name) for name in names]


def _decode(api, paths: list[str], sample_rates=None, **kwargs) -> list[list[np.ndarray]]:
    """decoders.audio over the files in `api` (headrace or nvidia.dali): [audio samples, rate samples]."""
    rates = None if sample_rates is None else [np.array(r, np.float32) for r in sample_rates]

    @api.pipeline_def(batch_size=len(paths), num_threads=1, device_id=None, seed=1)
    def pipe():
        encoded, _ = api.fn.readers.file(files=paths)
        extra = {} if rates is None else {"sample_rate": api.fn.external_source(source=lambda: rates, batch=True)}
        return tuple(api.fn.decoders.audio(encoded, **extra, **kwargs))

    p = pipe()
    if api is not headrace:
        p.build()
    outs = p.run()
    return [[np.array(o.at(i)) for i in range(len(paths))] for o in outs]


def _dali_kwargs(kwargs: dict) -> dict:
    from nvidia.dali import types as dali_types

    return {k: getattr(dali_types, v.name) if isinstance(v, types.DALIDataType) else v for k, v in kwargs.items()}


def _assert_like_dali(name: str, ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (name, ours.shape, theirs.shape, ours.dtype)
    if name.endswith(".ogg"):
        tolerance = {"float32": 1e-6, "int16": 1, "int32": 4096}[ours.dtype.name]
        np.testing.assert_allclose(ours.astype(np.float64), theirs, atol=tolerance, rtol=0, err_msg=name)
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=name)


# decoders.audio

DECODE_CASES = [
    {},
    {"downmix": True},
    {"dtype": types.INT16},
    {"dtype": types.INT32, "downmix": True},
    {"dtype": types.INT16, "downmix": True},
    {"sample_rate": 16000.0},
    {"sample_rate": 22050.0, "downmix": True, "dtype": types.INT16, "quality": 0.0},
    {"sample_rate": 8000.0, "quality": 100.0},
]


@pytest.mark.parametrize("kwargs", DECODE_CASES, ids=lambda k: ",".join(f"{a}={v}" for a, v in k.items()) or "default")
@dali_test
def test_decode_matches_dali(audio_dir, kwargs):
    paths = _paths(audio_dir)
    from nvidia import dali

    ours = _decode(headrace, paths, **kwargs)
    theirs = _decode(dali, paths, **_dali_kwargs(kwargs))
    for name, a, b in zip(FILES, ours[0], theirs[0], strict=True):
        _assert_like_dali(name, a, b)
    for a, b in zip(ours[1], theirs[1], strict=True):
        assert a.dtype == np.float32 and a.shape == () and a == b


@dali_test
def test_per_sample_sample_rate_matches_dali(audio_dir):
    from nvidia import dali

    paths = _paths(audio_dir)
    rates = [16000, 16000, 8000, 44100, 11025, 22050, 16000]  # some equal to the file's: not resampled
    ours = _decode(headrace, paths, rates, downmix=True)
    theirs = _decode(dali, paths, rates, downmix=True)
    for name, a, b in zip(FILES, ours[0], theirs[0], strict=True):
        _assert_like_dali(name, a, b)
    assert [float(r) for r in ours[1]] == [float(r) for r in theirs[1]] == rates


def test_shapes_rates_and_values_of_a_wav(audio_dir):
    """Mono stays 2-D, (samples, 1), without downmix; 16-bit samples decode to x / 32768 exactly."""
    paths = _paths(audio_dir, ["sweep_16k_mono.wav", "noise_44k_stereo.wav"])
    audio, rates = _decode(headrace, paths)
    pcm = [sf.read(p, dtype="int16", always_2d=True)[0] for p in paths]
    assert [a.shape for a in audio] == [p.shape for p in pcm] and pcm[0].shape[1] == 1 and pcm[1].shape[1] == 2
    for a, p in zip(audio, pcm, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, p.astype(np.float32) / 32768)
    assert [float(r) for r in rates] == [16000.0, 44100.0]
    mixed, _ = _decode(headrace, paths, downmix=True, dtype=types.INT16)
    assert mixed[0].shape == (pcm[0].shape[0],) and mixed[0].dtype == np.int16
    np.testing.assert_array_equal(mixed[0], pcm[0][:, 0])
    half = np.float32(0.5)
    expected = (pcm[1][:, 0] / np.float32(32768) * half + pcm[1][:, 1] / np.float32(32768) * half) * np.float32(32767)
    np.testing.assert_array_equal(mixed[1], np.where(expected >= 0, np.floor(expected + 0.5),
                                                     np.ceil(expected - 0.5)).astype(np.int16))


@pytest.mark.parametrize("bad", BAD)
def test_bad_file_is_an_error_naming_op_sample_and_file(audio_dir, bad):
    paths = _paths(audio_dir, ["sweep_16k_mono.wav", bad])
    with pytest.raises(SampleError) as info:
        _decode(headrace, paths)
    message = str(info.value)
    assert "decoders.audio" in message and "sample 1" in message and bad in message, message
    assert info.value.source.endswith(bad)


@pytest.mark.filterwarnings("ignore:headrace. batch:RuntimeWarning")
def test_bad_files_skipped_with_on_error_skip(audio_dir):
    names = ["sweep_16k_mono.wav", "truncated.flac", "sweep_8k_mono.flac", "lying.wav", "noise_44k_stereo.wav",
             "notes.txt", "sweep_22k_mono.ogg", "empty.wav"]

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        encoded, labels = fn.readers.file(files=_paths(audio_dir, names), name="Reader")
        audio, _ = fn.decoders.audio(encoded, on_error="skip", downmix=True)
        return audio, labels

    p = pipe()
    seen = []
    for _ in range(4):  # one epoch: 8 slots, the bad files' slots given the next good ones or repeats
        audio, labels = p.run()
        seen += [int(np.asarray(labels.at(i))[0]) for i in range(len(labels))]
        assert all(np.asarray(audio.at(i)).size for i in range(len(audio)))
    assert set(seen) == {0, 2, 4, 6}
    assert {os.path.basename(s.file) for s in p.skipped} == set(BAD)


# audio_resample


def _signals(dtype: str, channels: int | None, lengths=(1000, 517, 3), seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        shape = (n,) if channels is None else (n, channels)
        if dtype == "float32":
            out.append(rng.uniform(-1.1, 1.1, shape).astype(np.float32))
        else:
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype))
    return out


def _assert_resampled(ours: list[np.ndarray], theirs: list[np.ndarray]) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        tolerance = 2e-7 if a.dtype.kind == "f" else 1
        np.testing.assert_allclose(a.astype(np.float64), b, atol=tolerance, rtol=0)


RESAMPLE_RATIOS = [dict(in_rate=44100.0, out_rate=16000.0), dict(in_rate=8000.0, out_rate=22050.0),
                   dict(scale=1.7, quality=0.0), dict(out_length=333, quality=100.0), dict(scale=0.0),
                   dict(in_rate=16000.0, out_rate=16000.0)]


@pytest.mark.parametrize("ratio", RESAMPLE_RATIOS, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
@pytest.mark.parametrize("channels", [None, 1, 2])
@dali_test
def test_resample_matches_dali(ratio, channels):
    batch = _signals("float32", channels)
    _assert_resampled(run_headrace_op("audio_resample", batch, **ratio), run_dali_op("audio_resample", batch, **ratio))


@pytest.mark.parametrize("source", ["int16", "uint8", "int32", "uint16", "float32"])
@pytest.mark.parametrize("target", [None, "FLOAT", "INT16", "UINT8", "UINT32"])
@dali_test
def test_resample_type_conversions_match_dali(source, target):
    from nvidia.dali import types as dali_types

    batch = _signals(source, 2, lengths=(300, 41))
    ratio = dict(in_rate=22050.0, out_rate=16000.0)
    ours = run_headrace_op("audio_resample", batch, **ratio, **({"dtype": getattr(types, target)} if target else {}))
    theirs = run_dali_op("audio_resample", batch, **ratio,
                         **({"dtype": getattr(dali_types, target)} if target else {}))
    _assert_resampled(ours, theirs)


@dali_test
def test_resample_per_sample_rates_match_dali():
    batch = _signals("float32", None)
    rates = {"in_rate": [np.array(r, np.float32) for r in (44100, 8000, 3)],
             "out_rate": [np.array(r, np.float32) for r in (16000, 16000, 7)]}
    _assert_resampled(run_headrace_op("audio_resample", batch, arg_inputs=rates),
                      run_dali_op("audio_resample", batch, arg_inputs=rates))


@pytest.mark.parametrize("quality, tolerance", [(0.0, 5e-3), (50.0, 3e-4), (100.0, 3e-4)])
@pytest.mark.parametrize("in_rate, out_rate", [(16000, 44100), (16000, 22050), (44100, 16000)])
def test_resample_agrees_with_soxr_on_band_limited_audio(quality, tolerance, in_rate, out_rate):
    """Tones below both Nyquist rates come out as soxr's very-high-quality resampler gives them, away from the
    edges (DALI's sinc has no low-pass of its own, so content above the new Nyquist rate is left out here)."""
    soxr = pytest.importorskip("soxr")
    t = np.arange(in_rate) / in_rate
    tones = sum(a * np.sin(2 * np.pi * f * t + p) for a, f, p in ((0.3, 440, 0), (0.2, 1234.5, 1), (0.1, 3000, 2)))
    signal = tones.astype(np.float32)
    (ours,) = run_headrace_op("audio_resample", [signal], in_rate=float(in_rate), out_rate=float(out_rate),
                              quality=quality)
    reference = soxr.resample(signal, in_rate, out_rate, quality="VHQ")
    assert ours.shape == reference.shape == (out_rate,)
    np.testing.assert_allclose(ours[300:-300], reference[300:-300], atol=tolerance)


@pytest.mark.parametrize("kwargs, message", [
    (dict(scale=2.0, out_length=10), "one way"),
    (dict(in_rate=2.0), "together"),
    ({}, "one way"),
    (dict(scale=2.0, quality=101.0), "quality"),
])
def test_resample_argument_errors(kwargs, message):
    with pytest.raises(SchemaError, match=message):
        run_headrace_op("audio_resample", [np.zeros(4, np.float32)], **kwargs)


def test_resample_sample_errors_name_the_sample():
    with pytest.raises(SampleError, match="sample 1"):
        run_headrace_op("audio_resample", [np.zeros(4, np.float32), np.zeros((2, 2, 2), np.float32)], scale=2.0)
    with pytest.raises(SampleError, match="must be positive"):
        run_headrace_op("audio_resample", [np.zeros(4, np.float32)], arg_inputs={
            "in_rate": [np.array(0.0, np.float32)], "out_rate": [np.array(1.0, np.float32)]})


def _phase_tables():
    from headrace_kernels.cpu import audio_io_ops

    return audio_io_ops


# (in_rate, out_rate): periods of 1 to 5 blocks, then rates whose period is long or irrational-looking, where
# the bounded table fills and the remaining blocks take the reference loop
TABLE_RATES = [(44100.0, 16000.0), (22050.0, 16000.0), (48000.0, 16000.0), (11025.0, 16000.0), (16000.0, 44100.0),
               (48000.0, 44100.0), (44100.0, 16001.0), (1.0, 1.7), (1.0, float(np.float32(np.pi))), (1000.0, 7.0)]


@pytest.mark.parametrize("rates", TABLE_RATES, ids=lambda r: f"{r[0]:g}-{r[1]:g}")
def test_resample_table_equals_the_reference_loop(rates):
    """The weights table (per block phase) gives the reference loop's bits, mono (four lanes) and multichannel,
    at every quality, on lengths that cut the last block anywhere, with out_length, and across calls that grow
    the table; the table stays within its bound."""
    kernels = _phase_tables()
    rng = np.random.default_rng(int(rates[0] * 7 + rates[1]))
    in_rate, out_rate = rates
    for trial in range(6):
        n = int(rng.integers(0, 60000)) if trial else 3
        channels = [None, 1, 2, 3][trial % 4]
        quality = float(rng.choice([0.0, 50.0, 100.0, rng.uniform(0, 100)]))
        signal = rng.uniform(-1.1, 1.1, (n,) if channels is None else (n, channels)).astype(np.float32)
        out_length = int(rng.integers(0, 3 * n + 5)) if trial == 5 else None
        fast = kernels.resample_float(signal, in_rate, out_rate, quality, out_length)
        reference = kernels.resample_float(signal, in_rate, out_rate, quality, out_length, fast=False)
        assert fast.shape == reference.shape and fast.dtype == reference.dtype == np.float32
        np.testing.assert_array_equal(fast.view(np.uint32), reference.view(np.uint32))
    for table in kernels._phase_tables.values():
        assert table.weights.nbytes <= max(kernels.MAX_PHASE_TABLE_BYTES, table.weights[:1].nbytes)
        assert table.keys.shape[0] <= table.limit


def test_resample_table_periods_and_fallback():
    """44.1k and 22.05k -> 16k repeat every 5 blocks, 48k -> 16k every block; a long period fills the table to its
    bound and its later blocks are computed by the reference loop (phase -1)."""
    kernels = _phase_tables()
    for in_rate, phases in [(44100.0, 5), (22050.0, 5), (48000.0, 1)]:
        phase, weights, *_ = kernels._phase_table(in_rate, 16000.0, 50.0, True, 16000 * 30)
        assert phase.min() >= 0 and weights.shape == (phases, 256, 32)
    phase, weights, *_ = kernels._phase_table(48000.0, 44100.0, 50.0, True, 44100 * 30)
    assert weights.nbytes <= kernels.MAX_PHASE_TABLE_BYTES and (phase < 0).any()
    assert (phase[:weights.shape[0]] >= 0).all()


WAV_SUBTYPES = ["PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE", "PCM_U8", "ULAW"]
WAV_DECODES = [{}, {"dtype": np.int16}, {"dtype": np.int32}, {"downmix_channels": True}, {"sample_rate": 16000.0},
               {"offset_seconds": 0.01, "duration_seconds": 0.02}, {"offset_seconds": 0.005, "dtype": np.int32},
               {"dtype": np.int16, "downmix_channels": True, "sample_rate": 8000.0}]


@pytest.mark.parametrize("subtype", WAV_SUBTYPES)
def test_numpy_wav_reader_equals_soundfile(subtype):
    """Plain PCM WAV read with numpy gives soundfile's samples bit for bit, in every dtype, downmixed, resampled and
    windowed; other encodings and untrusted headers go to soundfile."""
    import io

    kernels = _phase_tables()
    rng = np.random.default_rng(WAV_SUBTYPES.index(subtype))
    for channels in (1, 2, 3):
        signal = rng.uniform(-1.2, 1.2, (int(rng.integers(400, 3000)), channels))
        signal[:4, 0] = [1.0, -1.0, 0.99999, -0.99999]
        buffer = io.BytesIO()
        sf.write(buffer, signal, 22050, format="WAV", subtype=subtype)
        data = buffer.getvalue()
        assert (kernels.parse_pcm_wav(data) is not None) == (subtype in ("PCM_16", "PCM_24", "PCM_32", "FLOAT"))
        for kwargs in WAV_DECODES:
            ours, rate = kernels.decode_audio(data, **kwargs)
            theirs, their_rate = kernels.decode_audio(data, fast_wav=False, **kwargs)
            assert rate == their_rate == 22050 and ours.dtype == theirs.dtype and ours.shape == theirs.shape
            np.testing.assert_array_equal(ours.view(np.uint8), theirs.view(np.uint8))
    odd = bytearray(data)
    struct.pack_into("<H", odd, odd.find(b"fmt ") + 20, 7)  # a block alignment that does not fit the samples
    assert kernels.parse_pcm_wav(bytes(odd)) is None
    lying = bytearray(data)
    struct.pack_into("<I", lying, lying.find(b"data") + 4, 10 * len(lying))
    with pytest.raises(ValueError, match="lying header"):
        kernels.decode_audio(bytes(lying))


# readers.nemo_asr


@pytest.fixture(scope="module")
def manifests(audio_dir):
    """Two manifests: the first with every good file (texts, a window cut by offset/duration, a duration longer
    than its file, one entry without duration or text), a line that is not JSON and one without audio_filepath."""
    entries = [
        {"audio_filepath": "sweep_16k_mono.wav", "duration": 0.25, "text": "hello world"},
        {"audio_filepath": "noise_44k_stereo.wav", "duration": 0.1, "text": "stereo noise"},
        {"audio_filepath": "sweep_8k_mono.flac", "duration": 0.05, "offset": 0.1, "text": "a window"},
        {"audio_filepath": "sweep_22k_mono.ogg", "text": "no duration"},
        {"audio_filepath": "float_22k_stereo.wav", "duration": 9.0, "text": "longer than the file"},
        {"audio_filepath": "sweep_22k_stereo.flac", "duration": 0.2, "text": "ünïcödé"},
        {"audio_filepath": "sweep_44k_stereo.ogg", "duration": 0.25},
    ]
    first, second = audio_dir / "train.json", audio_dir / "more.json"
    lines = [json.dumps({**e, "audio_filepath": str(audio_dir / e["audio_filepath"])}, ensure_ascii=False)
             for e in entries]
    first.write_text("\n".join(lines[:3] + ["this is not json", '{"text": "no path"}'] + lines[3:]) + "\n",
                     encoding="utf-8")
    second.write_text(lines[0] + "\n" + lines[2] + "\n", encoding="utf-8")
    return [str(first), str(second)]


def _nemo(api, batch_size: int, iterations: int, checkpoint=None, **kwargs):
    """(outputs per iteration: a list per output of numpy samples, the reader's meta, the pipeline's checkpoint
    after them (headrace only)); the pipeline is closed, so it prefetches nothing more."""
    options = {"enable_checkpointing": True, "checkpoint": checkpoint} if api is headrace else {}

    @api.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=7, prefetch_queue_depth=1,
                      **options)
    def pipe():
        return tuple(api.fn.readers.nemo_asr(name="Reader", **kwargs))

    p = pipe()
    if api is not headrace:
        p.build()
    try:
        runs = []
        for _ in range(iterations):
            outs = p.run()
            runs.append([[np.array(o.at(i)) for i in range(len(o))] for o in outs])
        return runs, p.reader_meta("Reader"), p.checkpoint() if api is headrace else None
    finally:
        if api is headrace:
            p.close()


NEMO_CASES = [
    dict(read_idxs=True),
    dict(read_sample_rate=False, read_text=False, read_idxs=True, downmix=False),
    dict(max_duration=1.0, min_duration=0.1, sample_rate=16000.0, downmix=False),
    dict(num_shards=2, shard_id=1, dtype=types.INT16, read_idxs=True),
    dict(num_shards=3, shard_id=2, pad_last_batch=True, read_text=False),
]


@pytest.mark.parametrize("kwargs", NEMO_CASES, ids=lambda k: ",".join(f"{a}={v}" for a, v in k.items()))
@dali_test
@pytest.mark.filterwarnings("ignore:readers.nemo_asr")
def test_nemo_asr_matches_dali(manifests, kwargs):
    """The same samples in the same order over three batches of 4 (epochs wrap), every output equal."""
    from nvidia import dali

    ours, meta, _ = _nemo(headrace, 4, 3, manifest_filepaths=manifests, **kwargs)
    theirs, dali_meta, _ = _nemo(dali, 4, 3, manifest_filepaths=manifests, **_dali_kwargs(kwargs))
    assert meta == dali_meta
    for batch_ours, batch_theirs in zip(ours, theirs, strict=True):
        assert len(batch_ours) == len(batch_theirs)
        for output, (a_samples, b_samples) in enumerate(zip(batch_ours, batch_theirs, strict=True)):
            for a, b in zip(a_samples, b_samples, strict=True):
                if output == 0:
                    assert a.shape == b.shape and a.dtype == b.dtype
                    # the OGG entries: DALI's libvorbis build rounds differently (module docstring)
                    np.testing.assert_allclose(a.astype(np.float64), b, atol=4096 if a.dtype.kind == "i" else 1e-6,
                                               rtol=0)
                else:
                    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), (output, a, b)


@pytest.mark.filterwarnings("ignore:readers.nemo_asr")
def test_nemo_asr_outputs(manifests, audio_dir):
    (batch,), _, _ = _nemo(headrace, 9, 1, manifest_filepaths=manifests, read_idxs=True)
    audio, rates, texts, indices = batch
    assert [bytes(t).decode() for t in texts] == ["hello world", "stereo noise", "a window", "no duration",
                                                  "longer than the file", "ünïcödé", "", "hello world", "a window"]
    assert [int(i[0]) for i in indices] == [0, 1, 2, 3, 4, 5, 6, 0, 1]  # per manifest, kept entries only
    assert [float(r) for r in rates] == [16000, 44100, 8000, 22050, 22050, 22050, 44100, 16000, 8000]
    flac, _ = sf.read(audio_dir / "sweep_8k_mono.flac", dtype="float32")
    np.testing.assert_array_equal(audio[2], flac[800:1200])  # offset 0.1 s, duration 0.05 s at 8 kHz
    assert audio[4].shape == (sf.info(audio_dir / "float_22k_stereo.wav").frames,)  # the whole file
    assert audio[1].shape == (4410,) and audio[1].dtype == np.float32  # downmixed by default


def test_nemo_asr_warns_about_skipped_lines(manifests):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _nemo(headrace, 2, 1, manifest_filepaths=manifests[:1])
    messages = [str(w.message) for w in record]
    assert any("line 4: skipping a line that is not a JSON object" in m for m in messages), messages
    assert any("line 5: skipping an entry without an audio_filepath" in m for m in messages), messages


@pytest.mark.filterwarnings("ignore:readers.nemo_asr")
def test_nemo_asr_epochs_and_shards_partition_the_entries(manifests):
    """Two shards of 9 entries (4 and 5) read their halves; shuffled epochs are permutations of the shard."""
    seen = []
    for shard in (0, 1):
        runs, meta, _ = _nemo(headrace, 3, 6, manifest_filepaths=manifests, num_shards=2, shard_id=shard,
                           stick_to_shard=True, random_shuffle=True, read_text=False, read_sample_rate=False,
                           read_idxs=True, downmix=False)
        stream = [(int(i[0]), a.shape) for run in runs for a, i in zip(run[0], run[1], strict=True)]
        size = 4 if shard == 0 else 5
        epochs = [stream[k:k + size] for k in range(0, len(stream) - size + 1, size)]
        assert all(sorted(e) == sorted(epochs[0]) for e in epochs)
        assert epochs[0] != epochs[1] or epochs[1] != epochs[2]  # reshuffled
        assert meta["epoch_size"] == 9 and meta["shard_id"] == shard
        seen += epochs[0]
    assert len(seen) == 9 and len(set(seen)) == 8  # more.json's first entry is train.json's first (index 0, audio)


@pytest.mark.filterwarnings("ignore:readers.nemo_asr")
def test_nemo_asr_checkpoint_resumes(manifests):
    kwargs = dict(manifest_filepaths=manifests, random_shuffle=True, read_idxs=True)
    reference, _, _ = _nemo(headrace, 4, 7, **kwargs)
    _, _, state = _nemo(headrace, 4, 3, **kwargs)
    resumed, _, _ = _nemo(headrace, 4, 4, checkpoint=state, **kwargs)
    for a, b in zip(resumed, reference[3:], strict=True):
        for x_samples, y_samples in zip(a, b, strict=True):
            assert all(np.array_equal(x, y) for x, y in zip(x_samples, y_samples, strict=True))


@pytest.mark.filterwarnings("ignore:readers.nemo_asr", "ignore:headrace. batch:RuntimeWarning")
def test_nemo_asr_bad_files(audio_dir, tmp_path):
    manifest = tmp_path / "bad.json"
    manifest.write_text("\n".join(json.dumps({"audio_filepath": str(audio_dir / n), "text": n})
                                  for n in ["sweep_16k_mono.wav", "truncated.flac", "sweep_8k_mono.flac",
                                            "lying.wav"]) + "\n")
    with pytest.raises(SampleError) as info:
        _nemo(headrace, 2, 1, manifest_filepaths=[str(manifest)])
    assert "readers.nemo_asr" in str(info.value) and "truncated.flac" in str(info.value)
    assert "sample 1" in str(info.value)
    runs, _, _ = _nemo(headrace, 2, 1, manifest_filepaths=[str(manifest)], on_error="skip")
    assert [bytes(t).decode() for t in runs[0][2]] == ["sweep_16k_mono.wav", "sweep_8k_mono.flac"]
    with pytest.raises(SchemaError, match="cannot be read"):
        _nemo(headrace, 2, 1, manifest_filepaths=[str(tmp_path / "missing.json")])
    with pytest.raises(SchemaError, match="cannot be split"):
        _nemo(headrace, 2, 1, manifest_filepaths=[str(manifest)], num_shards=5)
    with pytest.raises(SchemaError, match="random_shuffle cannot both be True"):
        _nemo(headrace, 2, 1, manifest_filepaths=[str(manifest)], shuffle_after_epoch=True, random_shuffle=True)
    missing = tmp_path / "missing_audio.json"
    missing.write_text(json.dumps({"audio_filepath": str(tmp_path / "gone.wav")}) + "\n")
    with pytest.raises(OSError, match=r"readers.nemo_asr \(node 'Reader'\): cannot read .*gone.wav"):
        _nemo(headrace, 1, 1, manifest_filepaths=[str(missing)])


@pytest.mark.filterwarnings("ignore:readers.nemo_asr")
def test_output_specs_say_what_comes_out(audio_dir, manifests):
    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def pipe():
        encoded, _ = fn.readers.file(files=_paths(audio_dir)[:3])
        audio, rate = fn.decoders.audio(encoded, dtype=types.INT16)
        read = fn.readers.nemo_asr(manifest_filepaths=manifests, read_idxs=True, downmix=False)
        return audio, rate, fn.audio_resample(audio, out_length=100, dtype=types.FLOAT), *read

    p = pipe()
    specs = [out.spec for out in p.outputs]
    assert [s.dtype for s in specs] == [np.int16, np.float32, np.float32, np.float32, np.float32, np.uint8, np.int64]
    assert [s.dims for s in specs] == [(-1, -1), (), (100, -1), (-1, -1), (), (-1,), (1,)]
    for spec, batch in zip(specs, p.run(), strict=True):
        assert batch.dtype == spec.dtype
        for i in range(len(batch)):
            shape = np.asarray(batch.at(i)).shape
            assert len(shape) == len(spec.dims) and all(d in (-1, n) for d, n in zip(spec.dims, shape, strict=True))


# GPU


@pytest.mark.gpu
@pytest.mark.parametrize("channels", [None, 2, 3])
@pytest.mark.parametrize("kwargs", [dict(in_rate=44100.0, out_rate=16000.0), dict(scale=2.5, quality=100.0),
                                    dict(out_length=1234, quality=0.0, dtype=types.INT16),
                                    dict(in_rate=22050.0, out_rate=16000.0, dtype=types.UINT8)])
def test_gpu_resample_matches_cpu(channels, kwargs):
    from tests.gpu_helpers import cpu_and_gpu

    for source in ("float32", "int16"):
        batch = _signals(source, channels, lengths=(4000, 517, 3, 1))
        cpu, gpu = cpu_and_gpu(batch, lambda data, device: fn.audio_resample(data, **kwargs))
        _assert_resampled(gpu, cpu)


@pytest.mark.gpu
def test_gpu_resample_same_lengths_and_per_sample_scale():
    from tests.gpu_helpers import cpu_and_gpu

    batch = _signals("float32", 1, lengths=(2048, 2048))
    cpu, gpu = cpu_and_gpu(batch, lambda data, device: fn.audio_resample(data, in_rate=48000.0, out_rate=16000.0))
    _assert_resampled(gpu, cpu)
    scales = [np.array(s, np.float32) for s in (0.5, 3.0)]
    cpu, gpu = cpu_and_gpu(batch, lambda data, device: fn.audio_resample(
        data, scale=fn.external_source(source=lambda: scales, batch=True)))
    _assert_resampled(gpu, cpu)

