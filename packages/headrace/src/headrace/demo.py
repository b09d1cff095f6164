"""The main job: the ResNet-50 training pipeline on an image folder, with a progress bar and its throughput."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from headrace import fn, pipeline_def, types

IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
IMAGENET_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@pipeline_def(batch_size=128, num_threads=2, device_id=None, seed=42)
def resnet50_train(data_dir: str, device: str = "cpu"):
    """ImageNet training preprocessing, as DALI's ResNet-50 example writes it."""
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed" if device == "gpu" else "cpu",
                                           output_type=types.RGB, random_area=[0.08, 1.0],
                                           random_aspect_ratio=[0.75, 1.333])
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=IMAGENET_MEAN,
                                      std=IMAGENET_STD, mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


@pipeline_def(batch_size=128, num_threads=2, device_id=None, seed=42)
def resnet50_val(data_dir: str, device: str = "cpu"):
    """ImageNet validation preprocessing: decode, shorter side to 256, centre crop 224, normalize."""
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=False, name="Reader")
    images = fn.decoders.image(jpegs, device="mixed" if device == "gpu" else "cpu", output_type=types.RGB)
    images = fn.resize(images, resize_shorter=256)
    images = fn.crop_mirror_normalize(images, crop=(224, 224), dtype=types.FLOAT16, output_layout="CHW",
                                      mean=IMAGENET_MEAN, std=IMAGENET_STD)
    return images, labels


def main(argv: list[str] | None = None) -> None:
    from tqdm import tqdm

    from headrace.data.synthetic import make_image_folder

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, help="an image folder (one sub-folder per class); default: generate one")
    parser.add_argument("--images", type=int, default=1000, help="how many JPEGs to generate without --data")
    parser.add_argument("--workdir", type=Path, default=Path("build/demo"), help="where generated data goes")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("build/demo/resnet50_train.json"),
                        help="where to write the pipeline file")
    args = parser.parse_args(argv)

    data = args.data
    if data is None:
        data = args.workdir / f"images_{args.images}"
        if not data.is_dir():
            make_image_folder(data, num_images=args.images, progress=True)
    pipe = resnet50_train(data_dir=str(data), batch_size=args.batch_size, num_threads=args.threads)
    start = time.perf_counter()
    pipe.build()
    size = pipe.epoch_size("Reader")
    batches = -(-size // args.batch_size)
    pipe.run()
    first = time.perf_counter() - start
    print(f"{size} images in {data}; build + first batch {first:.2f} s")
    for epoch in range(args.epochs):
        images = 0
        begin = time.perf_counter()
        with tqdm(total=batches * args.batch_size, desc=f"epoch {epoch}", unit="img") as bar:
            for _ in range(batches):
                out, _labels = pipe.run()
                images += len(out)
                bar.update(len(out))
        rate = images / (time.perf_counter() - begin)
        print(f"epoch {epoch}: {images} images, {rate:,.0f} images/s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pipe.serialize(args.out)
    print(f"pipeline file written to {args.out}")
    pipe.close()


if __name__ == "__main__":
    main()
