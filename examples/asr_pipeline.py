"""The ASR preprocessing of NVIDIA's Jasper / QuartzNet DALI examples, feeding a tiny CTC model's training steps.

    python examples/asr_pipeline.py                          # CPU: generates a few WAV files and a NeMo manifest
    python examples/asr_pipeline.py --device gpu             # preprocessing (from the dither on) and model on GPU 0
    python examples/asr_pipeline.py --manifest train.json    # your own NeMo manifest (audio_filepath, text, ...)

The pipeline is written as for DALI; only the import differs (`from nvidia.dali import fn, pipeline_def, types`).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from headrace import fn, pipeline_def, types
from headrace_torch import DALIGenericIterator, LastBatchPolicy

OUTPUTS = ["features", "features_len", "transcript", "transcript_len"]
ALPHABET = " abcdefghijklmnopqrstuvwxyz'"  # CTC labels 1..28; 0 is the blank


@pipeline_def
def asr_pipeline(manifest, device="cpu", sample_rate=16000, dither=1e-5, preemph_coeff=0.97, nfft=512,
                 window_size=0.02, window_stride=0.01, nfeatures=64, pad_align=16, shuffle=False, shard_id=0,
                 num_shards=1):
    audio, text = fn.readers.nemo_asr(manifest_filepaths=[manifest], name="Reader", dtype=types.FLOAT,
                                      downmix=True, sample_rate=float(sample_rate), read_sample_rate=False,
                                      read_text=True, random_shuffle=shuffle, shard_id=shard_id,
                                      num_shards=num_shards, pad_last_batch=True)
    if device == "gpu":
        audio = audio.gpu()

    if dither > 0.0:
        audio = audio + fn.random.normal(audio) * dither

    audio = fn.preemphasis_filter(audio, preemph_coeff=preemph_coeff)
    spec = fn.spectrogram(audio, nfft=nfft, window_length=window_size * sample_rate,
                          window_step=window_stride * sample_rate)
    mel_spec = fn.mel_filter_bank(spec, sample_rate=sample_rate, nfilter=nfeatures, normalize=True)
    log_features = fn.to_decibels(mel_spec, multiplier=np.log(10), reference=1.0, cutoff_db=math.log(1e-20))
    log_features_len = fn.shapes(log_features)  # (nfeatures, frames) of each sample, before padding
    log_features = fn.normalize(log_features, axes=[1])
    log_features = fn.pad(log_features, axes=[1], fill_value=0, align=pad_align)

    transcript_len = fn.shapes(text)
    transcript = fn.pad(text, axes=[0], fill_value=0)
    return log_features, log_features_len, transcript, transcript_len


def tiny_ctc_model(nfeatures: int) -> nn.Module:
    """Two 1-D convolutions over time, one label distribution per frame (QuartzNet's shape, a thousandth its size)."""
    return nn.Sequential(nn.Conv1d(nfeatures, 32, 11, padding=5), nn.ReLU(), nn.Conv1d(32, 32, 11, padding=5),
                         nn.ReLU(), nn.Conv1d(32, len(ALPHABET) + 1, 1))


def labels_of(transcript: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded UTF-8 transcripts as CTC targets (characters outside the alphabet dropped) and their lengths."""
    table = torch.zeros(256, dtype=torch.long)
    for i, char in enumerate(ALPHABET):
        table[ord(char)] = i + 1
    rows = [table[transcript[i, :int(n)].long().cpu()] for i, n in enumerate(lengths.reshape(-1))]
    rows = [r[r > 0] for r in rows]
    return torch.cat(rows), torch.tensor([len(r) for r in rows])


def train(manifest: str, device: str = "cpu", batch_size: int = 4, steps: int = 0, dither: float = 1e-5,
          model: nn.Module | None = None) -> dict:
    """Training steps of a tiny CTC model (`model`, default a new one) on the pipeline's batches: one epoch, or
    `steps` batches."""
    on_gpu = device == "gpu"
    pipe = asr_pipeline(manifest, device=device, dither=dither, batch_size=batch_size, num_threads=2,
                        device_id=0 if on_gpu else None, seed=7)
    loader = DALIGenericIterator(pipe, OUTPUTS, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL,
                                 dynamic_shape=True, auto_reset=True)
    model_device = "cuda" if on_gpu else "cpu"
    model = (model if model is not None else tiny_ctc_model(64)).to(model_device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ctc = nn.CTCLoss(zero_infinity=True)
    losses, samples = [], 0
    for batch in loader:
        out = batch[0]
        features = out["features"].to(model_device)  # (batch, nfeatures, padded frames)
        frames = out["features_len"][:, 1].to(model_device)  # each sample's frames before padding
        targets, target_lengths = labels_of(out["transcript"], out["transcript_len"])
        log_probs = model(features).permute(2, 0, 1).log_softmax(-1)  # (frames, batch, labels)
        loss = ctc(log_probs, targets.to(model_device), frames, target_lengths.to(model_device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        samples += features.shape[0]
        if steps and len(losses) == steps:
            break
    return {"batches": len(losses), "samples": samples, "losses": losses, "model": model}


def write_tone_manifest(folder: str | Path, count: int = 12, seed: int = 0) -> str:
    """`count` WAV files of noisy tone sweeps (8, 16, 22.05 and 44.1 kHz, mono and stereo, 0.4-1.2 s) and a NeMo
    manifest naming them with short transcripts; returns the manifest's path."""
    import soundfile

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    words = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
    lines = []
    for i in range(count):
        rate = (8000, 16000, 22050, 44100)[i % 4]
        seconds = float(rng.uniform(0.4, 1.2))
        t = np.arange(int(rate * seconds)) / rate
        tone = 0.3 * np.sin(2 * np.pi * (200 + 600 * t / seconds) * t) + 0.05 * rng.standard_normal(t.size)
        channels = 1 + i % 2
        data = np.stack([tone * (0.5 + 0.5 * c) for c in range(channels)], axis=1).astype(np.float32)
        path = folder / f"utt{i:03d}.wav"
        soundfile.write(path, data, rate, subtype="PCM_16")
        text = " ".join(rng.choice(words, 2))
        lines.append(json.dumps({"audio_filepath": str(path.resolve()), "duration": len(t) / rate, "text": text}))
    manifest = folder / "manifest.json"
    manifest.write_text("\n".join(lines) + "\n")
    return str(manifest)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", help="a NeMo manifest (default: generate a few WAV files and one)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="where the preprocessing runs")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many batches (0: one epoch)")
    parser.add_argument("--dither", type=float, default=1e-5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        manifest = args.manifest or write_tone_manifest(scratch)
        result = train(manifest, args.device, args.batch_size, args.steps, args.dither)
    losses = result["losses"]
    print(f"{result['samples']} utterances in {result['batches']} batches, CTC loss {losses[0]:.3f} -> "
          f"{losses[-1]:.3f} (preprocessing on {args.device})")
    return result


if __name__ == "__main__":
    main()
