"""Where a batch of the GPU training pipeline spends its host time, and what holds nvImageCodec's decode back.

Part 1 times nvImageCodec's batched decode of 256 random-crop regions alone and beside a busy Python thread (code
streams from bytes, numpy arrays and paths; reused outputs or not). Part 2 overlaps the next batch's host half with a
decode, as the look-ahead does. Part 3 prints the demo training pipeline's host time per part and batch, with the
look-ahead before the decode, after it, and off.

    python benchmarks/probes/gpu_stage_profile.py [--skip-probe] [--batches 40] [--threads 8] [--cprofile]
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from offline_timing import mixed_decoders  # noqa: E402

from headrace.data.synthetic import make_image_folder  # noqa: E402


def _spinner():
    stop = threading.Event()

    def spin():
        x = 0
        while not stop.is_set():
            x += 1

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()

    def done():
        stop.set()
        thread.join()

    return done


def probe(files: list[Path]) -> None:
    import cupy as cp
    from nvidia import nvimgcodec as nv

    files = files[:256]
    data = [f.read_bytes() for f in files]
    arrays = [np.frombuffer(d, np.uint8) for d in data]
    rng = np.random.default_rng(0)
    regions = []
    for d in data:
        s = nv.CodeStream(d)
        h, w = s.height, s.width
        ch, cw = int(h * rng.uniform(0.3, 1)), int(w * rng.uniform(0.3, 1))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        regions.append(nv.Region(start=(y, x), end=(y + ch, x + cw)))
    sources = {"bytes": data, "numpy": arrays, "path": [str(f) for f in files]}
    stream = cp.cuda.Stream(non_blocking=True)
    backends = {"hw": [nv.Backend(nv.BackendKind.HW_GPU_ONLY)],
                "hw0.65+cuda": [nv.Backend(nv.BackendKind.HW_GPU_ONLY, load_hint=0.65),
                                nv.Backend(nv.BackendKind.GPU_ONLY), nv.Backend(nv.BackendKind.HYBRID_CPU_GPU),
                                nv.Backend(nv.BackendKind.CPU_ONLY)]}
    for bname, backend in backends.items():
        decoder = nv.Decoder(device_id=0, max_num_cpu_threads=8, backends=backend)
        for sname, src in sources.items():
            streams = [nv.CodeStream(s).get_sub_code_stream(region=r) for s, r in zip(src, regions, strict=True)]
            for reuse in (False, True):
                images = decoder.decode(streams, cuda_stream=stream.ptr)
                stream.synchronize()

                def timed(n=6, streams=streams, reuse=reuse, decoder=decoder):
                    nonlocal images
                    call = 0.0
                    start = time.perf_counter()
                    for _ in range(n):
                        t0 = time.perf_counter()
                        images = decoder.decode(streams, images=images if reuse else None, cuda_stream=stream.ptr)
                        call += time.perf_counter() - t0
                    stream.synchronize()
                    return (time.perf_counter() - start) / n * 1e3, call / n * 1e3

                alone, call = timed()
                done = _spinner()
                beside, _ = timed(3)
                done()
                print(f"decode {bname:12s} streams from {sname:6s} reuse={reuse!s:5s}: {alone:7.2f} ms alone "
                      f"(call returns after {call:6.2f}), {beside:8.2f} ms beside a Python thread", flush=True)
                del images
        del decoder

    # Part 2: the host half of the next batch beside the decode of this one
    from headrace_kernels.rng import sample_rng
    from headrace_kernels.windows import random_crop_window

    decoder = nv.Decoder(device_id=0, max_num_cpu_threads=8, backends=backends["hw0.65+cuda"])

    def host_half(k):
        out = []
        for i, d in enumerate(arrays):
            s = nv.CodeStream(d)
            y, x, h, w = random_crop_window(s.height, s.width, [0.08, 1.0], [0.75, 1.333], 10,
                                            sample_rng(k, i))
            out.append(s.get_sub_code_stream(region=nv.Region(start=(y, x), end=(y + h, x + w))))
        return out

    streams = host_half(0)
    decoder.decode(streams, cuda_stream=stream.ptr)
    stream.synchronize()
    n = 6
    start = time.perf_counter()
    for k in range(n):
        streams = host_half(k)
    host = (time.perf_counter() - start) / n * 1e3
    start = time.perf_counter()
    for _ in range(n):
        decoder.decode(streams, cuda_stream=stream.ptr)
    stream.synchronize()
    dec = (time.perf_counter() - start) / n * 1e3
    for interval in (None, 0.0005, 0.00005):
        saved = sys.getswitchinterval()
        if interval:
            sys.setswitchinterval(interval)
        start = time.perf_counter()
        for k in range(n):
            worker = threading.Thread(target=host_half, args=(k,))
            worker.start()
            decoder.decode(streams, cuda_stream=stream.ptr)
            worker.join()
        stream.synchronize()
        both = (time.perf_counter() - start) / n * 1e3
        sys.setswitchinterval(saved)
        print(f"host half {host:.2f} ms + decode {dec:.2f} ms = {host + dec:.2f} serial; overlapped "
              f"(switch interval {interval or saved}) {both:.2f} ms", flush=True)
    del decoder


class _Timer:
    """Wraps functions to add their wall time per call to a counter (keyed by label)."""

    def __init__(self):
        self.seconds: collections.Counter = collections.Counter()

    def wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - start

        setattr(owner, name, timed)


def pipeline_profile(root: Path, batches: int, threads: int, profile: bool = False) -> None:
    from headrace.demo import resnet50_train

    for lookahead in ("before", "after", "off"):
        pipe = resnet50_train(data_dir=str(root), device="gpu", batch_size=256, num_threads=threads, device_id=0,
                              executor_options={"lookahead": lookahead})
        pipe.build()
        executor = pipe._executor
        timer = _Timer()
        for name, reader in executor.batch_ops.items():
            timer.wrap(reader, "next_batch", f"cpu: reader {name}")
        timer.wrap(executor.cpu, "run_ops", "cpu: per-sample CPU ops")
        for kind, step in executor.gpu.steps:  # each GPU step's kernel: host half, planning ahead, run
            if kind != "gpu":
                continue
            name = " + ".join(node.schema.name for node in step.chain)
            for method, label in (("prepare", f"cpu: {name} host half"), ("plan", f"cpu: {name} plan ahead"),
                                  ("run", f"gpu: {name} run")):
                if hasattr(step.kernel, method):
                    timer.wrap(step.kernel, method, label)
        decoders = mixed_decoders(pipe)
        for _ in range(10):
            out, _ = pipe.run()
        out.synchronize()
        executor.gpu.timings.clear()
        timer.seconds.clear()
        decode_before = sum(decoder.decode_seconds for decoder in decoders)
        start = time.perf_counter()
        for _ in range(batches):
            out, _ = pipe.run()
        out.synchronize()
        wall = time.perf_counter() - start
        decode = sum(decoder.decode_seconds for decoder in decoders) - decode_before
        stage_timings = dict(executor.gpu.timings)
        if lookahead == "off" and profile:  # one thread: Python's profiler sees every host function of a batch
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(batches):
                out, _ = pipe.run()
            out.synchronize()
            profiler.disable()
            print(f"\nhost functions, look-ahead off, {batches} batches (cProfile, by own time):")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        pipe.close()
        print(f"\npipeline, look-ahead {lookahead}, {threads} threads: "
              f"{batches * 256 / wall:,.0f} img/s, {wall / batches * 1e3:.2f} ms per batch")
        parts = dict(timer.seconds)
        parts.update({f"stage: {k}": v for k, v in stage_timings.items()})
        parts["gpu: inside nvImageCodec's decode"] = decode
        for name, seconds in sorted(parts.items()):
            print(f"  {name:60s} {seconds / batches * 1e3:8.2f} ms/batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-probe", action="store_true")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--cprofile", action="store_true", help="also profile the host functions (look-ahead off)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = make_image_folder(Path(tmp) / "images", num_images=2048, num_classes=16, size=(375, 500),
                                 quality=90, seed=0)
        files = sorted(root.rglob("*.jpg"))
        if not args.skip_probe:
            probe(files)
        pipeline_profile(root, args.batches, args.threads, args.cprofile)


if __name__ == "__main__":
    main()
