"""headrace against DALI's GPU build in one process on the same JPEGs: ResNet-50 training (hw_decoder_load 0.65 and
1.0) and validation pipelines, written once against the shared API and built by each library. Alternating rounds
(A B, B A, ...) of a few epochs each; medians, the ratio headrace / DALI, GPU memory above the baseline and build +
first batch per pipeline.

    python benchmarks/gpu_vs_dali.py [--images 2048] [--batch-size 256] [--threads 8] [--rounds 7] [--epochs 3]
    (DALI's GPU build: ../shared/tools/dali-gpu/README.md says how it reaches the GPU machine)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from headrace.data.synthetic import make_image_folder
from headrace.demo import IMAGENET_MEAN, IMAGENET_STD


def train(api, data: str, hw_load: float):
    fn, types = api.fn, api.types
    jpegs, labels = fn.readers.file(file_root=data, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=hw_load,
                                           random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 1.333])
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=IMAGENET_MEAN,
                                      std=IMAGENET_STD, mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


def validation(api, data: str, hw_load: float):
    fn, types = api.fn, api.types
    jpegs, labels = fn.readers.file(file_root=data, random_shuffle=False, name="Reader")
    images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=hw_load)
    images = fn.resize(images, resize_shorter=256)
    images = fn.crop_mirror_normalize(images, crop=(224, 224), dtype=types.FLOAT16, output_layout="CHW",
                                      mean=IMAGENET_MEAN, std=IMAGENET_STD)
    return images, labels


CASES = {"train 0.65": (train, 0.65), "train 1.0": (train, 1.0), "validation": (validation, 0.65)}


class Library:
    """One library's `fn`, `types` and `pipeline_def`, imported by name."""

    def __init__(self, name: str):
        if name == "dali":
            import nvidia.dali as root
            from nvidia.dali import fn, pipeline_def, types
        else:
            import headrace as root
            from headrace import fn, pipeline_def, types
        self.name, self.root, self.fn, self.types, self.pipeline_def = name, root, fn, types, pipeline_def


def device_used_mib() -> float:
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    return (total - free) / 2**20


def build(lib: Library, body, data: str, hw_load: float, batch: int, threads: int):
    """The built pipeline, its build + first batch seconds and the GPU memory it added (MiB)."""
    before = device_used_mib()
    start = time.perf_counter()
    pipe = lib.pipeline_def(batch_size=batch, num_threads=threads, device_id=0, seed=42)(
        lambda: body(lib, data, hw_load))()
    pipe.build()
    out = pipe.run()
    out[0].as_cpu()
    first = time.perf_counter() - start
    return pipe, first, device_used_mib() - before


def epoch_rate(pipe, batches: int, epochs: int) -> float:
    start, count = time.perf_counter(), 0
    for _ in range(batches * epochs):
        out = pipe.run()
        count += len(out[0])
    out[0].as_cpu()  # waits for the last batch
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=3, help="per round and side")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--data", help="a folder of class folders of JPEGs (default: generate --images)")
    args = parser.parse_args()
    libs = [Library("dali"), Library("headrace")]
    with tempfile.TemporaryDirectory() as scratch:
        data = args.data or str(make_image_folder(Path(scratch) / "images", args.images, 10, size=(375, 500),
                                                  progress=True))
        count = sum(1 for p in Path(data).rglob("*") if p.is_file())
        batches = -(-count // args.batch_size)
        rows = []
        for case in args.cases:
            body, load = CASES[case]
            pipes, firsts, memory = {}, {}, {}
            for lib in libs:  # each built and warmed alone: its memory is what it added
                pipe, firsts[lib.name], built = build(lib, body, data, load, args.batch_size, args.threads)
                before = device_used_mib()
                epoch_rate(pipe, batches, 1)  # warm-up epoch
                pipes[lib.name], memory[lib.name] = pipe, built + device_used_mib() - before
            rates: dict[str, list[float]] = {lib.name: [] for lib in libs}
            for round_ in range(args.rounds):
                for lib in libs if round_ % 2 == 0 else libs[::-1]:
                    rates[lib.name].append(epoch_rate(pipes[lib.name], batches, args.epochs))
                print(f"{case} round {round_}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()),
                      flush=True)
            dali, ours = statistics.median(rates["dali"]), statistics.median(rates["headrace"])
            rows.append((case, dali, ours, firsts, memory))
            pipes.clear()
    print(f"\n{count} JPEGs, batch {args.batch_size}, {args.threads} threads, {args.rounds} rounds x {args.epochs} "
          "epochs per side; medians")
    print("| pipeline | DALI img/s | headrace img/s | headrace / DALI | first batch s (DALI / headrace) "
          "| GPU MiB after warm-up (DALI / headrace) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case, dali, ours, firsts, memory in rows:
        verdict = "faster" if ours > dali else "slower"
        print(f"| {case} | {dali:,.0f} | {ours:,.0f} | {ours / dali:.2f} ({verdict}) | {firsts['dali']:.2f} / "
              f"{firsts['headrace']:.2f} | {memory['dali']:+.0f} / {memory['headrace']:+.0f} |")


if __name__ == "__main__":
    main()
