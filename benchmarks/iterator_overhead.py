"""Iterator overhead: batches/s through headrace_torch.GenericIterator vs calling pipeline.run() directly, on the
same pipeline configuration (the direct loop takes each output as one array, as any consumer does first).
Goal: the iterator keeps >= 97% of the direct rate.

    python benchmarks/iterator_overhead.py [--batches 200] [--batch-size 64] [--size 32] [--repeats 3]
                                           [--pipeline-device gpu]   # decode (mixed) and augment on GPU 0
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from headrace import fn, pipeline_def, types
from headrace.data.synthetic import make_image_folder
from headrace_torch import GenericIterator, LastBatchPolicy


@pipeline_def(num_threads=2, device_id=None, seed=1)
def small_images(data_dir: str, size: int, device: str = "cpu"):
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
    images = fn.decoders.image(jpegs, device="mixed" if device == "gpu" else "cpu", output_type=types.RGB)
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[128.0] * 3,
                                      std=[64.0] * 3)
    return images, labels


@pipeline_def(num_threads=1, device_id=None, seed=1)
def labels_only(data_dir: str, size: int, device: str = "cpu"):
    """The worst case for the iterator: a pipeline that does almost nothing per batch."""
    _, labels = fn.readers.file(file_root=data_dir, name="Reader")
    return labels


def direct_rate(make, batches: int) -> float:
    pipe = make()
    pipe.run()  # warm up: start the prefetcher, fill the buffer pool
    start = time.perf_counter()
    for _ in range(batches):
        [out.as_array() for out in pipe.run()]  # what any consumer does first: the batch as one array
    rate = batches / (time.perf_counter() - start)
    pipe.close()
    return rate


def iterator_rate(make, batches: int) -> float:
    pipe = make()
    loader = GenericIterator(pipe, [f"output{i}" for i in range(len(pipe.outputs))], reader_name="Reader",
                             last_batch_policy=LastBatchPolicy.FILL, auto_reset=True, prepare_first_batch=False)
    next(loader)  # warm up as direct_rate does
    done, start = 0, time.perf_counter()
    while done < batches:
        try:
            next(loader)
            done += 1
        except StopIteration:  # auto_reset: the next epoch begins
            continue
    rate = batches / (time.perf_counter() - start)
    pipe.close()
    return rate


class ReplayedBatch:
    """A real pipeline's first batch, handed out again and again: isolates the iterator's own time per batch."""

    def __init__(self, pipe):
        self.pipe, self.batch_size = pipe, pipe.batch_size
        self.outputs = pipe.run()
        for out in self.outputs:
            out.as_array()

    def build(self):
        pass

    def reader_meta(self, name):
        return self.pipe.reader_meta(name)

    def run(self):
        return self.outputs


def iterator_own_time_us(make, batches: int) -> float:
    pipe = make()
    loader = GenericIterator(ReplayedBatch(pipe), [f"output{i}" for i in range(len(pipe.outputs))],
                             reader_name="Reader", auto_reset=True, prepare_first_batch=False)
    start = time.perf_counter()
    for _ in range(batches):
        try:
            next(loader)
        except StopIteration:
            pass
    elapsed = time.perf_counter() - start
    pipe.close()
    return elapsed / batches * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pipeline-device", choices=("cpu", "gpu"), default="cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        data = str(make_image_folder(Path(scratch) / "images", args.images, 5, size=(48, 64), seed=2))
        for name, definition in (("decode + resize + normalize", small_images), ("labels only", labels_only)):
            def make(definition=definition):
                on_gpu = args.pipeline_device == "gpu"
                return definition(data, args.size, args.pipeline_device, batch_size=args.batch_size,
                                  device_id=0 if on_gpu else None)

            direct, through = [], []
            for _ in range(args.repeats):  # interleaved, so drifts in machine load hit both alike
                direct.append(direct_rate(make, args.batches))
                through.append(iterator_rate(make, args.batches))
            best_direct, best_iter = max(direct), max(through)
            print(f"[{name}, pipeline on {args.pipeline_device}] batch {args.batch_size}, best of {args.repeats} "
                  f"interleaved runs of {args.batches} batches")
            print(f"  pipeline.run():  {best_direct:9.1f} batches/s")
            print(f"  GenericIterator: {best_iter:9.1f} batches/s")
            print(f"  ratio iterator / direct: {best_iter / best_direct:.1%} (goal >= 97%)")
            own = iterator_own_time_us(make, 20 * args.batches)
            print(f"  the iterator's own time per batch (one batch replayed, pipeline excluded): {own:.1f} us = "
                  f"{own * best_direct / 1e4:.2f}% of a batch period")


if __name__ == "__main__":
    main()
