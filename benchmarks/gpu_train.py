"""GPU training input pipelines side by side, in one process, on the same generated JPEGs: is headrace's GPU path
faster than torchvision's, and how close does it come to nvImageCodec's decode alone?

headrace's ResNet-50 training pipeline (mixed random-crop decode -> resize 224 -> mirror -> normalize, FP16 NCHW),
torchvision's GPU path (decode_jpeg on cuda + resized_crop + flip + normalize), nvImageCodec's hardware decoder
alone; also build + first batch, GPU memory, host RSS, and variants of the executor's options.

    python benchmarks/gpu_train.py [--images 2048] [--batch-size 256] [--epochs 5] [--threads 8]
    python benchmarks/gpu_train.py --rate-only hw --epochs 10 --data /tmp/images   # one line: the rate
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from offline_timing import mixed_decoders
from tqdm import tqdm

from headrace import fn, pipeline_def, types
from headrace.data.synthetic import make_image_folder
from headrace.demo import IMAGENET_MEAN, IMAGENET_STD, resnet50_train


@pipeline_def(batch_size=256, num_threads=8, device_id=0, seed=42)
def train_hw_only(data_dir: str):
    """The demo's training pipeline with every image sent to the hardware decoder (hw_decoder_load=1)."""
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=1.0,
                                           random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 1.333])
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=IMAGENET_MEAN,
                                      std=IMAGENET_STD, mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def device_used_mib() -> float:
    import cupy as cp

    free, total = cp.cuda.runtime.memGetInfo()
    return (total - free) / 2**20


def time_headrace(make, data: str, images: int, batch: int, epochs: int, threads: int, report_memory: bool,
                  profile_first: bool = False, options: dict | None = None):
    """img/s over `epochs` epochs after a warm-up epoch, build + first batch seconds, and (report_memory) memory and
    host times per batch after 20 epochs; `options` are the pipeline's executor_options."""
    profiler = None
    if profile_first:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    pipe = make(data, batch, threads, **({"executor_options": options} if options else {}))
    pipe.build()
    out, _ = pipe.run()
    out.synchronize()
    first = time.perf_counter() - start
    if profiler is not None:
        import pstats

        profiler.disable()
        print(f"build + first batch: {first:.2f} s; where the calling thread spent it (cProfile, cumulative):")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
    per_epoch = -(-images // batch)
    for _ in range(per_epoch - 1):  # finish the first epoch (warm-up: NVRTC cache, decoder buffers)
        out, _ = pipe.run()
    out.synchronize()
    pipe._executor.gpu.timings.clear()  # per-batch host times of the steady state only
    decoders = mixed_decoders(pipe)
    for decoder in decoders:
        decoder.decode_seconds = 0.0
    rss_1 = rss_mib()
    begin = time.perf_counter()
    count = 0
    for _ in range(epochs * per_epoch):
        out, _ = pipe.run()
        count += len(out)
    out.synchronize()
    rate = count / (time.perf_counter() - begin)
    extra = {}
    if report_memory:
        for _ in range((20 - 1 - epochs) * per_epoch):
            out, _ = pipe.run()
        out.synchronize()
        stage = pipe._executor.gpu
        batches = 19 * per_epoch
        extra = {"timings": {k: v / batches * 1e3 for k, v in stage.timings.items()}, "rss_1": rss_1,
                 "rss_20": rss_mib(), "pool_mib": stage.ctx.held_bytes / 2**20, "device_mib": device_used_mib(),
                 "fallbacks": sum(decoder.fallbacks for decoder in decoders)}
        extra["timings"]["inside nvImageCodec decode()"] = sum(
            decoder.decode_seconds for decoder in decoders) / batches * 1e3
    pipe.close()
    return rate, first, extra


def time_torchvision(files: list[Path], batch: int, epochs: int) -> float:
    import torch
    import torchvision
    from torchvision.transforms import RandomResizedCrop
    from torchvision.transforms.v2 import functional as F  # noqa: N812

    encoded = [torchvision.io.read_file(str(f)) for f in files]
    mean = torch.tensor(IMAGENET_MEAN, device="cuda").view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device="cuda").view(3, 1, 1)
    rng = torch.Generator().manual_seed(0)

    def one_batch(chunk):
        decoded = torchvision.io.decode_jpeg(chunk, device="cuda")
        out = torch.empty((len(chunk), 3, 224, 224), dtype=torch.float16, device="cuda")
        for i, image in enumerate(decoded):
            top, left, h, w = RandomResizedCrop.get_params(image, scale=(0.08, 1.0), ratio=(0.75, 1.333))
            crop = F.resized_crop(image, top, left, h, w, [224, 224], antialias=True)
            if torch.rand(1, generator=rng).item() < 0.5:
                crop = crop.flip(-1)
            out[i] = ((crop.float() - mean) / std).half()
        return out

    order = list(range(len(encoded)))
    one_batch([encoded[i] for i in order[:batch]])  # warm-up
    torch.cuda.synchronize()
    begin = time.perf_counter()
    count = 0
    for _ in range(epochs):
        np.random.default_rng(count).shuffle(order)
        for s in range(0, len(order), batch):
            chunk = [encoded[i] for i in order[s:s + batch]]
            one_batch(chunk)
            count += len(chunk)
    torch.cuda.synchronize()
    return count / (time.perf_counter() - begin)


def roi_box(rng: np.random.Generator, h: int, w: int) -> tuple[int, int, int, int]:
    """A random-crop region (y, x, height, width) of an h x w image, RandomResizedCrop's area and aspect ranges
    (the decode-only runs' regions; not headrace's own draws)."""
    area = h * w * rng.uniform(0.08, 1.0)
    ratio = math.exp(rng.uniform(math.log(0.75), math.log(1.333)))
    cw, ch = min(w, max(1, round(math.sqrt(area * ratio)))), min(h, max(1, round(math.sqrt(area / ratio))))
    return int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw


def time_nvimgcodec(files: list[Path], batch: int, epochs: int, roi: bool) -> float:
    import cupy as cp
    from nvidia import nvimgcodec as nv

    decoder = nv.Decoder(device_id=0, backends=[nv.Backend(nv.BackendKind.HW_GPU_ONLY)])
    data = [f.read_bytes() for f in files]
    rng = np.random.default_rng(0)
    stream = cp.cuda.Stream(non_blocking=True)

    def streams(chunk):
        out = []
        for d in chunk:
            s = nv.CodeStream(d)
            if roi:
                y, x, ch, cw = roi_box(rng, s.height, s.width)
                s = s.get_sub_code_stream(region=nv.Region(start=(y, x), end=(y + ch, x + cw)))
            out.append(s)
        return out

    prepared = [streams(data[s:s + batch]) for s in range(0, len(data), batch)]  # parsing is not timed
    decoder.decode(prepared[0], cuda_stream=stream.ptr)
    stream.synchronize()
    begin = time.perf_counter()
    count = 0
    for _ in range(epochs):
        for chunk in prepared:
            images = decoder.decode(chunk, cuda_stream=stream.ptr)
            assert all(i is not None for i in images)
            count += len(chunk)
    stream.synchronize()
    rate = count / (time.perf_counter() - begin)
    del images, decoder  # before the stream they were made on
    return rate


def time_capi_decode(files: list[Path], batch: int, epochs: int) -> float:
    """nvImageCodec's hardware decoder through its C API (headrace_kernels.nvimgcodec_capi), random-crop regions
    cut ahead (not timed), one allocation per batch: the decode-only ceiling of headrace's own decode path."""
    import cupy as cp

    from headrace_kernels import nvimgcodec_capi as capi

    instance = capi.Instance.shared()
    decoder = capi.Decoder(instance, 0, 8, [(capi.BACKEND_HW_GPU_ONLY, 1.0)])
    data = [np.fromfile(f, np.uint8) for f in files]
    rng = np.random.default_rng(0)
    stream = cp.cuda.Stream(non_blocking=True)
    chunks = []
    for s in range(0, len(data), batch):
        streams = capi.CodeStreams(instance, data[s:s + batch])
        boxes = np.array([roi_box(rng, h, w) for h, w in zip(streams.heights.tolist(), streams.widths.tolist(),
                                                              strict=True)], np.int64)
        streams.cut(boxes)
        shapes = np.concatenate([boxes[:, 2:], np.full((len(boxes), 1), 3)], axis=1)
        sizes = shapes.prod(axis=1)
        memory = cp.cuda.alloc(int(sizes.sum()))
        addresses = memory.ptr + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64)
        chunks.append((streams, shapes, addresses, memory))

    def decode(chunk):
        streams, shapes, addresses, _ = chunk
        statuses = decoder.decode(streams, np.arange(len(shapes)), shapes, addresses, stream.ptr, False, True)
        assert (statuses == capi.PROCESSING_SUCCESS).all()

    decode(chunks[0])
    stream.synchronize()
    begin = time.perf_counter()
    count = 0
    for _ in range(epochs):
        for chunk in chunks:
            decode(chunk)
            count += len(chunk[1])
    stream.synchronize()
    rate = count / (time.perf_counter() - begin)
    for streams, *_ in chunks:
        streams.close()
    decoder.close()
    return rate


def time_mixed_decoder(files: list[Path], batch: int, epochs: int, hw_load: float) -> tuple[float, float, float]:
    """headrace's mixed random-crop decoder alone, one thread: (img/s, host half ms/batch, decode ms/batch)."""
    import cupy as cp

    from headrace.schema import get_schema
    from headrace_kernels.gpu.decode import MixedDecoder

    schema = get_schema("decoders.image_random_crop")
    args = {name: schema.arg({}, name) for name in schema.all_args}
    args["hw_decoder_load"] = hw_load
    decoder = MixedDecoder(args, 0, 8, random_crop=True)
    data = [np.fromfile(f, np.uint8) for f in files]
    stream = cp.cuda.Stream(non_blocking=True)
    chunks = [data[s:s + batch] for s in range(0, len(data), batch)]
    with stream:
        decoder.run(decoder.prepare(chunks[0], 1, 0), stream)
    stream.synchronize()
    host = decode = 0.0
    count = 0
    begin = time.perf_counter()
    for epoch in range(epochs):
        for k, chunk in enumerate(chunks):
            t0 = time.perf_counter()
            prepared = decoder.prepare(chunk, epoch, k * batch)
            t1 = time.perf_counter()
            with stream:
                decoder.run(prepared, stream)
            decode += time.perf_counter() - t1
            host += t1 - t0
            count += len(chunk)
    stream.synchronize()
    batches = epochs * len(chunks)
    rate = count / (time.perf_counter() - begin)
    decoder.release()  # before the stream it decoded on
    return rate, host / batches * 1e3, decode / batches * 1e3


def demo_pipeline(data_dir, batch_size: int, num_threads: int, **pipeline_kwargs):
    """The demo's training pipeline on GPU 0 (DALI's hw_decoder_load 0.65)."""
    return resnet50_train(data_dir=str(data_dir), device="gpu", batch_size=batch_size, num_threads=num_threads,
                          device_id=0, **pipeline_kwargs)


def hw_only(data_dir, batch_size: int, num_threads: int, **pipeline_kwargs):
    """The same pipeline with every JPEG on the hardware decoder (train_hw_only)."""
    return train_hw_only(data_dir=str(data_dir), batch_size=batch_size, num_threads=num_threads, **pipeline_kwargs)


PIPELINES = {"demo": (demo_pipeline, "demo pipeline, hw_decoder_load=0.65"), "hw": (hw_only, "hw_decoder_load=1.0")}


def ab_rounds(data: Path, images: int, args) -> None:
    """Alternating rounds (machine noise spreads over both sides) of two configurations of the training pipeline:
    `--ab interval`: hw_decoder_load=1 with a 100 us GIL switch interval and the interpreter's (5 ms);
    `--ab load`: hw_decoder_load=1 (the hardware decoder alone) and DALI's 0.65 split (the demo pipeline)."""
    sides = {"interval": [("switch interval 100 us", hw_only, {"switch_interval": 0.0001}),
                          ("switch interval 5 ms", hw_only, {})],
             "load": [("hw_decoder_load=1", hw_only, {}), ("hw_decoder_load=0.65", demo_pipeline, {})]}[args.ab]
    totals: dict[str, list[float]] = {label: [] for label, _, _ in sides}
    for round_ in range(args.ab_rounds):
        for label, make, options in sides if round_ % 2 == 0 else sides[::-1]:
            rate, _, _ = time_headrace(make, data, images, args.batch_size, args.epochs, args.threads,
                                       report_memory=False, options=options)
            totals[label].append(rate)
            print(f"round {round_}: {label}: {rate:,.0f} img/s")
    for label, rates in totals.items():
        print(f"{label}: median {np.median(rates):,.0f} img/s, {len(rates)} rounds")


def memory_over_epochs(data: Path, images: int, batch: int, threads: int, epochs: int) -> None:
    """The demo pipeline's GPU memory (held by its pools, in use, and the device's) after each of `epochs` epochs,
    and the large requests of CuPy's allocator by size (the per-batch blocks of the decoder and the resize do not
    go through it: their pools are shown per purpose)."""
    pipe = demo_pipeline(data, batch, threads)
    pipe.build()
    stage = pipe._executor.gpu
    memory = stage.ctx.memory
    requests: Counter = Counter()
    malloc = memory.malloc

    def counting_malloc(size: int):
        if size >= 1 << 20:
            requests[round(size / 2**20, 1)] += 1
        return malloc(size)

    memory.malloc = counting_malloc
    per_epoch = -(-images // batch)
    held = []
    for epoch in tqdm(range(1, epochs + 1), desc="epochs", unit="epoch", mininterval=5):
        for _ in range(per_epoch):
            pipe.run()
        stage.ctx.stream.synchronize()
        held.append(stage.ctx.held_bytes / 2**20)
        if epoch in (1, 2, 5) or epoch % 10 == 0:
            per_batch = ", ".join(f"{purpose} {e.pool.total_bytes() / 2**20:.0f} in blocks of "
                                  f"{e.block_bytes / 2**20:.0f}" for purpose, e in memory.per_batch.items())
            tqdm.write(f"epoch {epoch}: pools hold {held[-1]:.0f} MiB (small {memory.small.total_bytes() / 2**20:.0f}"
                       f", large {memory.large.total_bytes() / 2**20:.0f}, {per_batch}), in use "
                       f"{stage.ctx.used_bytes / 2**20:.0f} MiB, device {device_used_mib():.0f} MiB")
    second = f"epoch 2 {held[1]:.0f} MiB, " if len(held) > 1 else ""
    print(f"pools held: {second}max {max(held):.0f} MiB, last {held[-1]:.0f} MiB after {epochs} epochs")
    print("large requests (MiB: count):", ", ".join(f"{size}: {n}" for size, n in sorted(requests.items())[:40]),
          f"({len(requests)} sizes)")
    pipe.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--data", type=Path,
                        help="image folder to use; generated there when it does not exist (default: a temporary one)")
    parser.add_argument("--rate-only", choices=sorted(PIPELINES),
                        help="only time this headrace pipeline and print one line, 'rate: N img/s'")
    parser.add_argument("--skip-torchvision", action="store_true")
    parser.add_argument("--ab-rounds", type=int, default=0,
                        help="only compare two configurations (--ab) in this many alternating rounds")
    parser.add_argument("--ab", choices=("interval", "load"), default="interval",
                        help="interval: GIL switch interval 100 us / 5 ms; load: hw_decoder_load 1 / 0.65")
    parser.add_argument("--profile-first", action="store_true", help="profile the build and first batch")
    parser.add_argument("--memory-epochs", type=int, default=0,
                        help="only run the demo pipeline this many epochs and print its GPU memory after each")
    args = parser.parse_args(argv)

    import cupy as cp

    print(f"GPU: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {os.cpu_count()} CPU cores, "
          f"{args.threads} pipeline threads")
    tmp = None
    data = args.data
    if data is None:
        tmp = tempfile.TemporaryDirectory(prefix="headrace-gpu-bench-")
        data = Path(tmp.name) / "images"
    if not data.is_dir():
        make_image_folder(data, num_images=args.images, num_classes=16, size=(375, 500), quality=90, seed=0)
    files = sorted(data.rglob("*.jpg"))
    size_kb = np.mean([f.stat().st_size for f in files]) / 1024
    print(f"{len(files)} JPEGs of ~500x375, q90, {size_kb:.0f} KB on average; batch {args.batch_size}")

    if args.rate_only:
        make, label = PIPELINES[args.rate_only]
        rate, first, _ = time_headrace(make, data, len(files), args.batch_size, args.epochs, args.threads,
                                       report_memory=False)
        print(f"rate: {rate:,.0f} img/s (headrace GPU, {label}, {args.epochs} epochs; build + first batch "
              f"{first:.2f} s)")
        return
    if args.ab_rounds:
        ab_rounds(data, len(files), args)
        return
    if args.memory_epochs:
        memory_over_epochs(data, len(files), args.batch_size, args.threads, args.memory_epochs)
        return
    rows = []
    demo, first, memory = time_headrace(demo_pipeline, data, len(files), args.batch_size, args.epochs, args.threads,
                                        report_memory=True, profile_first=args.profile_first)
    rows.append(("headrace GPU (demo pipeline, hw_decoder_load=0.65)", demo))
    hw, first_warm, _ = time_headrace(hw_only, data, len(files), args.batch_size, args.epochs, args.threads,
                                      report_memory=False)
    rows.append(("headrace GPU (hw_decoder_load=1.0)", hw))
    binding, _, _ = time_headrace(demo_pipeline, data, len(files), args.batch_size, args.epochs, args.threads,
                                  report_memory=False, options={"nvimgcodec_capi": False})  # the Python binding
    rows.append(("headrace GPU (demo pipeline, Python binding decode)", binding))
    if not args.skip_torchvision:
        rows.append(("torchvision GPU (decode_jpeg cuda + resized_crop)", time_torchvision(files, args.batch_size,
                                                                                           args.epochs)))
    decode_full = time_nvimgcodec(files, args.batch_size, args.epochs, roi=False)
    decode_roi = time_nvimgcodec(files, args.batch_size, args.epochs, roi=True)
    for load in (0.65, 1.0):
        rate, host_ms, decode_ms = time_mixed_decoder(files, args.batch_size, args.epochs, load)
        rows.append((f"headrace mixed decoder alone (hw_decoder_load={load})", rate))
        print(f"mixed decoder alone, hw_decoder_load={load}: host half {host_ms:.2f} ms/batch, "
              f"decode {decode_ms:.2f} ms/batch")
    decode_capi = time_capi_decode(files, args.batch_size, args.epochs)
    rows.append(("nvImageCodec hardware decode only, full images", decode_full))
    rows.append(("nvImageCodec hardware decode only, random-crop ROI", decode_roi))
    rows.append(("nvImageCodec C API hardware decode only, random-crop ROI", decode_capi))

    variants = []  # where the time goes: threads and the executor's options
    configs = ((2, {}), (16, {}), (args.threads, {"lookahead": "off"}), (args.threads, {"lookahead": "after"}),
               (args.threads, {"switch_interval": 0.00005}), (args.threads, {"switch_interval": 0.0002}),
               (args.threads, {"parallel_reads": True}))
    for threads, options in configs:
        rate, _, _ = time_headrace(demo_pipeline, data, len(files), args.batch_size, 2, threads, report_memory=False,
                                   options=options)
        described = ", ".join(f"{key}={value!r}" for key, value in options.items()) or "default options"
        variants.append((f"{threads} threads, {described}", rate))
    best = max(demo, hw)
    print("variants:")
    for name, rate in variants:
        print(f"  {name:58s} {rate:9,.0f} img/s")
    print()
    print(f"{'pipeline':58s} {'img/s':>9s} {'headrace best / this':>22s}")
    for name, rate in rows:
        print(f"{name:58s} {rate:9,.0f} {best / rate:21.2f}x")
    print()
    print(f"headrace best vs ROI decode alone: {best / decode_capi:.1%} of the C API decode-only rate, "
          f"{best / decode_roi:.1%} of the Python binding's ({best / decode_full:.1%} of its full-image decode)")
    print("against DALI's GPU build: benchmarks/gpu_vs_dali.py, in one process with it (a DALI figure from another "
          "run is no reference: rates drift 15-25% between machines and minutes)")
    print(f"build + first batch: {first:.2f} s for the first pipeline of this process (NVRTC and numba caches "
          f"as found), {first_warm:.2f} s for the next")
    print(f"steady-state GPU memory: headrace pool {memory['pool_mib']:.0f} MiB, device total in use "
          f"{memory['device_mib']:.0f} MiB (this process, torch and nvImageCodec included)")
    print(f"host RSS: {memory['rss_1']:.0f} MiB after 1 epoch, {memory['rss_20']:.0f} MiB after 20 epochs")
    print(f"per-image CPU fallbacks in the mixed decoder: {memory['fallbacks']}")
    print("host time per batch (ms, demo pipeline, GPU work is asynchronous except the decode):")
    for name, ms in sorted(memory["timings"].items()):
        print(f"  {name:45s} {ms:7.2f}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
