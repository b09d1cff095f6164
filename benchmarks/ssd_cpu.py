"""The SSD300 training pipeline (examples/ssd_pipeline.py) side by side in one process: headrace against DALI's CPU
build, or with `--device gpu` against DALI's GPU build.

The graph is the example's `ssd300_training`, written once and built by each library: readers.coco (ltrb, ratio,
skip_empty, shuffled) -> random_bbox_crop -> decoders.image_slice -> flip + bb_flip -> resize 300x300 -> hsv ->
brightness_contrast -> crop_mirror_normalize (CHW float) -> box_encoder (8732 default boxes). Batch 32, 2 threads
(8 on the GPU). The data is generated once: JPEGs of about 480x640 (COCO's usual size) with 1-4 boxed rectangles
each and their COCO annotation file. Every round runs each library's warm-up batches and then its timed whole
epochs; the order alternates (A B, B A, ...). The figure is the median of the rounds' images/s, and the ratio
headrace / DALI of the medians; beside it the process CPU time (user + system, all threads) per image, which a busy
machine disturbs less than the wall clock. `--ops` instead times every op alone on one thread, both libraries fed
the same batch (computed once by DALI's CPU build).

    python benchmarks/ssd_cpu.py                          # 256 images, 6 rounds, CPU: headrace and DALI's CPU build
    python benchmarks/ssd_cpu.py --quick                  # 128 images (512 on the GPU), 4 rounds
    python benchmarks/ssd_cpu.py --ops                    # ms per batch of each op alone, 1 thread
    python benchmarks/ssd_cpu.py --device gpu             # GPU 0: decode (mixed) and augment on the GPU, DALI's
                                                          # GPU build (../shared/tools/dali-gpu/README.md)
    python benchmarks/ssd_cpu.py --device gpu --coalesce 1  # headrace with executor option coalesce_batches=1
    python benchmarks/ssd_cpu.py --device gpu --cpu-process off  # headrace's readers and CPU ops in its own process

On the GPU every batch counts once the device's work is done (a device-wide synchronize).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from rounds import Runner, best_ms_per_batch, timed_epoch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

LIBRARIES = ("headrace", "dali")


def make_dataset(workdir: Path, images: int, seed: int) -> tuple[str, str]:
    """The generated COCO set (file_root, annotations_file), written once per (images, seed)."""
    folder = workdir / f"ssd_coco_{images}_{seed}"
    annotations = folder / "annotations.json"
    if annotations.is_file():
        return str(folder / "images"), str(annotations)
    print(f"writing {images} JPEGs and their annotations to {folder}")
    return example.write_coco_set(folder, count=images, seed=seed, size=(480, 640))


def device_synchronizer() -> Callable[[], None]:
    """Wait on the host for all of GPU 0's work (every stream, whichever library queued it)."""
    try:
        import cupy
    except ImportError:
        import torch

        return torch.cuda.synchronize
    return cupy.cuda.runtime.deviceSynchronize


class PipelineRunner(Runner):
    """headrace's or DALI's build of the example's SSD300 graph."""

    def __init__(self, name: str, data: tuple[str, str], batch_size: int, threads: int, seed: int, device: str,
                 coalesce: int = 0, cpu_process: str = "auto"):
        self.name = name
        self.sync = device_synchronizer() if device == "gpu" else None
        options = {**({"coalesce_batches": coalesce} if coalesce else {}),
                   **({"cpu_process": cpu_process} if cpu_process != "auto" else {})}
        extra = {"executor_options": options} if name == "headrace" and options else None
        self.pipe = example.build_pipeline(example.library(name), *data, device=device, batch_size=batch_size,
                                           num_threads=threads, seed=seed, pipeline_options=extra)
        self.pipe.build()
        self.batches = -(-self.pipe.epoch_size("Reader") // batch_size)

    def epoch(self) -> Iterator[int]:
        for _ in range(self.batches):
            images, _boxes, _labels = self.pipe.run()
            if self.sync is not None:
                self.sync()
            yield len(images)

    def close(self) -> None:
        if hasattr(self.pipe, "close"):
            self.pipe.close()
        del self.pipe


def warm_up(runner: Runner, batches: int) -> None:
    """`batches` untimed batches, across epochs when an epoch has fewer."""
    done = 0
    while done < batches:
        for _ in runner.epoch():
            done += 1
            if done == batches:
                return


def importable(module: str) -> str | None:
    """Why `module` does not import here, or None when it does."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - an ImportError, or an OSError from a build for another CUDA
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None


def run_rounds(args: argparse.Namespace, data: tuple[str, str]) -> tuple[dict[str, list[float]], dict[str, list]]:
    """Each library's images/s and CPU ms per image, per round; a library that fails to build or run is left out
    with the reason."""
    order = list(args.only)
    if "dali" in order and (why := importable("nvidia.dali")):
        print(f"DALI left out: nvidia.dali does not import ({why})")
        order.remove("dali")
    versions = {"headrace": "headrace", "dali": "nvidia.dali"}
    print("versions: " + ", ".join(f"{n} {getattr(importlib.import_module(versions[n]), '__version__', '?')}"
                                   for n in order))
    runners: dict[str, Runner] = {}
    for name in list(order):
        start = time.perf_counter()
        try:
            runners[name] = PipelineRunner(name, data, args.batch_size, args.threads, args.seed, args.device,
                                           args.coalesce, args.cpu_process)
        except Exception:  # noqa: BLE001 - one library's failure should not cost the other's figure
            print(f"{name}: the build FAILED, left out:")
            traceback.print_exc()
            order.remove(name)
            continue
        print(f"{name}: built in {time.perf_counter() - start:.2f} s (this process)")
    per_round: dict[str, list[float]] = {name: [] for name in order}
    cpu_ms: dict[str, list[float]] = {name: [] for name in order}
    for round_ in range(args.rounds):
        for name in list(order if round_ % 2 == 0 else order[::-1]):
            runner = runners[name]
            try:
                warm_up(runner, args.warmup_batches)
                images, seconds, cpu_before = 0, 0.0, process_cpu_s()
                for epoch in range(args.epochs):
                    n, s = timed_epoch(runner, f"round {round_} {name} epoch {epoch}")
                    images, seconds = images + n, seconds + s
                cpu_ms[name].append(1000 * (process_cpu_s() - cpu_before) / images)
            except Exception:  # noqa: BLE001
                print(f"round {round_}: {name} FAILED, left out from here on:")
                traceback.print_exc()
                order.remove(name)
                del per_round[name], cpu_ms[name]
                continue
            per_round[name].append(images / seconds)
            print(f"round {round_}: {name:9s} {images / seconds:8.1f} images/s ({images} images, {seconds:.2f} s, "
                  f"{cpu_ms[name][-1]:.1f} CPU ms per image)")
    for runner in runners.values():
        runner.close()
    return per_round, cpu_ms


def process_cpu_s() -> float:
    """This process's CPU time so far (user + system, every thread), in seconds."""
    times = os.times()
    return times.user + times.system


def report(args: argparse.Namespace, per_round: dict[str, list[float]], cpu_ms: dict[str, list[float]]) -> None:
    """Medians, the per-round figures and the ratio headrace / DALI, then one SUMMARY line per library."""
    medians = {name: statistics.median(rates) for name, rates in per_round.items() if rates}
    cpu = {name: statistics.median(cpu_ms[name]) for name in medians}
    print(f"\nthroughput ({args.device}), median of {args.rounds} alternating rounds")
    for name, median in medians.items():
        print(f"  {name:9s} {median:8.1f} images/s, {cpu[name]:6.1f} CPU ms per image  per round: "
              + " ".join(f"{r:.1f}" for r in per_round[name]))
    ratio = ""
    if len(medians) == 2:
        ratios = [a / b for a, b in zip(per_round["headrace"], per_round["dali"], strict=True)]
        ratio = f"{medians['headrace'] / medians['dali']:.2f}x"
        print(f"  headrace / DALI {ratio} by medians (per-round ratios {min(ratios):.2f}-{max(ratios):.2f}); "
              f"CPU time per image DALI / headrace {cpu['dali'] / cpu['headrace']:.2f}x")
    for name in LIBRARIES:
        if name in medians:
            extra = f"  = {ratio} DALI" if name == "headrace" and ratio else ""
            print(f"SUMMARY {name:9s} {args.device} {medians[name]:8.1f} images/s, {cpu[name]:.1f} CPU ms/image{extra}")
        elif name in args.only:
            print(f"SUMMARY {name:9s} {args.device}  not run (see above)")


def stage_inputs(data: tuple[str, str], batch_size: int) -> dict[str, list[np.ndarray]]:
    """The first batch at every step of the pipeline, computed by DALI's CPU build (the inputs of op_times)."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=1)
    def steps():
        jpegs, boxes, labels = fn.readers.coco(file_root=data[0], annotations_file=data[1], ltrb=True, ratio=True,
                                               skip_empty=True)
        anchor, shape, cropped, kept = fn.random_bbox_crop(
            boxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0],
            bbox_layout="xyXY", allow_no_crop=True, num_attempts=1)
        decoded = fn.decoders.image_slice(jpegs, anchor, shape, output_type=types.RGB)
        resized = fn.resize(decoded, resize_x=300, resize_y=300)
        hsv = fn.hsv(resized, hue=0.2, saturation=1.3, dtype=types.FLOAT)
        bc = fn.brightness_contrast(hsv, brightness=1.05, contrast=0.8, contrast_center=128, dtype=types.UINT8)
        return jpegs, boxes, labels, anchor, shape, cropped, kept, decoded, resized, hsv, bc

    pipe = steps()
    pipe.build()
    names = ("jpegs", "boxes", "labels", "anchor", "shape", "cropped", "kept", "decoded", "resized", "hsv", "bc")
    return {n: [np.array(out.at(i)) for i in range(len(out))] for n, out in zip(names, pipe.run(), strict=True)}


def op_stages(fn, types) -> list[tuple[str, Callable, tuple[str, ...]]]:
    """(name, the op applied to the fed nodes, the stage_inputs it is fed) of every step of the pipeline."""
    anchors = example.default_boxes("ltrb").ravel().tolist()
    return [
        ("random_bbox_crop", lambda b, lab: fn.random_bbox_crop(
            b, lab, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0],
            bbox_layout="xyXY", allow_no_crop=True, num_attempts=1)[0], ("boxes", "labels")),
        ("decoders.image_slice", lambda j, a, s: fn.decoders.image_slice(j, a, s, output_type=types.RGB),
         ("jpegs", "anchor", "shape")),
        ("decoders.image (whole image)", lambda j: fn.decoders.image(j, output_type=types.RGB), ("jpegs",)),
        ("flip (horizontal)", lambda x: fn.flip(x, horizontal=1), ("decoded",)),
        ("bb_flip", lambda b: fn.bb_flip(b, horizontal=1, ltrb=True), ("cropped",)),
        ("resize 300x300", lambda x: fn.resize(x, resize_x=300, resize_y=300), ("decoded",)),
        ("hsv (float out)", lambda x: fn.hsv(x, hue=0.2, saturation=1.3, dtype=types.FLOAT), ("resized",)),
        ("brightness_contrast (uint8 out)", lambda x: fn.brightness_contrast(
            x, brightness=1.05, contrast=0.8, contrast_center=128, dtype=types.UINT8), ("hsv",)),
        ("crop_mirror_normalize", lambda x: fn.crop_mirror_normalize(
            x, crop=(300, 300), mean=example.MEAN, std=example.STD, mirror=0, dtype=types.FLOAT,
            output_layout="CHW"), ("bc",)),
        ("box_encoder", lambda b, lab: fn.box_encoder(b, lab, criteria=0.5, anchors=anchors)[0],
         ("cropped", "kept")),
        ("nothing (external_source only)", lambda x: x, ("bc",)),
    ]


def feeder(batch: list[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    """An external_source callable giving `batch` every iteration (no argument: DALI passes one to those with one)."""
    return lambda: batch


def op_times(args: argparse.Namespace, data: tuple[str, str]) -> None:
    """ms per batch of every step alone, on one thread, each library fed the same batch (external_source)."""
    inputs = stage_inputs(data, args.batch_size)
    print(f"\nper-op time, 1 thread, batch {args.batch_size}, ms per batch (best of {args.op_repeats} runs of "
          f"{args.op_iters} batches)")
    table: dict[str, dict[str, float]] = {}
    for name in [n for n in LIBRARIES if n in args.only]:
        lib = example.library(name)
        for step, op, feeds in op_stages(lib.fn, lib.types):
            def graph(op=op, feeds=feeds, fn=lib.fn):
                nodes = [fn.external_source(source=feeder(inputs[k]), batch=True) for k in feeds]
                return op(*nodes)

            built = lib.pipeline_def(batch_size=args.batch_size, num_threads=1, device_id=None, seed=1)(graph)()
            built.build()
            table.setdefault(step, {})[name] = best_ms_per_batch(built, args.op_iters, args.op_repeats)
    for step, times in table.items():
        ratio = f"   DALI / headrace {times['dali'] / times['headrace']:.2f}x" if len(times) == 2 else ""
        print(f"  {step:34s} " + "  ".join(f"{lib} {ms:8.2f}" for lib, ms in times.items()) + ratio)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a COCO images folder (with --annotations); default: generate the data")
    parser.add_argument("--annotations", help="its COCO annotation file")
    parser.add_argument("--images", type=int, default=256, help="JPEGs to generate without --data")
    parser.add_argument("--workdir", type=Path, default=Path("build/bench"), help="where generated data goes")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, help="pipeline threads (default: 2; 8 on the GPU)")
    parser.add_argument("--warmup-batches", type=int, help="untimed batches before each library's timed epochs "
                        "(default 2; 32 on the GPU: the work headrace's pipeline holds ahead, spent first)")
    parser.add_argument("--epochs", type=int,
                        help="timed epochs per library per round (default: as many as make 1,024 images on the CPU, "
                             "32,768 on the GPU: shorter rounds measure the work a pipeline did ahead while the other "
                             "ran)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds; the order alternates (A B, B A, ...)")
    parser.add_argument("--only", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--coalesce", type=int, default=0, metavar="K",
                        help="headrace's executor option coalesce_batches (GPU: K batches run as one; default 0, "
                             "headrace's default: runs of 256 images)")
    parser.add_argument("--cpu-process", choices=("auto", "on", "off"), default="auto",
                        help="headrace's executor option cpu_process (GPU: readers and CPU ops in a worker process; "
                             "auto, the default, puts them there for this pipeline)")
    parser.add_argument("--quick", action="store_true",
                        help="128 images (512 on the GPU), 4 rounds (overrides --images, --rounds)")
    parser.add_argument("--ops", action="store_true", help="only time each op alone (1 thread), headrace and DALI")
    parser.add_argument("--op-iters", type=int, default=5, help="batches per timed run of --ops")
    parser.add_argument("--op-repeats", type=int, default=3, help="timed runs of --ops per op (the best counts)")
    args = parser.parse_args(argv)
    if args.device == "gpu" and args.ops:
        parser.error("--ops times the CPU ops only: leave out --device gpu")
    gpu = args.device == "gpu"
    args.threads = args.threads or (8 if gpu else 2)
    # GPU: four coalesced runs of headrace's, about the work it holds ahead (the queue's run and one more batch, the
    # look-ahead's run, the worker's run), which it computed while the other library's round ran
    args.warmup_batches = args.warmup_batches or (32 if gpu else 2)
    if args.quick:  # on the GPU, whole coalesced runs (8 batches of 32) in an epoch, so epochs cost alike
        args.images, args.rounds = (512 if gpu else 128), 4
    if bool(args.data) != bool(args.annotations):
        parser.error("give --data and --annotations together")
    data = (args.data, args.annotations) if args.data else make_dataset(args.workdir, args.images, args.seed)
    if args.epochs is None:
        images = len(json.loads(Path(data[1]).read_text())["images"]) if args.data else args.images
        args.epochs = -(-(32768 if gpu else 1024) // images)
    if args.ops:
        op_times(args, data)
        return
    print(f"SSD300 pipeline on the {args.device.upper()}: {data[1]}; batch {args.batch_size}, {args.threads} "
          f"threads, {os.cpu_count()} CPUs; {args.rounds} rounds of {args.warmup_batches} warm-up batches and "
          f"{args.epochs} timed epoch(s) per library")
    report(args, *run_rounds(args, data))


if __name__ == "__main__":
    main()
