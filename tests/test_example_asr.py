"""The ASR example (examples/asr_pipeline.py) on WAV files written here: the pipeline's padded features, lengths and
transcripts, the tiny CTC model's training steps, on the CPU and (marker gpu) on the GPU; and (marker dali) the same
pipeline code with only the import changed, run by DALI's CPU build on the same files.

Tolerance against DALI (dither 0): the time-normalized log-mel features (unit variance) within 5e-3, and within
2e-5 on average (measured: 7e-4 and 4e-6). The FFTs round differently (DALI: float32; headrace: float64 rounded to
float32); the logarithm lifts that to the 1e-4 range only in the mel bands above a resampled 8 kHz file's 4 kHz
Nyquist, whose power is the resampler's leakage. Lengths and transcripts are exact. GPU against CPU: the same bounds
(cuFFT in float32, as DALI's FFT)."""

from __future__ import annotations

import json
import math
import types as pytypes
from pathlib import Path

import numpy as np
import pytest
import torch
from oprun import needs_dali

EXAMPLE = Path(__file__).parents[1] / "examples" / "asr_pipeline.py"
IMPORT = "from headrace import fn, pipeline_def, types\n"
RATES = (8000, 16000, 22050, 44100, 16000, 8000, 44100, 22050, 16000, 16000)
BATCH = 4


def _example(import_line: str = IMPORT):
    """The example as a module, its headrace import replaced by `import_line`."""
    source = EXAMPLE.read_text()
    assert source.count(IMPORT) == 1
    module = pytypes.ModuleType(f"asr_example_{abs(hash(import_line))}")
    module.__file__ = str(EXAMPLE)
    exec(compile(source.replace(IMPORT, import_line), str(EXAMPLE), "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def example():
    return _example()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """10 WAV files (8 to 44.1 kHz, 16-bit and float, mono and stereo, 0.3-1.1 s of noisy tones) and their NeMo
    manifest; returns (manifest path, [(samples at 16 kHz, text)])."""
    import soundfile

    root = tmp_path_factory.mktemp("asr")
    rng = np.random.default_rng(21)
    entries, lines = [], []
    for i, rate in enumerate(RATES):
        n = int(rate * (0.3 + 0.08 * i))
        t = np.arange(n) / rate
        tone = 0.25 * np.sin(2 * np.pi * (150 + 90 * i) * t) + 0.04 * rng.standard_normal(n)
        data = tone if i % 3 else np.stack([tone, 0.5 * tone], axis=1)
        path = root / f"utt{i}.wav"
        soundfile.write(path, data.astype(np.float32), rate, subtype="FLOAT" if i % 4 == 3 else "PCM_16")
        text = ["hello world", "go left", "stop", "yes no", "it's up"][i % 5]
        lines.append(json.dumps({"audio_filepath": str(path), "duration": n / rate, "text": text}))
        entries.append((math.ceil(n * 16000 / rate), text))  # decoded length after resampling to 16 kHz
    manifest = root / "manifest.json"
    manifest.write_text("\n".join(lines) + "\n")
    return str(manifest), entries


def _run(module, manifest: str, device: str, dither: float, batches: int) -> list[list[np.ndarray]]:
    """`batches` batches of the example's pipeline as numpy arrays (features, features_len, transcript, its len)."""
    pipe = module.asr_pipeline(manifest, device=device, dither=dither, batch_size=BATCH, num_threads=2,
                               device_id=0 if device == "gpu" else None, seed=5)
    pipe.build()
    out = []
    for _ in range(batches):
        results = pipe.run()
        batch = []
        for result in results:
            if type(result).__name__ == "TensorListGPU":  # headrace's and DALI's
                result = result.as_cpu()
            batch.append(np.stack([np.asarray(result.at(i)) for i in range(len(result))]))
        out.append(batch)
    return out


def _check_batches(batches, entries) -> None:
    """Shapes, types, lengths and transcripts of the batches against the files they were read from."""
    for b, (features, features_len, transcript, transcript_len) in enumerate(batches):
        assert features.dtype == np.float32 and features.ndim == 3 and features.shape[:2] == (BATCH, 64)
        assert features_len.dtype == np.int64 and transcript.dtype == np.uint8
        assert features.shape[2] % 16 == 0 and features.shape[2] - features_len[:, 1].max() < 16
        for i in range(BATCH):
            samples, text = entries[min(b * BATCH + i, len(entries) - 1)]  # pad_last_batch repeats the last
            frames = samples // 160 + 1  # centred windows of step 160
            assert features_len[i].tolist() == [64, frames]
            valid = features[i, :, :frames]
            assert np.isfinite(valid).all() and not features[i, :, frames:].any()  # padding is zeros
            np.testing.assert_allclose(valid.mean(axis=1), 0, atol=1e-4)  # normalized over time, per mel band
            np.testing.assert_allclose(valid.std(axis=1), 1, atol=1e-3)
            assert transcript_len[i].tolist() == [len(text)]
            assert bytes(transcript[i, :len(text)]).decode() == text and not transcript[i, len(text):].any()


def test_cpu_pipeline_pads_features_and_gives_lengths(example, corpus):
    manifest, entries = corpus
    _check_batches(_run(example, manifest, "cpu", 1e-5, 3), entries)


def _trains(example, manifest: str, device: str) -> dict:
    torch.manual_seed(0)
    model = example.tiny_ctc_model(64)
    before = [p.detach().clone() for p in model.parameters()]
    result = example.train(manifest, device, batch_size=BATCH, model=model)
    assert result["batches"] == 3 and result["samples"] == 10  # PARTIAL: 4 + 4 + 2, every utterance once
    assert all(math.isfinite(loss) and loss > 0 for loss in result["losses"])
    after = [p.detach().cpu() for p in result["model"].parameters()]
    assert all(not torch.equal(a, b) for a, b in zip(before, after, strict=True))  # every parameter was trained
    return result


def test_cpu_training_steps_run(example, corpus):
    _trains(example, corpus[0], "cpu")


def test_main_prints_a_summary(example, corpus, capsys):
    result = example.main(["--manifest", corpus[0], "--steps", "2"])
    assert result["batches"] == 2
    assert "8 utterances in 2 batches, CTC loss" in capsys.readouterr().out


def _assert_features_close(got, want) -> None:
    for g, w in zip(got, want, strict=True):
        assert [a.shape for a in g] == [a.shape for a in w]
        np.testing.assert_array_equal(g[1], w[1])
        np.testing.assert_array_equal(g[2], w[2])
        np.testing.assert_array_equal(g[3], w[3])
        difference = np.abs(g[0].astype(np.float64) - w[0])
        assert difference.max() <= 5e-3 and difference.mean() <= 2e-5, (difference.max(), difference.mean())


@needs_dali
@pytest.mark.dali
def test_same_code_with_dali_imports_gives_the_same_features(example, corpus):
    manifest, _ = corpus
    dali = _example("from nvidia.dali import fn, pipeline_def, types\n")
    _assert_features_close(_run(example, manifest, "cpu", 0.0, 3), _run(dali, manifest, "cpu", 0.0, 3))


@pytest.mark.gpu
def test_gpu_pipeline_matches_the_cpu_one(example, corpus):
    manifest, entries = corpus
    on_gpu = _run(example, manifest, "gpu", 1e-5, 3)
    _check_batches(on_gpu, entries)
    _assert_features_close(_run(example, manifest, "gpu", 0.0, 3), _run(example, manifest, "cpu", 0.0, 3))


@pytest.mark.gpu
def test_gpu_training_steps_run(example, corpus):
    _trains(example, corpus[0], "gpu")
