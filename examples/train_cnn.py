"""Train a small CNN for one epoch on generated images, fed by a headrace pipeline through the PyTorch iterator.

    python examples/train_cnn.py                      # CPU: generates 256 small JPEGs in 4 classes
    python examples/train_cnn.py --device cuda        # the model on the GPU, the pipeline on the CPU
    python examples/train_cnn.py --device cuda --pipeline-device gpu    # decoding and augmenting on the GPU too
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from headrace import fn, pipeline_def, types
from headrace.data.synthetic import make_image_folder
from headrace_torch import ClassificationIterator, LastBatchPolicy, shard_args


@pipeline_def(num_threads=2, device_id=None, seed=1)
def training_images(data_dir: str, size: int, device: str = "cpu"):
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader", **shard_args())
    images = fn.decoders.image_random_crop(jpegs, device="mixed" if device == "gpu" else "cpu",
                                           output_type=types.RGB, random_area=[0.5, 1.0])
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[128.0] * 3,
                                      std=[64.0] * 3, mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


def small_cnn(classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(32, classes))


def train_one_epoch(data_dir: str, classes: int, batch_size: int, size: int, device: str,
                    pipeline_device: str = "cpu") -> dict:
    on_gpu = pipeline_device == "gpu"
    pipe = training_images(data_dir, size, pipeline_device, batch_size=batch_size, device_id=0 if on_gpu else None)
    loader = ClassificationIterator(pipe, reader_name="Reader",
                                    last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True,
                                    label_dtype=torch.int64)
    model = small_cnn(classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, images, start = [], 0, time.perf_counter()
    for batch in loader:
        x = batch[0]["data"].to(device, non_blocking=True)
        y = batch[0]["label"].reshape(-1).to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        images += len(y)
    return {"batches": len(losses), "images": images, "first_loss": losses[0], "last_loss": losses[-1],
            "images_per_s": images / (time.perf_counter() - start)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a folder with one sub-folder per class (default: generate one)")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--size", type=int, default=32, help="training image side")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="the model's")
    parser.add_argument("--pipeline-device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: decode (device='mixed') and augment on GPU 0")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        data = args.data or str(make_image_folder(Path(scratch) / "images", args.images, args.classes,
                                                  size=(48, 64), seed=3))
        result = train_one_epoch(data, args.classes, args.batch_size, args.size, args.device, args.pipeline_device)
    print(f"one epoch: {result['images']} images in {result['batches']} batches, loss {result['first_loss']:.3f}"
          f" -> {result['last_loss']:.3f}, {result['images_per_s']:.0f} images/s (model on {args.device}, pipeline "
          f"on {args.pipeline_device})")
    return result


if __name__ == "__main__":
    main()
