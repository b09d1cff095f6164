"""`headrace demo`: the main job. Generate an image folder (or take --data), run the ResNet-50 training pipeline
behind a progress bar, print images/s per epoch, and write the pipeline file."""

from __future__ import annotations

import argparse
from pathlib import Path

from headrace.cli.common import CliError, add_command, need, say
from headrace.cli.loading import positive_int, require_gpu
from headrace.cli.progress import batches_per_epoch, first_batch, rate_text, run_span


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "demo", "the main job: the ResNet-50 training pipeline on an image folder, "
                         "with a progress bar and images/s; writes the pipeline file", main)
    parser.add_argument("--data", type=Path, help="an image folder (one sub-folder per class); default: generate one")
    parser.add_argument("--images", type=positive_int, default=1000, help="how many JPEGs to generate without --data")
    parser.add_argument("--workdir", type=Path, default=Path("build/demo"), help="where generated data goes")
    parser.add_argument("--epochs", type=positive_int, default=2)
    parser.add_argument("--batch-size", type=positive_int, default=128)
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: decode with device='mixed' and run the rest on the GPU")
    parser.add_argument("--out", type=Path, default=Path("build/demo/resnet50_train.json"),
                        help="where to write the pipeline file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (for logs)")


def main(args: argparse.Namespace) -> int:
    from headrace.data.synthetic import make_image_folder
    from headrace.demo import resnet50_train

    need("tqdm", "the progress bar")
    if args.device == "gpu":
        require_gpu(asked=True)
    data = args.data
    if data is None:
        data = args.workdir / f"images_{args.images}"
        if not data.is_dir():
            make_image_folder(data, num_images=args.images, progress=not args.no_progress)
    elif not data.is_dir():
        raise CliError(f"--data {data}: not a folder")
    pipe = resnet50_train(data_dir=str(data), device=args.device, batch_size=args.batch_size,
                          num_threads=args.threads)
    try:
        startup, _ = first_batch(pipe)
        size = pipe.epoch_size("Reader")
        say(f"{size} images in {data}; build + first batch {startup:.2f} s")
        batches = batches_per_epoch(pipe)
        fill = batches * args.batch_size - size
        for epoch in range(args.epochs):
            span = run_span(pipe, batches, f"epoch {epoch}", progress=not args.no_progress)
            extra = f" (its last batch filled with {fill} from the next epoch)" if fill > 0 else ""
            say(f"epoch {epoch}: {size} images in {batches} batches{extra}, {rate_text(span.rate, 'images')}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        pipe.serialize(args.out)
        say(f"pipeline file written to {args.out} (try: headrace inspect {args.out} --out graph.svg)")
    finally:
        pipe.close()
    return 0
