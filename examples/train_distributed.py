"""Data-parallel training under torchrun: one headrace pipeline per rank, its reader sharded by rank, DDP.

    torchrun --nproc-per-node 2 examples/train_distributed.py                    # CPU ranks, gloo
    torchrun --nproc-per-node 2 examples/train_distributed.py --gpu              # a GPU per rank: NCCL, pipeline on it
    torchrun --nproc-per-node 2 examples/train_distributed.py --check            # assert every sample once per epoch
    torchrun --nproc-per-node 2 examples/train_distributed.py --gpu --no-model --size 224 --images 4096
                                                                                 # the pipelines' own img/s

Each sample's label is its index in the file list, so rank 0 can check, per epoch, that the ranks together saw
every sample exactly once (LastBatchPolicy.PARTIAL with the padding `shard_args()` turns on); the model learns the
class folder, looked up from that index.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from headrace import fn, pipeline_def, types
from headrace.data.synthetic import make_image_folder
from headrace.demo import IMAGENET_MEAN, IMAGENET_STD
from headrace_torch import DALIGenericIterator, LastBatchPolicy, shard_args


@pipeline_def(num_threads=4, device_id=None, seed=7)
def training_images(files: list[str], size: int, gpu: bool):
    """DALI's ResNet-50 training preprocessing at `size`, over this rank's shard of `files` (labels: indices)."""
    jpegs, ids = fn.readers.file(files=files, labels=list(range(len(files))), random_shuffle=True, name="Reader",
                                 **shard_args())
    images = fn.decoders.image_random_crop(jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB,
                                           random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 1.333])
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16 if gpu else types.FLOAT, output_layout="CHW",
                                      mean=IMAGENET_MEAN, std=IMAGENET_STD,
                                      mirror=fn.random.coin_flip(probability=0.5))
    return images, ids


def small_cnn(classes: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))


def listing(root: Path) -> tuple[list[str], list[int]]:
    """The JPEGs under `root`'s class folders, sorted, and each one's class number."""
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files, labels = [], []
    for number, name in enumerate(classes):
        for path in sorted((root / name).iterdir()):
            files.append(str(path))
            labels.append(number)
    return files, labels


def run_rank(args: argparse.Namespace, data: Path) -> dict:
    """Train (or only read, with --no-model) for args.epochs epochs on this rank; rank 0 gets everyone's record."""
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device("cuda", local) if args.gpu else torch.device("cpu")
    files, classes = listing(data)
    class_of = torch.tensor(classes, device=device)
    pipe = training_images(files, args.size, args.gpu, batch_size=args.batch_size, num_threads=args.threads,
                           device_id=local if args.gpu else None, seed=7 + rank)
    loader = DALIGenericIterator(pipe, ["data", "id"], reader_name="Reader", auto_reset=True,
                                 last_batch_policy=LastBatchPolicy.PARTIAL)
    model = optimizer = None
    if not args.no_model:
        model = nn.parallel.DistributedDataParallel(small_cnn(max(classes) + 1).to(device),
                                                    device_ids=[local] if args.gpu else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    seen, losses, timed_images, begin = [], [], 0, 0.0
    for epoch in range(args.epochs):
        if epoch == 1:  # epoch 0 warms up (kernel compiles, decoder buffers): the rate counts the others
            torch.cuda.synchronize(device) if args.gpu else None
            begin = time.perf_counter()
        ids_this_epoch = []
        for batch in loader:
            x, ids = batch[0]["data"], batch[0]["id"].reshape(-1).to(device).long()
            ids_this_epoch.append(ids.cpu().tolist() if args.check else len(ids))
            if model is not None:
                loss = nn.functional.cross_entropy(model(x.float()), class_of[ids])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            if epoch >= 1:
                timed_images += len(ids)
        seen.append(ids_this_epoch)
    torch.cuda.synchronize(device) if args.gpu else None
    seconds = time.perf_counter() - begin
    pipe.close()
    record = {"rank": rank, "images": timed_images, "seconds": seconds, "seen": seen,
              "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None}
    everyone = [None] * world
    dist.all_gather_object(everyone, record)
    return {"world": world, "ranks": everyone, "files": len(files)}


def summarize(result: dict, check: bool) -> dict:
    """Images per second over all ranks (their images over the slowest rank's time) and, with `check`, whether
    every epoch saw each sample exactly once over the ranks."""
    ranks = result["ranks"]
    summary = {"world": result["world"], "images_per_s": sum(r["images"] for r in ranks) / max(
        r["seconds"] for r in ranks), "losses": [(r["first_loss"], r["last_loss"]) for r in ranks]}
    if check:
        epochs = len(ranks[0]["seen"])
        exact = []
        for epoch in range(epochs):
            ids = sorted(i for r in ranks for batch in r["seen"][epoch] for i in batch)
            exact.append(ids == list(range(result["files"])))
        summary["every_sample_once"] = exact
        summary["steps_per_rank"] = [[len(epoch) for epoch in r["seen"]] for r in ranks]
    return summary


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a folder with one sub-folder per class (default: generate one)")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--image-size", type=int, nargs=2, default=(96, 128), metavar=("H", "W"),
                        help="the generated JPEGs' size")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--size", type=int, default=32, help="training image side")
    parser.add_argument("--epochs", type=int, default=3, help="the first one warms up; the rate counts the others")
    parser.add_argument("--threads", type=int, default=4, help="per rank")
    parser.add_argument("--gpu", action="store_true", help="one GPU per rank (LOCAL_RANK), NCCL, device='mixed'")
    parser.add_argument("--no-model", action="store_true", help="read only: the pipelines' own rate")
    parser.add_argument("--check", action="store_true", help="fail unless every epoch saw each sample once")
    parser.add_argument("--json", help="rank 0 writes the summary here")
    args = parser.parse_args(argv)
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first one warms up)")
    dist.init_process_group("nccl" if args.gpu else "gloo")
    try:
        with tempfile.TemporaryDirectory() as scratch:
            data = Path(args.data) if args.data else Path(scratch) / "images"
            if not args.data and dist.get_rank() == 0:
                make_image_folder(data, args.images, args.classes, size=tuple(args.image_size), seed=3)
            # every rank of this host reads rank 0's folder (torchrun --nproc-per-node: one host)
            shared = [str(data)]
            dist.broadcast_object_list(shared)
            dist.barrier()
            result = run_rank(args, Path(shared[0]))
            dist.barrier()  # rank 0 keeps its folder until every rank is done reading
    finally:
        dist.destroy_process_group()
    if int(os.environ.get("RANK", 0)) != 0:
        return None
    summary = summarize(result, args.check)
    print(f"{summary['world']} rank(s): {summary['images_per_s']:.0f} images/s"
          + (f", every sample once per epoch: {summary['every_sample_once']}" if args.check else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(summary))
    if args.check and not all(summary["every_sample_once"]):
        raise SystemExit("a sample was missed or seen twice in an epoch")
    if not args.no_model and not all(math.isfinite(last) for _, last in summary["losses"]):
        raise SystemExit("the loss is not finite")
    return summary


if __name__ == "__main__":
    main()
