"""`headrace warmup`: compile once, at install time, what a fresh machine otherwise compiles during its first batch.

numba's compiled loops go to numba's cache (next to the installed package where that is writable, else numba's
user cache) and the CUDA kernels to CuPy's kernel cache, so a new process only loads them. Run it once after
`pip install` (the Docker image does): a fresh process's first batch then takes seconds less."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from headrace.cli.common import add_command, say
from headrace.cli.loading import gpu_count, require_gpu


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "warmup", "compile numba's loops and the CUDA kernels into their caches once, "
                         "so that a new process's first batch only loads them", main)
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto",
                        help="auto: the GPU pipelines too where a GPU can be used; cpu: only the CPU pipelines")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (for logs)")


def warmup_pipelines(data: str, devices: list[str]) -> list[tuple[str, object, bool]]:
    """The pipelines whose first batches compile what a new process needs: the ResNet-50 training and validation
    pipelines on each device, and the fed pipeline that serving runs."""
    from headrace.demo import resnet50_train, resnet50_val

    found = []
    for device in devices:
        device_id = 0 if device == "gpu" else None
        found.append((f"{device} training", resnet50_train(data_dir=data, device=device, batch_size=8,
                                                           num_threads=2, device_id=device_id), False))
        found.append((f"{device} validation", resnet50_val(data_dir=data, device=device, batch_size=8,
                                                           num_threads=2, device_id=device_id), False))
        found.append((f"{device} fed", fed_pipeline(device, device_id), True))
    return found


def fed_pipeline(device: str, device_id: int | None):
    """The served pipeline's shape: encoded images from an external source, decoded, resized and normalized."""
    from headrace import fn, pipeline_def, types
    from headrace.demo import IMAGENET_MEAN, IMAGENET_STD

    @pipeline_def(batch_size=8, num_threads=2, device_id=device_id, seed=1)
    def fed():
        encoded = fn.external_source(name="INPUT", dtype=types.UINT8, ndim=1)
        images = fn.decoders.image(encoded, device="mixed" if device == "gpu" else "cpu", output_type=types.RGB)
        images = fn.resize(images, resize_x=224, resize_y=224)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=IMAGENET_MEAN,
                                        std=IMAGENET_STD)

    return fed()


def run_first_batch(pipe, fed: bool, data: Path) -> None:
    """Build `pipe` and run one batch (feeding a fed pipeline the generated JPEGs)."""
    import numpy as np

    pipe.build()
    try:
        if fed:
            files = sorted(data.rglob("*.jpg"))[:8]
            pipe.feed_input("INPUT", [np.fromfile(f, dtype=np.uint8) for f in files])
        pipe.run()
    finally:
        pipe.close()


def main(args: argparse.Namespace) -> int:
    from headrace.data.synthetic import make_image_folder

    if args.device == "gpu":
        require_gpu(asked=True)
    devices = ["cpu"] + (["gpu"] if args.device == "gpu" or (args.device == "auto" and gpu_count()[0] > 0) else [])
    with tempfile.TemporaryDirectory(prefix="headrace-warmup-") as scratch:
        data = Path(scratch) / "images"
        make_image_folder(data, num_images=16, num_classes=2, size=(96, 128), progress=False)
        pipes = warmup_pipelines(str(data), devices)
        steps: list = pipes
        if not args.no_progress:
            from tqdm import tqdm

            steps = tqdm(pipes, desc="warm-up", unit="pipeline")
        for name, pipe, fed in steps:
            start = time.perf_counter()
            run_first_batch(pipe, fed, data)
            say(f"{name}: {time.perf_counter() - start:.1f} s")
    say(f"compiled for {' and '.join(devices)}: numba's cache and "
        f"{'CuPy' if 'gpu' in devices else 'no'} kernel cache filled; new processes load them")
    return 0
