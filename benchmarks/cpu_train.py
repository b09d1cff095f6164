"""CPU training-pipeline throughput, side by side in one process: headrace, DALI's CPU build and torchvision.

All three read the same folder of JPEGs and do ResNet-50 training preprocessing (random-area crop, resize to
224x224, random horizontal flip, normalize), batch 128, two CPU workers each. In every round each library runs a
warm-up epoch and then its timed whole epochs; rounds rotate the order, so load from neighbours on a shared
machine falls on all alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path

from rounds import Runner, timed_epoch

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
LIBRARIES = ("headrace", "dali", "torchvision")




class HeadraceRunner(Runner):
    name = "headrace"

    def __init__(self, data: Path, batch_size: int, threads: int, seed: int):
        from headrace.demo import resnet50_train

        self.pipe = resnet50_train(data_dir=str(data), batch_size=batch_size, num_threads=threads, seed=seed)
        self.pipe.build()
        self.batches = -(-self.pipe.epoch_size("Reader") // batch_size)

    def epoch(self) -> Iterator[int]:
        for _ in range(self.batches):
            images, _labels = self.pipe.run()
            yield len(images)

    def close(self) -> None:
        self.pipe.close()


class DaliRunner(Runner):
    name = "dali"

    def __init__(self, data: Path, batch_size: int, threads: int, seed: int):
        from nvidia.dali import fn, pipeline_def, types

        @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, seed=seed)
        def train():
            jpegs, labels = fn.readers.file(file_root=str(data), random_shuffle=True, name="Reader")
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 1.333])
            images = fn.resize(images, resize_x=224, resize_y=224)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=MEAN, std=STD,
                                              mirror=fn.random.coin_flip(probability=0.5))
            return images, labels

        self.pipe = train()
        self.pipe.build()
        self.batches = -(-self.pipe.epoch_size("Reader") // batch_size)

    def epoch(self) -> Iterator[int]:
        for _ in range(self.batches):
            images, _labels = self.pipe.run()
            yield len(images)

    def close(self) -> None:
        del self.pipe


class TorchvisionRunner(Runner):
    name = "torchvision"
    # leaving a DataLoader epoch part way makes the next epoch's start wait for the abandoned batches
    partial_warmup = False

    def __init__(self, data: Path, batch_size: int, threads: int, seed: int):
        import torch
        from torchvision import datasets, transforms

        torch.manual_seed(seed)
        transform = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                        transforms.ToTensor(),
                                        transforms.Normalize([m / 255 for m in MEAN], [s / 255 for s in STD])])
        dataset = datasets.ImageFolder(str(data), transform=transform)
        # persistent workers: forked once, here, before the other libraries start their threads
        self.loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=threads,
                                                  persistent_workers=threads > 0)

    def epoch(self) -> Iterator[int]:
        for images, _labels in self.loader:
            yield len(images)

    def close(self) -> None:
        del self.loader


RUNNERS: dict[str, Callable[..., Runner]] = {"headrace": HeadraceRunner, "dali": DaliRunner,
                                            "torchvision": TorchvisionRunner}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="image folder (one sub-folder per class); default: generate one")
    parser.add_argument("--images", type=int, default=1000, help="JPEGs to generate without --data (~500x400, q90)")
    parser.add_argument("--workdir", type=Path, default=Path("build/bench"), help="where generated data goes")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="headrace/DALI threads, torchvision workers")
    parser.add_argument("--warmup-batches", type=int, default=4,
                        help="untimed batches before each timed stretch (torchvision: one whole epoch)")
    parser.add_argument("--epochs", type=int, default=1, help="timed epochs per library per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds; each runs every library, order rotated")
    parser.add_argument("--only", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    data = args.data
    if data is None:
        from headrace.data.synthetic import make_image_folder

        data = args.workdir / f"images_{args.images}"
        if not data.is_dir():
            make_image_folder(data, num_images=args.images, progress=True)
    num_files = sum(1 for _ in data.rglob("*.jpg"))
    print(f"data: {num_files} JPEGs in {data}; batch {args.batch_size}, {args.threads} threads/workers, "
          f"{os.cpu_count()} CPUs; {args.rounds} rounds of: per library {args.warmup_batches} warm-up batches, "
          f"{args.epochs} timed epoch(s)")

    # torchvision first: its workers fork before any other library has threads
    order = sorted(args.only, key=lambda n: n != "torchvision")
    runners = {name: RUNNERS[name](data, args.batch_size, args.threads, args.seed) for name in order}

    totals = {name: [0, 0.0] for name in order}
    per_round: dict[str, list[float]] = {name: [] for name in order}
    for round_ in range(args.rounds):
        rotated = order[round_ % len(order):] + order[:round_ % len(order)]
        for name in rotated:
            # Warm-up right before the timed epochs: the batches a prefetching loader has ready when timing starts
            # were made in its own time, and what it makes ahead after the last timed epoch overlaps the next
            # library's warm-up, not its timed epochs.
            runner = runners[name]
            warmup = args.warmup_batches if runner.partial_warmup else None
            timed_epoch(runner, f"round {round_} {name} warm-up", warmup)
            images, seconds = 0, 0.0
            for epoch in range(args.epochs):
                n, s = timed_epoch(runner, f"round {round_} {name} epoch {epoch}")
                images, seconds = images + n, seconds + s
            totals[name][0] += images
            totals[name][1] += seconds
            per_round[name].append(images / seconds)
            print(f"round {round_}: {name:12s} {images / seconds:8.1f} img/s ({images} images, {seconds:.2f} s)")
    for runner in runners.values():
        runner.close()

    rates = {name: images / seconds for name, (images, seconds) in totals.items()}
    print("\nthroughput (all timed epochs together; per-round median in brackets)")
    for name in order:
        print(f"  {name:12s} {rates[name]:8.1f} img/s  [{statistics.median(per_round[name]):.1f}]")
    if "headrace" in rates:
        for peer in ("dali", "torchvision"):
            if peer in rates:
                print(f"  headrace / {peer:12s} {rates['headrace'] / rates[peer]:.2f}x")


if __name__ == "__main__":
    main()
