"""Audio read from a webdataset shard and decoded by decoders.audio (the issue's "readers.webdataset also feeding the
decoder"): WAV and FLAC members of one tar, mono and stereo, two sample rates; the decoded, downmixed and resampled
audio equals DALI's CPU build on the same archive (float32 within 1e-5, the resampler's stated tolerance) and, for
the native rate, the samples soundfile wrote."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest
import soundfile
from oprun import needs_dali

from headrace import fn, pipeline_def, types

RATES = (16000, 22050)


def _tone(rate: int, seconds: float, channels: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * seconds)) / rate
    wave = 0.4 * np.sin(2 * np.pi * (220 + 40 * seed) * t) + 0.05 * rng.standard_normal(t.size)
    data = np.stack([wave, 0.5 * wave], axis=1)[:, :channels]
    return (data * 32767).astype(np.int16)


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    """A tar of 6 samples: 'NNNN.wav' or 'NNNN.flac', plus 'NNNN.cls'; returns (path, the int16 audio written)."""
    path = tmp_path_factory.mktemp("audio") / "audio-000.tar"
    written = []
    with tarfile.open(path, "w") as archive:
        for n in range(6):
            rate, channels = RATES[n % 2], 1 + n % 3 // 2
            audio = _tone(rate, 0.3 + 0.05 * n, channels, n)
            buffer = io.BytesIO()
            kind = "flac" if n % 3 == 0 else "wav"
            soundfile.write(buffer, audio, rate, format=kind.upper(), subtype="PCM_16")
            for name, data in ((f"{n:04d}.{kind}", buffer.getvalue()), (f"{n:04d}.cls", str(n).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            written.append((audio, rate))
    return path, written


def _decode(api, path, **decoder_args):
    @api.pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=1)
    def pipe():
        audio, label = api.fn.readers.webdataset(paths=[str(path)], ext=["wav;flac", "cls"],
                                                 dtypes=[api.types.UINT8, api.types.UINT8])
        decoded, rate = api.fn.decoders.audio(audio, dtype=api.types.FLOAT, **decoder_args)
        return decoded, rate, label

    p = pipe()
    p.build()
    return [[np.asarray(o[i]) for i in range(len(o))] for o in p.run()]


def test_native_rate_gives_the_written_samples(shard):
    path, written = shard
    decoded, rates, labels = _decode(_Headrace, path)
    for i, ((audio, rate), got) in enumerate(zip(written, decoded, strict=True)):
        assert float(rates[i]) == rate and bytes(labels[i]).decode() == str(i)
        want = audio.astype(np.float32) / 32768
        np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-6)


@needs_dali
@pytest.mark.dali
@pytest.mark.parametrize("decoder_args", [dict(), dict(downmix=True, sample_rate=16000.0)])
def test_matches_dali(shard, decoder_args):
    import nvidia.dali as dali

    path, _ = shard
    ours, theirs = _decode(_Headrace, path, **decoder_args), _decode(dali, path, **decoder_args)
    for out_ours, out_theirs in zip(ours, theirs, strict=True):
        for a, b in zip(out_ours, out_theirs, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, atol=1e-5)


class _Headrace:
    fn, types, pipeline_def = fn, types, staticmethod(pipeline_def)
