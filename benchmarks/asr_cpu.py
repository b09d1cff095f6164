"""ASR (Jasper / QuartzNet) preprocessing on the CPU, side by side in one process: headrace, DALI's CPU build and,
where it can be imported, torchaudio's equivalent transforms.

The pipeline is written once (`asr_pipeline(fn, types, ...)`) and built with either library's `pipeline_def`:
readers.nemo_asr (decode, downmix, resample to 16 kHz) -> [dither] -> preemphasis 0.97 -> spectrogram (nfft 512,
window 320, step 160, power 2) -> mel_filter_bank (64 filters, Slaney) -> to_decibels (natural log, cutoff 1e-20)
-> normalize over time -> pad to the batch's longest, plus the lengths (fn.shapes). Batch 32, 2 threads. The
torchaudio peer is a DataLoader (2 worker processes) doing the same with soundfile, `transforms.Resample`
(lowpass_filter_width 16, as DALI's 16 lobes at quality 50), `functional.preemphasis`, `transforms.MelSpectrogram`
(Slaney mel and norm), log, per-feature normalization over time and padding in the collate.

The data is generated: WAV files of speech-like noise (band-limited noise with a syllable-rate envelope, int16) of
2-16 s at 22.05 and 44.1 kHz, and their NeMo manifest. Every round runs each library's warm-up batches and then
its timed whole epochs (each epoch is all the files, so every library does the same work); the order alternates
(A B, B A, ...). A fresh process per library then measures import, build + first batch, and peak RSS (VmHWM).
`--ops` instead times every step alone on one thread, both libraries fed the same batch.

    python benchmarks/asr_cpu.py                          # 256 files, 6 rounds, headrace and DALI (+ torchaudio)
    python benchmarks/asr_cpu.py --ops                    # ms per batch of each op, headrace and DALI, 1 thread
    python benchmarks/asr_cpu.py --device gpu [--quick]   # GPU 0: DALI's GPU build, torchaudio on cuda

`--device gpu` builds the same pipeline function with the reader (decode, downmix, resample) on the CPU and
`.gpu()` after it, as NVIDIA's Jasper / QuartzNet DALI pipelines do, `device_id=0`, 8 threads, 4 warm-up batches
(headrace computes up to 3 batches ahead, DALI 2, while the other library is timed), 3 timed epochs per round; every
batch counts once its GPU work is done (a device-wide synchronize). The torchaudio peer decodes in
spawned DataLoader workers and runs `Resample`, `Spectrogram`, `MelScale`, `AmplitudeToDB`, preemphasis and the
normalization on the whole batch on cuda. The fresh-process probe adds the GPU memory each library added (the most
cudaMemGetInfo showed after any batch, over the CUDA context's). A library that does not import or fails is left
out with the reason; the last lines (SUMMARY) give each library's samples/s. `--quick`: 128 files, 4 rounds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from rounds import Runner, best_ms_per_batch, timed_epoch
from tqdm import tqdm

LIBRARIES = ("headrace", "dali", "torchaudio")
TARGET_RATE = 16000
NFFT, WINDOW, STEP, NFILTER, PREEMPH = 512, 320, 160, 64, 0.97


# ----------------------------------------------------------------------------------------------------------- data


def speech_like(rng: np.random.Generator, seconds: float, rate: int) -> np.ndarray:
    """int16 noise that looks like speech to the features: a few formant-like bands, a 3-6 Hz syllable envelope
    and pauses."""
    n = int(seconds * rate)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1.0 / rate)
    shape = np.zeros_like(freqs)
    for centre, width in ((rng.uniform(300, 800), 150), (rng.uniform(1000, 2200), 300), (rng.uniform(2400, 3500),
                                                                                           400)):
        shape += np.exp(-0.5 * ((freqs - centre) / width) ** 2)
    shape += 0.05 / (1.0 + freqs / 4000.0)  # a little broadband hiss
    signal = np.fft.irfft(spectrum * shape, n)
    t = np.arange(n) / rate
    envelope = np.clip(np.sin(2 * np.pi * rng.uniform(3, 6) * t + rng.uniform(0, 2 * np.pi)), 0, None)
    envelope *= np.clip(np.sin(2 * np.pi * 0.3 * t + rng.uniform(0, 2 * np.pi)) + 0.6, 0, 1)  # pauses
    signal *= envelope
    signal *= 0.5 * 32767 / max(np.abs(signal).max(), 1e-9)
    return signal.astype(np.int16)


def make_dataset(folder: Path, files: int, min_s: float, max_s: float, rates: list[int], seed: int) -> Path:
    """`files` WAVs in `folder` and their NeMo manifest (absolute paths); made once per set of arguments."""
    import soundfile as sf

    manifest = folder / "manifest.json"
    if manifest.is_file():
        return manifest
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lines = []
    for i in tqdm(range(files), desc="writing WAVs", unit="file"):
        rate = rates[i % len(rates)]
        seconds = float(rng.uniform(min_s, max_s))
        path = folder / f"utt_{i:05d}_{rate}.wav"
        sf.write(path, speech_like(rng, seconds, rate), rate, subtype="PCM_16")
        lines.append(json.dumps({"audio_filepath": str(path.resolve()), "duration": round(seconds, 4),
                                 "text": f"utterance {i}"}))
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


# ------------------------------------------------------------------------------------------------------- pipeline


def asr_pipeline(fn, types, manifest: str, dither: float = 0.0, device: str = "cpu"):
    """The Jasper / QuartzNet preprocessing, for headrace's or DALI's `fn` and `types`: (padded features
    (batch, 64, frames), frames per sample). device "gpu": decode and resample on the CPU (the reader), everything
    after it on the GPU, as NVIDIA's Jasper / QuartzNet DALI pipelines do."""
    audio = fn.readers.nemo_asr(manifest_filepaths=[manifest], sample_rate=float(TARGET_RATE), downmix=True,
                                dtype=types.FLOAT, read_sample_rate=False, read_text=False, random_shuffle=True,
                                name="Reader")
    if device == "gpu":
        audio = audio.gpu()
    if dither:
        audio = audio + fn.random.normal(audio) * dither
    audio = fn.preemphasis_filter(audio, preemph_coeff=PREEMPH)
    spec = fn.spectrogram(audio, nfft=NFFT, window_length=WINDOW, window_step=STEP)
    mel = fn.mel_filter_bank(spec, sample_rate=TARGET_RATE, nfilter=NFILTER)
    log = fn.to_decibels(mel, multiplier=math.log(10), reference=1.0, cutoff_db=math.log(1e-20))
    lengths = fn.shapes(log, dtype=types.INT32)
    norm = fn.normalize(log, axes=[1])
    return fn.pad(norm, fill_value=0), lengths


class PipelineRunner(Runner):
    """headrace or DALI, built from `asr_pipeline` with that library's module."""

    def __init__(self, name: str, manifest: Path, batch_size: int, threads: int, seed: int, dither: float,
                 device: str = "cpu"):
        self.name = name
        self.sync = device_synchronizer() if device == "gpu" else None
        if name == "headrace":
            from headrace import fn, pipeline_def, types
        else:
            from nvidia.dali import fn, pipeline_def, types

        @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=0 if device == "gpu" else None,
                      seed=seed)
        def asr():
            return asr_pipeline(fn, types, str(manifest), dither, device)

        self.pipe = asr()
        self.pipe.build()
        self.batches = -(-self.pipe.epoch_size("Reader") // batch_size)

    def epoch(self) -> Iterator[int]:
        for _ in range(self.batches):
            features, _lengths = self.pipe.run()
            if self.sync is not None:  # the batch counts once its GPU work is done
                self.sync()
            yield len(features)

    def close(self) -> None:
        if hasattr(self.pipe, "close"):
            self.pipe.close()
        del self.pipe


class TorchaudioRunner(Runner):
    """soundfile + torchaudio transforms in a DataLoader with `threads` worker processes."""

    name = "torchaudio"
    partial_warmup = False  # leaving a DataLoader epoch part way makes the next epoch wait for the abandoned batches

    def __init__(self, manifest: Path, batch_size: int, threads: int, seed: int, dither: float):
        import torch

        torch.manual_seed(seed)
        entries = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
        self.loader = torch.utils.data.DataLoader(
            TorchaudioDataset([e["audio_filepath"] for e in entries], dither), batch_size=batch_size, shuffle=True,
            num_workers=threads, persistent_workers=threads > 0, collate_fn=pad_collate)

    def epoch(self) -> Iterator[int]:
        for features, _lengths in self.loader:
            yield len(features)

    def close(self) -> None:
        del self.loader


class TorchaudioDataset:
    """One sample: decode (soundfile), downmix, resample to 16 kHz, dither, preemphasis, mel power spectrogram,
    log with DALI's cutoff, normalized per feature over time: (64, frames) float32."""

    def __init__(self, paths: list[str], dither: float):
        self.paths, self.dither = paths, dither
        self.resamplers: dict[int, Callable] = {}
        self.mel = None

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        import soundfile as sf
        import torch
        import torchaudio

        data, rate = sf.read(self.paths[index], dtype="float32", always_2d=True)
        audio = torch.from_numpy(data.mean(axis=1) if data.shape[1] > 1 else data[:, 0])
        if rate != TARGET_RATE:
            if rate not in self.resamplers:
                self.resamplers[rate] = torchaudio.transforms.Resample(rate, TARGET_RATE, lowpass_filter_width=16)
            audio = self.resamplers[rate](audio)
        if self.dither:
            audio = audio + torch.randn_like(audio) * self.dither
        audio = torchaudio.functional.preemphasis(audio, PREEMPH)
        if self.mel is None:
            self.mel = torchaudio.transforms.MelSpectrogram(
                sample_rate=TARGET_RATE, n_fft=NFFT, win_length=WINDOW, hop_length=STEP, n_mels=NFILTER, power=2.0,
                center=True, pad_mode="reflect", norm="slaney", mel_scale="slaney")
        log = torch.log(torch.clamp(self.mel(audio), min=1e-20))
        mean, std = log.mean(dim=1, keepdim=True), log.std(dim=1, unbiased=False, keepdim=True)
        return torch.where(std > 0, (log - mean) / std, 0.0)


def pad_collate(samples):
    import torch

    lengths = torch.tensor([s.shape[1] for s in samples], dtype=torch.int32)
    out = torch.zeros(len(samples), samples[0].shape[0], int(lengths.max()))
    for i, s in enumerate(samples):
        out[i, :, :s.shape[1]] = s
    return out, lengths


def make_runner(name: str, args: argparse.Namespace, manifest: Path) -> Runner:
    if args.device == "gpu":
        if name == "torchaudio":
            return TorchaudioGpuRunner(manifest, args.batch_size, args.threads, args.seed, args.dither)
        return PipelineRunner(name, manifest, args.batch_size, args.threads, args.seed, args.dither, "gpu")
    if name == "torchaudio":
        return TorchaudioRunner(manifest, args.batch_size, args.threads, args.seed, args.dither)
    return PipelineRunner(name, manifest, args.batch_size, args.threads, args.seed, args.dither)


# ------------------------------------------------------------------------------------------- fresh-process probe


def peak_rss_mib(pid: int | str = "self") -> float:
    """A process's peak RSS (VmHWM, MiB): its own, unlike ru_maxrss, which a child inherits across fork and exec."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child_pids() -> list[int]:
    pids = []
    for task in Path("/proc/self/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def first_batch(args: argparse.Namespace, manifest: Path):
    """Import `--probe`'s library, build its loader and take one batch: (start, imported, first batch) times, the
    runner and its epoch's batch iterator."""
    before = time.perf_counter()
    if args.probe == "headrace":
        import headrace  # noqa: F401
    elif args.probe == "dali":
        import nvidia.dali  # noqa: F401
    else:
        import torchaudio  # noqa: F401
    imported = time.perf_counter()
    runner = make_runner(args.probe, args, manifest)
    batches = runner.epoch()
    next(batches)
    return before, imported, time.perf_counter(), runner, batches


def probe(args: argparse.Namespace, manifest: Path) -> None:
    """In a process of its own: import, build + first batch and peak RSS over `--probe-epochs` epochs, as JSON."""
    before, imported, first, runner, batches = first_batch(args, manifest)
    for _ in batches:
        pass
    for _ in range(args.probe_epochs - 1):
        for _ in runner.epoch():
            pass
    workers = [peak_rss_mib(pid) for pid in child_pids()]  # torchaudio's DataLoader workers
    print(json.dumps({"import_s": imported - before, "build_first_batch_s": first - imported,
                      "peak_rss_mib": peak_rss_mib(), "workers_peak_rss_mib": workers}))
    runner.close()


def fresh_process_figures(name: str, args: argparse.Namespace, manifest: Path) -> dict | None:
    command = [sys.executable, __file__, "--probe", name, "--manifest", str(manifest), "--batch-size",
               str(args.batch_size), "--threads", str(args.threads), "--seed", str(args.seed), "--dither",
               str(args.dither), "--probe-epochs", str(args.probe_epochs)]
    if args.device == "gpu":
        command += ["--device", "gpu"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"  {name}: the fresh-process probe failed:\n{done.stderr[-2000:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------- per-op times


def op_stages(fn):
    """(name, the op applied to the fed node, which stage's output feeds it) of every step of the pipeline."""
    return [
        ("decode (readers.nemo_asr, no resampling)", None, None),
        ("resample to 16 kHz (audio_resample)", lambda x, r: fn.audio_resample(x, in_rate=r, out_rate=16000.0),
         "decoded"),
        ("preemphasis_filter", lambda x, r: fn.preemphasis_filter(x, preemph_coeff=PREEMPH), "audio"),
        ("spectrogram", lambda x, r: fn.spectrogram(x, nfft=NFFT, window_length=WINDOW, window_step=STEP), "audio"),
        ("mel_filter_bank", lambda x, r: fn.mel_filter_bank(x, sample_rate=TARGET_RATE, nfilter=NFILTER), "spec"),
        ("to_decibels", lambda x, r: fn.to_decibels(x, multiplier=math.log(10), reference=1.0,
                                                    cutoff_db=math.log(1e-20)), "mel"),
        ("normalize (axes=[1])", lambda x, r: fn.normalize(x, axes=[1]), "log"),
        ("pad", lambda x, r: fn.pad(x, fill_value=0), "log"),
        ("nothing (external_source only)", lambda x, r: x, "log"),
    ]


def stage_inputs(manifest: Path, batch_size: int) -> dict[str, list[np.ndarray]]:
    """The first batch of the manifest at every step, computed with DALI's CPU build (the inputs of op_times)."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=1)
    def steps():
        decoded, rate = fn.readers.nemo_asr(manifest_filepaths=[str(manifest)], downmix=True, dtype=types.FLOAT,
                                            read_sample_rate=True, read_text=False)
        audio = fn.audio_resample(decoded, in_rate=rate, out_rate=float(TARGET_RATE))
        pre = fn.preemphasis_filter(audio, preemph_coeff=PREEMPH)
        spec = fn.spectrogram(pre, nfft=NFFT, window_length=WINDOW, window_step=STEP)
        mel = fn.mel_filter_bank(spec, sample_rate=TARGET_RATE, nfilter=NFILTER)
        log = fn.to_decibels(mel, multiplier=math.log(10), reference=1.0, cutoff_db=math.log(1e-20))
        return decoded, rate, audio, spec, mel, log

    pipe = steps()
    pipe.build()
    names = ("decoded", "rate", "audio", "spec", "mel", "log")
    return {name: [np.array(out.at(i)) for i in range(len(out))] for name, out in zip(names, pipe.run(), strict=True)}


def op_times(args: argparse.Namespace, manifest: Path, libraries: list[str]) -> None:
    """ms per batch of every step alone, on one thread, each library fed the same batch (external_source)."""
    inputs = stage_inputs(manifest, args.batch_size)
    seconds = sum(len(a) for a in inputs["audio"]) / TARGET_RATE
    print(f"\nper-op time, 1 thread, batch {args.batch_size} ({seconds:.0f} s of audio), ms per batch "
          f"(best of {args.op_repeats} runs of {args.op_iters} batches)")
    table: dict[str, dict[str, float]] = {}
    for lib in libraries:
        if lib == "headrace":
            from headrace import fn, pipeline_def, types
        else:
            from nvidia.dali import fn, pipeline_def, types
        for name, op, feed in op_stages(fn):
            if op is None:
                @pipeline_def(batch_size=args.batch_size, num_threads=1, device_id=None, seed=1)
                def pipe():
                    return fn.readers.nemo_asr(manifest_filepaths=[str(manifest)], downmix=True, dtype=types.FLOAT,
                                               read_sample_rate=False, read_text=False)
            else:
                def pipe_fn(op=op, batch=inputs[feed]):
                    data = fn.external_source(source=lambda: batch, batch=True)
                    rate = fn.external_source(source=lambda: [np.array(r, np.float32) for r in inputs["rate"]],
                                              batch=True)
                    return op(data, rate)
                pipe = pipeline_def(batch_size=args.batch_size, num_threads=1, device_id=None, seed=1)(pipe_fn)
            built = pipe()
            built.build()
            table.setdefault(name, {})[lib] = best_ms_per_batch(built, args.op_iters, args.op_repeats)
    for name, times in table.items():
        ratio = f"   DALI / headrace {times['dali'] / times['headrace']:.2f}x" if len(times) == 2 else ""
        print(f"  {name:42s} " + "  ".join(f"{lib} {ms:8.2f}" for lib, ms in times.items()) + ratio)


# ------------------------------------------------------------------------------------------------------ GPU mode


def device_synchronizer() -> Callable[[], None]:
    """Wait on the host for all of GPU 0's work (every stream, whichever library queued it)."""
    try:
        import cupy
    except ImportError:
        import torch

        return torch.cuda.synchronize
    return cupy.cuda.runtime.deviceSynchronize


def gpu_used_mib() -> float:
    """GPU 0's memory in use (MiB), by every process and library: total - free of cudaMemGetInfo."""
    try:
        import cupy
    except ImportError:
        import torch

        free, total = torch.cuda.mem_get_info(0)
    else:
        free, total = cupy.cuda.runtime.memGetInfo()
    return (total - free) / 2**20


def gpu_name() -> str:
    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - only a label
        return "?"


class DecodeDataset:
    """One sample for the torchaudio GPU peer: decoded (soundfile) and downmixed on the CPU, (float32 audio, rate)."""

    def __init__(self, paths: list[str]):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        import soundfile as sf

        data, rate = sf.read(self.paths[index], dtype="float32", always_2d=True)
        return (data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]), rate


def rate_groups_collate(samples):
    """A batch as [(rate, padded audio (n, longest), lengths)], one entry per sampling rate (in the workers)."""
    import torch

    groups: dict[int, list[np.ndarray]] = {}
    for audio, rate in samples:
        groups.setdefault(rate, []).append(audio)
    out = []
    for rate, audios in groups.items():
        lengths = torch.tensor([len(a) for a in audios], dtype=torch.int64)
        padded = torch.zeros(len(audios), int(lengths.max()))
        for i, audio in enumerate(audios):
            padded[i, :len(audio)] = torch.from_numpy(np.ascontiguousarray(audio))
        out.append((rate, padded, lengths))
    return out


class TorchaudioGpuRunner(Runner):
    """torchaudio's transforms on cuda:0, a whole batch at a time: a DataLoader with `threads` worker processes
    (spawned: the parent has CUDA) decodes, downmixes and pads each sampling rate's samples (pinned memory); then on
    the GPU `Resample` (lowpass_filter_width 16) per rate, dither, preemphasis, `Spectrogram` (power 2),
    `MelScale` (Slaney), `AmplitudeToDB` (as natural log, cutoff 1e-20), normalize per feature over each sample's
    own frames and zeros past them. The one difference from per-sample features: a sample shorter than the batch's
    longest has its last frame or two computed over zeros instead of its reflection."""

    name = "torchaudio"
    partial_warmup = False  # leaving a DataLoader epoch part way makes the next epoch wait for the abandoned batches

    def __init__(self, manifest: Path, batch_size: int, threads: int, seed: int, dither: float):
        import torch
        import torchaudio

        torch.manual_seed(seed)
        self.torch, self.transforms, self.dither = torch, torchaudio.transforms, dither
        self.device = torch.device("cuda", 0)
        entries = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
        self.loader = torch.utils.data.DataLoader(
            DecodeDataset([e["audio_filepath"] for e in entries]), batch_size=batch_size, shuffle=True,
            num_workers=threads, persistent_workers=threads > 0, collate_fn=rate_groups_collate, pin_memory=True,
            multiprocessing_context="spawn" if threads > 0 else None)
        self.resamplers: dict[int, Callable] = {}
        self.spectrogram = torchaudio.transforms.Spectrogram(
            n_fft=NFFT, win_length=WINDOW, hop_length=STEP, power=2.0, center=True, pad_mode="reflect").to(self.device)
        self.mel_scale = torchaudio.transforms.MelScale(
            n_mels=NFILTER, sample_rate=TARGET_RATE, n_stft=NFFT // 2 + 1, norm="slaney", mel_scale="slaney"
        ).to(self.device)
        self.to_db = torchaudio.transforms.AmplitudeToDB(stype="power", top_db=None).to(self.device)
        self.to_db.amin = 1e-20  # DALI's cutoff (torchaudio's default clamp is 1e-10)

    def features(self, groups):
        """(features (batch, 64, frames) on the GPU, frames per sample) of one collated batch."""
        torch = self.torch
        with torch.inference_mode():
            parts, all_lengths = [], []
            for rate, padded, lengths in groups:
                audio = padded.to(self.device, non_blocking=True)
                if rate != TARGET_RATE:
                    if rate not in self.resamplers:
                        self.resamplers[rate] = self.transforms.Resample(rate, TARGET_RATE,
                                                                         lowpass_filter_width=16).to(self.device)
                    audio = self.resamplers[rate](audio)
                    lengths = (lengths * TARGET_RATE + rate - 1) // rate  # ceil, as Resample's output length
                parts.append(audio)
                all_lengths.append(lengths)
            lengths = torch.cat(all_lengths)
            longest = int(lengths.max())
            audio = torch.cat([torch.nn.functional.pad(p[:, :longest], (0, longest - min(p.shape[1], longest)))
                               for p in parts])
            lengths = lengths.to(self.device)
            if self.dither:
                audio = audio + torch.randn_like(audio) * self.dither
            audio = audio * (torch.arange(longest, device=self.device) < lengths[:, None])  # resampler tails off
            audio = torch.cat([audio[:, :1], audio[:, 1:] - PREEMPH * audio[:, :-1]], dim=1)  # preemphasis
            spec = self.spectrogram(audio)  # (batch, 257, longest // STEP + 1)
            log = self.to_db(self.mel_scale(spec)) * (math.log(10) / 10)  # 10 log10(x) -> ln(x)
            frames = lengths // STEP + 1
            mask = (torch.arange(log.shape[2], device=self.device) < frames[:, None])[:, None, :]
            count = frames[:, None, None].to(log.dtype)
            mean = (log * mask).sum(dim=2, keepdim=True) / count
            std = ((((log - mean) * mask) ** 2).sum(dim=2, keepdim=True) / count).sqrt()
            features = torch.where(std > 0, (log - mean) / std, 0.0) * mask
        return features, frames

    def epoch(self) -> Iterator[int]:
        for groups in self.loader:
            features, _frames = self.features(groups)
            self.torch.cuda.synchronize()
            yield len(features)

    def close(self) -> None:
        del self.loader


def probe_gpu(args: argparse.Namespace, manifest: Path) -> None:
    """--probe in GPU mode: import, build + first batch (GPU work done), host peak RSS and the GPU memory it added
    (the most seen after any batch over `--probe-epochs` epochs, over the CUDA context's), as JSON."""
    context = gpu_used_mib()  # creates the primary CUDA context, which cupy, torch and DALI share
    before, imported, first, runner, batches = first_batch(args, manifest)
    peak = gpu_used_mib()
    for _ in batches:
        peak = max(peak, gpu_used_mib())
    for _ in range(args.probe_epochs - 1):
        for _ in runner.epoch():
            peak = max(peak, gpu_used_mib())
    workers = [peak_rss_mib(pid) for pid in child_pids()  # torchaudio's DataLoader workers, not spawn's tracker
               if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
    print(json.dumps({"import_s": imported - before, "build_first_batch_s": first - imported,
                      "peak_rss_mib": peak_rss_mib(), "workers_peak_rss_mib": workers,
                      "gpu_peak_mib": peak - context, "gpu_context_mib": context}))
    runner.close()


def importable(module: str) -> str | None:
    """Why `module` does not import here, or None when it does."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - an ImportError, or an OSError from a C++ extension built for another torch
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None


def warm_up(runner: Runner, batches: int) -> None:
    """`batches` untimed batches, across epochs when an epoch has fewer (torchaudio's DataLoader: one whole epoch)."""
    if not runner.partial_warmup:
        for _ in runner.epoch():
            pass
        return
    done = 0
    while done < batches:
        before = done
        for _ in runner.epoch():
            done += 1
            if done == batches:
                break
        if done == before:  # an empty epoch
            return


def main_gpu(args: argparse.Namespace, manifest: Path) -> None:
    """--device gpu: every library's pipeline with decode on the CPU and the rest on GPU 0, in alternating rounds."""
    import traceback

    entries = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    total_s = sum(e["duration"] for e in entries)
    order = list(args.only)
    if "dali" in order and (why := importable("nvidia.dali")):
        print(f"DALI not available: nvidia.dali does not import ({why}); the rest runs without it")
        order.remove("dali")
    if "torchaudio" in order and (why := importable("torchaudio")):
        print(f"torchaudio not available ({why}); the rest runs without it")
        order.remove("torchaudio")
    print(f"GPU mode, GPU 0: {gpu_name()}; decode + resample on the CPU, the features on the GPU")
    print(f"data: {len(entries)} files, {total_s / 60:.1f} min of audio ({manifest}); batch {args.batch_size}, "
          f"{args.threads} threads/workers, {os.cpu_count()} CPUs, dither {args.dither:g}; {args.rounds} rounds of: "
          f"per library {args.warmup_batches} warm-up batches (torchaudio: an epoch), {args.epochs} timed epoch(s)")
    versions = {"headrace": "headrace", "dali": "nvidia.dali", "torchaudio": "torchaudio"}
    print("versions: " + ", ".join(f"{n} {getattr(importlib.import_module(versions[n]), '__version__', '?')}"
                                   for n in order))
    context = gpu_used_mib()
    print(f"GPU memory in use before building: {context:.0f} MiB (the CUDA context and any other process)")

    runners: dict[str, Runner] = {}
    for name in list(order):
        start = time.perf_counter()
        try:
            runners[name] = make_runner(name, args, manifest)
        except Exception:  # noqa: BLE001 - one library's failure should not cost the others' figures
            print(f"{name}: the build FAILED, left out:")
            traceback.print_exc()
            order.remove(name)
            continue
        print(f"{name}: built in {time.perf_counter() - start:.2f} s (this process)")

    totals = {name: [0, 0.0] for name in order}
    per_round: dict[str, list[float]] = {name: [] for name in order}
    peak_used = gpu_used_mib()
    for round_ in range(args.rounds):
        rotated = order if round_ % 2 == 0 else order[::-1]
        for name in list(rotated):
            runner = runners[name]
            try:
                warm_up(runner, args.warmup_batches)
                samples, seconds = 0, 0.0
                for epoch in range(args.epochs):
                    n, s = timed_epoch(runner, f"round {round_} {name} epoch {epoch}", unit="utt")
                    samples, seconds = samples + n, seconds + s
            except Exception:  # noqa: BLE001
                print(f"round {round_}: {name} FAILED, left out from here on:")
                traceback.print_exc()
                order.remove(name)
                del per_round[name], totals[name]
                continue
            peak_used = max(peak_used, gpu_used_mib())
            totals[name][0] += samples
            totals[name][1] += seconds
            per_round[name].append(samples / seconds)
            print(f"round {round_}: {name:11s} {samples / seconds:8.1f} samples/s ({samples} samples, {seconds:.2f} s, "
                  f"{total_s * samples / len(entries) / seconds:7.1f} s of audio per s)")
    for runner in runners.values():
        try:
            runner.close()
        except Exception:  # noqa: BLE001
            traceback.print_exc()

    medians = {name: statistics.median(per_round[name]) for name in order if per_round[name]}
    print(f"\nthroughput on the GPU, median of {args.rounds} rounds (all timed epochs together in brackets)")
    for name in medians:
        samples, seconds = totals[name]
        print(f"  {name:11s} {medians[name]:8.1f} samples/s  [{samples / seconds:.1f}]  per round: "
              + " ".join(f"{r:.1f}" for r in per_round[name]))
    ratio_text: dict[str, str] = {}
    if "headrace" in medians:
        for peer in ("dali", "torchaudio"):
            if peer in medians:
                ratios = [a / b for a, b in zip(per_round["headrace"], per_round[peer], strict=True)]
                ratio = medians["headrace"] / medians[peer]
                ratio_text[peer] = f"{ratio:.2f}x {peer}"
                print(f"  headrace / {peer:11s} {ratio:.2f}x by medians "
                      f"(per-round ratios {min(ratios):.2f}-{max(ratios):.2f}, median {statistics.median(ratios):.2f})")
    print(f"  this process (all libraries): peak RSS {peak_rss_mib():.0f} MiB; GPU memory in use, most seen after a "
          f"round {peak_used:.0f} MiB ({peak_used - context:+.0f} MiB over the start)")

    figures: dict[str, dict] = {}
    if not args.no_probe:
        print(f"\nfresh process per library: import, build + first batch, peak RSS and GPU memory over "
              f"{args.probe_epochs} epoch(s)")
        for name in medians:
            found = fresh_process_figures(name, args, manifest)
            if found:
                figures[name] = found
                workers = found["workers_peak_rss_mib"]
                workers = (f" + {len(workers)} workers' " + " + ".join(f"{w:.0f}" for w in workers) + " MiB"
                           if workers else "")
                print(f"  {name:11s} import {found['import_s']:.2f} s, build + first batch "
                      f"{found['build_first_batch_s']:.2f} s, GPU memory +{found['gpu_peak_mib']:.0f} MiB over the "
                      f"CUDA context ({found['gpu_context_mib']:.0f} MiB in use before), peak RSS "
                      f"{found['peak_rss_mib']:.0f} MiB{workers}")

    print(f"\nSUMMARY (GPU mode, {gpu_name()}, batch {args.batch_size}, {args.threads} threads/workers, "
          f"{len(entries)} files, median of {args.rounds} alternating rounds)")
    for name in medians:
        extra = ""
        if name == "headrace" and ratio_text:
            extra += "  = " + ", ".join(ratio_text.values())
        if name in figures:
            extra += (f"  | build + first batch {figures[name]['build_first_batch_s']:.2f} s, "
                      f"GPU memory +{figures[name]['gpu_peak_mib']:.0f} MiB")
        print(f"SUMMARY {name:11s} gpu {medians[name]:9.1f} samples/s{extra}")
    for name in LIBRARIES:
        if name in args.only and name not in medians:
            print(f"SUMMARY {name:11s} gpu  not run (see above)")


# ----------------------------------------------------------------------------------------------------------- main


def torchaudio_importable() -> str | None:
    """Why torchaudio cannot be the third peer here, or None when it imports."""
    try:
        import torchaudio  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - an ImportError, or an OSError from a C++ extension built for another torch
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", type=Path, help="a NeMo manifest to read; default: generate the data")
    parser.add_argument("--files", type=int, default=256, help="WAV files to generate without --manifest")
    parser.add_argument("--seconds", type=float, nargs=2, default=(2.0, 16.0), metavar=("MIN", "MAX"))
    parser.add_argument("--rates", type=int, nargs="+", default=[22050, 44100], help="sampling rates, in turn")
    parser.add_argument("--workdir", type=Path, default=Path("build/bench"), help="where generated data goes")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, help="headrace/DALI threads, torchaudio workers (default: 2; 8 on "
                        "the GPU)")
    parser.add_argument("--dither", type=float, default=0.0, help="dither (e.g. 1e-5): fn.random.normal(audio)")
    parser.add_argument("--warmup-batches", type=int,
                        help="untimed batches before each timed stretch (torchaudio: one whole epoch); default 2, on "
                        "the GPU 4: more than the batches a pipeline computes ahead while the other one is timed")
    parser.add_argument("--epochs", type=int, help="timed epochs per library per round (default: 1; 3 on the GPU)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds; the order alternates (A B, B A, ...)")
    parser.add_argument("--only", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--probe-epochs", type=int, default=2, help="epochs of the fresh-process RSS probe")
    parser.add_argument("--no-probe", action="store_true", help="skip the fresh-process build/RSS figures")
    parser.add_argument("--ops", action="store_true", help="only time each op alone (1 thread), headrace and DALI")
    parser.add_argument("--op-iters", type=int, default=5, help="batches per timed run of --ops")
    parser.add_argument("--op-repeats", type=int, default=3, help="timed runs of --ops per op (the best counts)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: decode on the CPU, the rest on GPU 0 (DALI's GPU build, torchaudio on cuda)")
    parser.add_argument("--quick", action="store_true",
                        help="128 files, 4 rounds, 1 probe epoch (overrides --files, --rounds, --probe-epochs)")
    parser.add_argument("--probe", choices=LIBRARIES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    gpu = args.device == "gpu"
    if args.threads is None:
        args.threads = 8 if gpu else 2
    if args.warmup_batches is None:
        args.warmup_batches = 4 if gpu else 2
    if args.epochs is None:
        args.epochs = 3 if gpu else 1
    if args.quick:
        args.files, args.rounds, args.probe_epochs = 128, 4, 1
    if gpu and args.ops:
        parser.error("--ops times the CPU ops only: leave out --device gpu")

    manifest = args.manifest
    if manifest is None:
        rates = "-".join(str(r) for r in args.rates)
        folder = args.workdir / f"asr_{args.files}_{args.seconds[0]:g}-{args.seconds[1]:g}s_{rates}"
        manifest = make_dataset(folder, args.files, args.seconds[0], args.seconds[1], args.rates, args.seed)
    if args.probe:
        (probe_gpu if gpu else probe)(args, manifest)
        return
    if gpu:
        main_gpu(args, manifest)
        return
    if args.ops:
        op_times(args, manifest, [lib for lib in args.only if lib != "torchaudio"])
        return

    entries = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    total_s = sum(e["duration"] for e in entries)
    order = list(args.only)
    if "torchaudio" in order and (why := torchaudio_importable()):
        print(f"torchaudio left out: it does not import here ({why})")
        order.remove("torchaudio")
    print(f"data: {len(entries)} files, {total_s / 60:.1f} min of audio ({manifest}); batch {args.batch_size}, "
          f"{args.threads} threads/workers, {os.cpu_count()} CPUs, dither {args.dither:g}; {args.rounds} rounds of: "
          f"per library {args.warmup_batches} warm-up batches, {args.epochs} timed epoch(s)")
    versions = {"headrace": "headrace", "dali": "nvidia.dali", "torchaudio": "torchaudio"}
    print("versions: " + ", ".join(f"{n} {getattr(importlib.import_module(versions[n]), '__version__', '?')}"
                                   for n in order))

    # torchaudio first: its workers fork before any other library has threads
    order.sort(key=lambda n: n != "torchaudio")
    runners: dict[str, Runner] = {}
    for name in order:
        start = time.perf_counter()
        runners[name] = make_runner(name, args, manifest)
        print(f"{name}: built in {time.perf_counter() - start:.2f} s (this process)")

    totals = {name: [0, 0.0] for name in order}
    per_round: dict[str, list[float]] = {name: [] for name in order}
    for round_ in range(args.rounds):
        rotated = order if round_ % 2 == 0 else order[::-1]
        for name in rotated:
            runner = runners[name]
            timed_epoch(runner, f"round {round_} {name} warm-up", args.warmup_batches if runner.partial_warmup
                        else None, unit="utt")
            samples, seconds = 0, 0.0
            for epoch in range(args.epochs):
                n, s = timed_epoch(runner, f"round {round_} {name} epoch {epoch}", unit="utt")
                samples, seconds = samples + n, seconds + s
            totals[name][0] += samples
            totals[name][1] += seconds
            per_round[name].append(samples / seconds)
            print(f"round {round_}: {name:11s} {samples / seconds:8.1f} samples/s ({samples} samples, {seconds:.2f} s, "
                  f"{total_s * samples / len(entries) / seconds:7.1f} s of audio per s)")
    for runner in runners.values():
        runner.close()

    medians = {name: statistics.median(per_round[name]) for name in order}
    print(f"\nthroughput, median of {args.rounds} rounds (all timed epochs together in brackets)")
    for name in order:
        images, seconds = totals[name]
        print(f"  {name:11s} {medians[name]:8.1f} samples/s  [{images / seconds:.1f}]  per round: "
              + " ".join(f"{r:.1f}" for r in per_round[name]))
    if "headrace" in medians:
        for peer in ("dali", "torchaudio"):
            if peer in medians:
                ratios = [a / b for a, b in zip(per_round["headrace"], per_round[peer], strict=True)]
                print(f"  headrace / {peer:11s} {medians['headrace'] / medians[peer]:.2f}x by medians "
                      f"(per-round ratios {min(ratios):.2f}-{max(ratios):.2f}, median {statistics.median(ratios):.2f})")
    print(f"  peak RSS of this process (all libraries): {peak_rss_mib():.0f} MiB")

    if not args.no_probe:
        print(f"\nfresh process per library: import, build + first batch, peak RSS over {args.probe_epochs} epochs")
        for name in order:
            figures = fresh_process_figures(name, args, manifest)
            if figures:
                workers = figures["workers_peak_rss_mib"]
                workers = (f" + {len(workers)} workers' " + " + ".join(f"{w:.0f}" for w in workers) + " MiB"
                           if workers else "")
                print(f"  {name:11s} import {figures['import_s']:.2f} s, build + first batch "
                      f"{figures['build_first_batch_s']:.2f} s, peak RSS {figures['peak_rss_mib']:.0f} MiB{workers}")


if __name__ == "__main__":
    main()
