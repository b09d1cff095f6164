"""Soak test of the served preprocess model (issue 26): a real tritonserver, `--concurrency` gRPC clients sending one
image per request for `--seconds` (or `--requests`), a `--bad` fraction of them corrupt. Every good answer must be
bit-equal to `Pipeline.load(pipeline.json).run` on the image alone, every bad request must get its own error, and
memory must stay flat: every `--sample-every` requests the RSS of tritonserver and of the model's Python stubs, the
/dev/shm regions the server maps and (KIND_GPU) the GPU memory are sampled; growth is counted from the sample at a
third of the run (pools and allocators have warmed up by then) to the last.

    python scripts/serving_soak.py [--seconds 60] [--concurrency 32] [--bad 0.1] [--kind KIND_CPU|KIND_GPU]
                                   [--instances 1] [--sample-every 1000] [--requests N] [--json FILE]

Exits 1 when a good request failed or differed, a bad one was answered, or memory grew by more than
`--max-growth-mib` MiB and `--max-growth-pct` percent at once. Client and server share this machine's cores."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from triton_helpers import distinct_jpegs, jpegs, served_preprocess  # noqa: E402

from headrace.pipeline import Pipeline  # noqa: E402
from headrace.serving import start_server, triton_config  # noqa: E402
from headrace.serving.server import child_pids  # noqa: E402

MIB = 1 << 20
REQUEST_TIMEOUT_S = 120


def bad_inputs() -> dict[str, np.ndarray]:
    """Corrupt images that the decoder must refuse (each checked offline before the run)."""
    good = jpegs(1)[0]
    rng = np.random.default_rng(7)
    return {
        "not a JPEG": np.frombuffer(b"\xff\xd8\xff\xe0 not a JPEG at all " * 8, np.uint8),
        "random bytes after SOI": np.concatenate([good[:2], rng.integers(0, 256, 3000, dtype=np.uint8)]),
        "header only": good[:200].copy(),
        "garbage": rng.integers(0, 256, 1000, dtype=np.uint8),
    }


def write_model(repo: Path, kind: str, instances: int, background: bool = False) -> Path:
    """model_repository/preprocess as scripts/make_model_repository.py builds it, for `kind` (answered from a worker
    thread with `background`); returns the pipeline file."""
    target = repo / "preprocess"
    (target / "1").mkdir(parents=True)
    pipe = served_preprocess(device="gpu" if kind == "KIND_GPU" else "cpu")
    pipeline_file = target / "1" / "pipeline.json"
    pipe.serialize(pipeline_file)
    (target / "config.pbtxt").write_text(triton_config(
        pipe, "preprocess", 32, kind, instances, parameters={"respond_in_background": "true"} if background else None))
    return pipeline_file


def references(pipeline_file: Path, good: list[np.ndarray], bad: dict[str, np.ndarray], on_gpu: bool) -> list:
    """Each good image's output with the pipeline file run offline on it alone; checks that every bad input
    fails offline too."""
    pipe = Pipeline.load(pipeline_file, device_id=0 if on_gpu else None)
    try:
        out = []
        for image in good:
            batch = pipe.run(images=[image])[0]
            out.append(np.array((batch.as_cpu() if on_gpu else batch).as_array()[0]))
        for name, data in bad.items():
            try:
                pipe.run(images=[data])
            except Exception:  # noqa: BLE001 - what the soak expects
                pipe.clear_fed_inputs()
                continue
            raise SystemExit(f"the bad input '{name}' decodes offline: not a bad input")
        return out
    finally:
        pipe.close()


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def shm_bytes(pid: int) -> int:
    """Bytes allocated in the /dev/shm files the process maps (Triton's Python backend regions)."""
    paths = set()
    try:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/dev/shm/"):
                paths.add(parts[5].removesuffix(" (deleted)"))
    except OSError:
        return 0
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_blocks * 512
        except OSError:
            continue
    return total


def _nvidia_smi(query: str) -> list[list[str]]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [[part.strip() for part in line.split(",")] for line in out.strip().splitlines() if line.strip()]


def gpu_memory(pids: list[int]) -> tuple[int | None, int | None]:
    """GPU memory used by these processes, and by the whole of GPU 0 (a container may hide the processes), from
    nvidia-smi; None where it does not tell."""
    used = {int(row[0]): int(row[1]) for row in _nvidia_smi("--query-compute-apps=pid,used_memory") if len(row) == 2
            and row[0].isdigit() and row[1].isdigit()}
    device = [int(row[0]) for row in _nvidia_smi("--query-gpu=memory.used") if row and row[0].isdigit()]
    ours = sum(used.get(pid, 0) for pid in pids)
    return (ours * MIB if ours else None), (device[0] * MIB if device else None)


def memory_sample(server_pid: int, stubs: list[int], gpu: bool) -> dict:
    """RSS (and its shared-memory part) of tritonserver and its stubs, /dev/shm mapped by the server, GPU memory."""
    sample = {"server_rss": _status_kib(server_pid, "VmRSS") * 1024,
              "server_shmem": _status_kib(server_pid, "RssShmem") * 1024,
              "stub_rss": sum(_status_kib(pid, "VmRSS") for pid in stubs) * 1024,
              "dev_shm": shm_bytes(server_pid)}
    if gpu:
        sample["gpu"], sample["gpu_device"] = gpu_memory([server_pid, *stubs])
    return sample


@dataclass
class Tally:
    """What the clients saw, and the memory samples taken every `every` requests."""

    every: int
    sampler: object
    start: float = field(default_factory=time.perf_counter)
    done: int = 0
    good: int = 0
    bad: int = 0
    good_errors: list = field(default_factory=list)
    mismatches: int = 0
    bad_answered: int = 0
    samples: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, is_bad: bool, error: str | None, equal: bool) -> None:
        with self.lock:
            self.done += 1
            if is_bad:
                self.bad += 1
                self.bad_answered += error is None
            else:
                self.good += 1
                if error is not None:
                    self.good_errors.append(error)
                elif not equal:
                    self.mismatches += 1
            take = self.done % self.every == 0
            done = self.done
        if take:
            self.samples.append({"requests": done, "seconds": time.perf_counter() - self.start, **self.sampler()})


def run_load(url: str, good: list[np.ndarray], want: list[np.ndarray], bad: list[np.ndarray], bad_fraction: float,
             concurrency: int, tally: Tally, seconds: float | None = None, requests: int | None = None,
             seed: int = 0) -> None:
    """`concurrency` gRPC clients, one image per request, until `seconds` passed or `requests` were sent; request k
    is bad with probability `bad_fraction` (its own seeded draw, so runs repeat)."""
    import tritonclient.grpc as grpc
    from tritonclient.utils import InferenceServerException

    counter = itertools.count()
    end = time.perf_counter() + seconds if seconds is not None else None

    def worker() -> None:
        client = grpc.InferenceServerClient(url)
        while True:
            k = next(counter)
            if (requests is not None and k >= requests) or (end is not None and time.perf_counter() >= end):
                return
            draw = random.Random(seed * 1_000_003 + k)
            is_bad = draw.random() < bad_fraction
            index = draw.randrange(len(bad) if is_bad else len(good))
            data = (bad if is_bad else good)[index][None]
            tensor = grpc.InferInput("images", list(data.shape), "UINT8")
            tensor.set_data_from_numpy(data)
            try:
                got = client.infer("preprocess", [tensor], client_timeout=REQUEST_TIMEOUT_S).as_numpy("normalized")
            except InferenceServerException as exc:
                tally.add(is_bad, str(exc), False)
                continue
            tally.add(is_bad, None, not is_bad and got.shape == (1, *want[index].shape)
                      and np.array_equal(got[0], want[index]))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def growth(samples: list[dict], key: str) -> tuple[int, int] | None:
    """(bytes at a third of the run, bytes at its end) of one memory figure; None without two samples."""
    values = [s[key] for s in samples if s.get(key) is not None]
    if len(values) < 2:
        return None
    return values[len(values) // 3], values[-1]


def flat(start: int, end: int, max_mib: float, max_pct: float) -> bool:
    """Whether the growth from `start` to `end` stays under either bound."""
    grown = end - start
    return grown <= max_mib * MIB or grown <= max_pct / 100 * max(start, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--requests", type=int, help="stop after this many requests instead of --seconds")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--bad", type=float, default=0.1, help="fraction of corrupt images")
    parser.add_argument("--kind", choices=("KIND_CPU", "KIND_GPU"), default="KIND_CPU")
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--images", type=int, default=16, help="distinct good images (each of its own size)")
    parser.add_argument("--sample-every", type=int, default=1000, help="requests between memory samples")
    parser.add_argument("--max-growth-mib", type=float, default=30.0)
    parser.add_argument("--max-growth-pct", type=float, default=5.0)
    parser.add_argument("--respond-in-background", action="store_true",
                        help="the model answers from a worker thread (docs/serving.md)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    on_gpu = args.kind == "KIND_GPU"

    with tempfile.TemporaryDirectory(prefix="headrace-soak-") as tmp:
        pipeline_file = write_model(Path(tmp) / "repo", args.kind, args.instances, args.respond_in_background)
        good = distinct_jpegs(args.images)
        bad = bad_inputs()
        want = references(pipeline_file, good, bad, on_gpu)
        with start_server(Path(tmp) / "repo", timeout=180) as server:
            stubs = child_pids(server.pid)
            tally = Tally(args.sample_every, lambda: memory_sample(server.pid, stubs, on_gpu))
            tally.samples.append({"requests": 0, "seconds": 0.0, **tally.sampler()})
            start = tally.start = time.perf_counter()
            run_load(server.grpc_url, good, want, list(bad.values()), args.bad, args.concurrency, tally,
                     seconds=None if args.requests else args.seconds, requests=args.requests)
            elapsed = time.perf_counter() - start
            tally.samples.append({"requests": tally.done, "seconds": elapsed, **tally.sampler()})
            alive = server.process.poll() is None

    report = summarize(args, tally, elapsed, alive)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if report["pass"] else 1


def summarize(args: argparse.Namespace, tally: Tally, elapsed: float, alive: bool) -> dict:
    """Print the memory samples, each figure's growth and the answers' checks; return them as a dict."""
    keys = ["server_rss", "server_shmem", "stub_rss", "dev_shm"]
    keys += ["gpu", "gpu_device"] if args.kind == "KIND_GPU" else []
    print(f"{args.kind}, {args.instances} instance(s), concurrency {args.concurrency}, {args.bad:.0%} bad: "
          f"{tally.done} requests in {elapsed:.1f} s ({tally.done / elapsed:.0f}/s), {tally.good} good, "
          f"{tally.bad} bad")
    print("requests  seconds  " + "  ".join(f"{k:>12}" for k in keys) + "   (MiB)")
    for sample in tally.samples:
        cells = [f"{sample[k] / MIB:12.1f}" if sample.get(k) is not None else f"{'-':>12}" for k in keys]
        print(f"{sample['requests']:>8}  {sample['seconds']:7.1f}  " + "  ".join(cells))
    ok = alive and not tally.good_errors and not tally.mismatches and not tally.bad_answered
    report = {"kind": args.kind, "instances": args.instances, "concurrency": args.concurrency, "bad": args.bad,
              "seconds": elapsed, "requests": tally.done, "good": tally.good, "bad_requests": tally.bad,
              "good_errors": len(tally.good_errors), "mismatches": tally.mismatches,
              "bad_answered": tally.bad_answered, "server_alive": alive, "samples": tally.samples, "growth": {}}
    for key in keys:
        grown = growth(tally.samples, key)
        if grown is None:
            continue
        is_flat = flat(*grown, args.max_growth_mib, args.max_growth_pct)
        ok &= is_flat or key == "server_shmem"  # part of server_rss, shown to tell shared memory apart
        report["growth"][key] = {"from": grown[0], "to": grown[1], "flat": is_flat}
        print(f"{key}: {grown[0] / MIB:.1f} -> {grown[1] / MIB:.1f} MiB from a third of the run to its end "
              f"({'flat' if is_flat else 'GROWS'})")
    example = f" (e.g. {tally.good_errors[0]})" if tally.good_errors else ""
    print(f"errors on good requests: {len(tally.good_errors)}{example}; good outputs not bit-equal to "
          f"Pipeline.run: {tally.mismatches}; bad requests answered: {tally.bad_answered}; server alive: {alive}")
    print("PASS" if ok else "FAIL")
    report["pass"] = ok
    return report

if __name__ == "__main__":
    sys.exit(main())
