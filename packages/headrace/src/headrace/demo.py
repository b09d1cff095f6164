"""The main job: the ResNet-50 training pipeline on an image folder, with a progress bar and its throughput."""

from __future__ import annotations

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
    """`python -m headrace.demo`, the same as `headrace demo`."""
    import sys

    from headrace.cli import main as cli_main

    sys.exit(cli_main(["demo", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    main()
