"""The SSD300 training pipeline of NVIDIA's public SSD examples, feeding one training step of a tiny detection model.

    python examples/ssd_pipeline.py                          # CPU: generates a few JPEGs and a COCO annotation file
    python examples/ssd_pipeline.py --library dali           # the same pipeline code run by DALI
    python examples/ssd_pipeline.py --device gpu             # decode (mixed) and augment on GPU 0, model on cuda
    python examples/ssd_pipeline.py --data /coco/train2017 --annotations /coco/annotations/instances_train2017.json

readers.coco (ltrb, ratio, skip_empty, shuffle_after_epoch) -> random_bbox_crop (SSD's IoU thresholds, scaling
0.3-1, aspect ratios 0.5-2, allow_no_crop, 1 attempt) -> decoders.image_slice with the crop's anchor and shape ->
flip with bb_flip (coin_flip) -> resize 300x300 -> hsv (float) -> brightness_contrast (uint8) ->
crop_mirror_normalize (CHW, ImageNet mean / std) -> box_encoder against the 8732 SSD300 default boxes. The graph
(`ssd300_training`) is written once against DALI's API and given either library's `fn` and `types` (`library()`
does the import); nothing else differs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

OUTPUTS = ["images", "bboxes", "labels"]
FEATURE_MAPS = (38, 19, 10, 5, 3, 1)  # SSD300's feature map sides
STEPS = (8, 16, 32, 64, 100, 300)  # their strides on the 300-pixel image
SCALES = (21, 45, 99, 153, 207, 261, 315)  # box sizes in pixels, one more than the maps
ASPECT_RATIOS = ((2,), (2, 3), (2, 3), (2, 3), (2,), (2,))
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
SCALE_XY, SCALE_WH = 10.0, 5.0  # the SSD loss's offset scales (1 / variances 0.1 and 0.2)


def library(name: str) -> SimpleNamespace:
    """The pipeline API of `name` ("headrace" or "dali"): fn, pipeline_def, types and the PyTorch iterator."""
    if name == "dali":
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    elif name == "headrace":
        from headrace import fn, pipeline_def, types
        from headrace.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    else:
        raise ValueError(f"library must be 'headrace' or 'dali', got {name!r}")
    return SimpleNamespace(name=name, fn=fn, pipeline_def=pipeline_def, types=types,
                           DALIGenericIterator=DALIGenericIterator, LastBatchPolicy=LastBatchPolicy)


def default_boxes(order: str = "ltrb") -> np.ndarray:
    """SSD300's 8732 default boxes (float32, relative to the image, clipped to [0, 1]) as the public SSD example
    builds them: per feature map, two square boxes and two per extra aspect ratio, at every cell's centre."""
    boxes = []
    for index, side in enumerate(FEATURE_MAPS):
        cells = 300 / STEPS[index]
        small, large = SCALES[index] / 300, SCALES[index + 1] / 300
        sizes = [(small, small), (math.sqrt(small * large),) * 2]
        for alpha in ASPECT_RATIOS[index]:
            w, h = small * math.sqrt(alpha), small / math.sqrt(alpha)
            sizes += [(w, h), (h, w)]
        for w, h in sizes:
            for i, j in itertools.product(range(side), repeat=2):
                boxes.append(((j + 0.5) / cells, (i + 0.5) / cells, w, h))
    xywh = np.clip(np.asarray(boxes, np.float64), 0, 1)
    if order == "xywh":
        return xywh.astype(np.float32)
    ltrb = np.concatenate([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], axis=1)
    return ltrb.astype(np.float32)


def ssd300_training(fn, types, file_root: str, annotations_file: str, device: str = "cpu", shuffle: bool = True,
                    shard_id: int = 0, num_shards: int = 1):
    """The SSD300 training graph for DALI's or headrace's `fn` and `types`: (images (3, 300, 300) float32,
    encoded boxes (8732, 4) float32 as centre x, centre y, width, height, labels (8732,) int32). device "gpu":
    decode on the GPU ("mixed") and augment there; the boxes are flipped and encoded on the GPU too (the public
    example keeps them on the CPU). `shuffle`: shuffle_after_epoch, as the public example."""
    jpegs, bboxes, labels = fn.readers.coco(file_root=file_root, annotations_file=annotations_file, ltrb=True,
                                            ratio=True, skip_empty=True, shuffle_after_epoch=shuffle,
                                            shard_id=shard_id, num_shards=num_shards, pad_last_batch=True,
                                            name="Reader")
    anchor, shape, bboxes, labels = fn.random_bbox_crop(
        bboxes, labels, aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], scaling=[0.3, 1.0],
        bbox_layout="xyXY", allow_no_crop=True, num_attempts=1)
    images = fn.decoders.image_slice(jpegs, anchor, shape, device="mixed" if device == "gpu" else "cpu",
                                     output_type=types.RGB)
    coin = fn.random.coin_flip(probability=0.5)
    if device == "gpu":
        bboxes, labels = bboxes.gpu(), labels.gpu()
    images = fn.flip(images, horizontal=coin)
    bboxes = fn.bb_flip(bboxes, horizontal=coin, ltrb=True)
    images = fn.resize(images, resize_x=300, resize_y=300)
    saturation = fn.random.uniform(range=[0.5, 1.5])
    contrast = fn.random.uniform(range=[0.5, 1.5])
    brightness = fn.random.uniform(range=[0.875, 1.125])
    hue = fn.random.uniform(range=[-0.5, 0.5])
    images = fn.hsv(images, hue=hue, saturation=saturation, dtype=types.FLOAT)  # float: no clipping in between
    images = fn.brightness_contrast(images, brightness=brightness, contrast=contrast, contrast_center=128,
                                    dtype=types.UINT8)
    images = fn.crop_mirror_normalize(images, crop=(300, 300), mean=MEAN, std=STD, mirror=0, dtype=types.FLOAT,
                                      output_layout="CHW")
    bboxes, labels = fn.box_encoder(bboxes, labels, criteria=0.5, anchors=default_boxes("ltrb").ravel().tolist())
    return images, bboxes, labels


def build_pipeline(lib: SimpleNamespace, file_root: str, annotations_file: str, device: str = "cpu",
                   batch_size: int = 4, num_threads: int = 2, seed: int = 15,
                   checkpoint: bool | dict | str | None = None, pipeline_options: dict | None = None, **options):
    """The library's pipeline of `ssd300_training` (CPU only: device_id None; GPU 0 with device "gpu"), checkpointing
    when `checkpoint` is given: True for a fresh start, or a checkpoint to resume from. `pipeline_options`: more
    of the library's pipeline arguments (headrace's executor_options, say)."""
    @lib.pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=0 if device == "gpu" else None,
                      seed=seed, enable_checkpointing=checkpoint is not None, **(pipeline_options or {}))
    def ssd300():
        return ssd300_training(lib.fn, lib.types, file_root, annotations_file, device, **options)

    return ssd300() if checkpoint is None or checkpoint is True else ssd300(checkpoint=checkpoint)


class TinySSD(nn.Module):
    """A detection model of SSD300's shape at a ten-thousandth of its size: six feature maps (38 to 1 cells) from a
    small strided backbone, one 3x3 head per map giving 4 offsets and `classes` scores for each default box."""

    def __init__(self, classes: int, width: int = 8):
        super().__init__()
        self.classes = classes
        stem = [nn.Conv2d(3, width, 3, 2, 1), nn.ReLU(), nn.Conv2d(width, width, 3, 2, 1), nn.ReLU(),
                nn.Conv2d(width, width, 3, 2, 1), nn.ReLU()]  # 300 -> 150 -> 75 -> 38
        self.stages = nn.ModuleList([nn.Sequential(*stem)] + [
            nn.Sequential(nn.Conv2d(width, width, 3, 2, 1), nn.ReLU()) for _ in range(4)  # 19, 10, 5, 3
        ] + [nn.Sequential(nn.Conv2d(width, width, 3, 1, 0), nn.ReLU())])  # 1
        boxes = [2 + 2 * len(r) for r in ASPECT_RATIOS]
        self.heads = nn.ModuleList(nn.Conv2d(width, n * (4 + classes), 3, padding=1) for n in boxes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(offsets (N, 8732, 4), scores (N, 8732, classes)) in the default boxes' order (box kind, row, column)."""
        locs, scores = [], []
        for stage, head in zip(self.stages, self.heads, strict=True):
            x = stage(x)
            out = head(x)
            n, _, h, w = out.shape
            out = out.view(n, -1, 4 + self.classes, h, w).permute(0, 1, 3, 4, 2).reshape(n, -1, 4 + self.classes)
            locs.append(out[..., :4])
            scores.append(out[..., 4:])
        return torch.cat(locs, 1), torch.cat(scores, 1)


def ssd_loss(locs: torch.Tensor, scores: torch.Tensor, boxes: torch.Tensor, labels: torch.Tensor,
             anchors_xywh: torch.Tensor) -> torch.Tensor:
    """SSD's loss, simplified: smooth L1 on the matched boxes' offsets to their default boxes (positives only) plus
    the cross entropy of every default box's label, over the number of positives."""
    positive = labels > 0
    xy = SCALE_XY * (boxes[..., :2] - anchors_xywh[:, :2]) / anchors_xywh[:, 2:]
    wh = SCALE_WH * torch.log(boxes[..., 2:].clamp_min(1e-6) / anchors_xywh[:, 2:])
    target = torch.cat([xy, wh], -1)
    location = nn.functional.smooth_l1_loss(locs, target, reduction="none").sum(-1)
    confidence = nn.functional.cross_entropy(scores.transpose(1, 2), labels.long(), reduction="none")
    count = positive.sum().clamp_min(1)
    return ((location * positive).sum() + confidence.sum() / 10) / count


def train(lib: SimpleNamespace, file_root: str, annotations_file: str, device: str = "cpu", batch_size: int = 4,
          steps: int = 1, model: nn.Module | None = None, classes: int | None = None, seed: int = 15) -> dict:
    """`steps` training steps of a tiny SSD (`model`, default a new TinySSD) on the pipeline's batches."""
    pipe = build_pipeline(lib, file_root, annotations_file, device, batch_size, seed=seed)
    loader = lib.DALIGenericIterator(pipe, OUTPUTS, reader_name="Reader",
                                     last_batch_policy=lib.LastBatchPolicy.PARTIAL, auto_reset=True)
    model_device = "cuda" if device == "gpu" else "cpu"
    if classes is None:
        classes = 1 + len(json.loads(Path(annotations_file).read_text())["categories"])
    model = (model if model is not None else TinySSD(classes)).to(model_device)
    anchors = torch.from_numpy(default_boxes("xywh")).to(model_device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    losses, samples, start = [], 0, time.perf_counter()
    for batch in loader:
        out = batch[0]
        images = out["images"].to(model_device)
        locs, scores = model(images)
        loss = ssd_loss(locs, scores, out["bboxes"].to(model_device), out["labels"].to(model_device), anchors)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        samples += images.shape[0]
        if len(losses) == steps:
            break
    return {"batches": len(losses), "samples": samples, "losses": losses, "model": model,
            "seconds": time.perf_counter() - start}


def write_coco_set(folder: str | Path, count: int = 8, seed: int = 0, categories: int = 3,
                   size: tuple[int, int] = (120, 160)) -> tuple[str, str]:
    """`count` JPEGs of coloured rectangles on a noisy gradient (about `size`, height x width) with a COCO annotation
    file boxing the rectangles (1 to 4 per image, categories by colour; one image without any, which skip_empty
    leaves out); returns (file_root, annotations_file)."""
    import cv2

    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    colors = rng.integers(40, 255, (categories, 3))
    images, annotations = [], []
    for i in range(count):
        height, width = (int(s * rng.uniform(0.8, 1.2)) for s in size)
        ramp = np.linspace(0, 1, width)[None, :, None] * rng.uniform(20, 120, 3) + rng.uniform(0, 80, 3)
        noise = rng.normal(0, 6, (height, width, 3))
        image = np.clip(ramp + np.linspace(0, 40, height)[:, None, None] + noise, 0, 255).astype(np.uint8)
        image_id = 100 + 7 * i
        objects = 0 if i == count // 2 else int(rng.integers(1, 5))
        for _ in range(objects):
            w, h = int(rng.integers(width // 8, width // 2)), int(rng.integers(height // 8, height // 2))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            category = int(rng.integers(0, categories))
            image[y:y + h, x:x + w] = colors[category]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": 10 + category,
                                "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0,
                                "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]]})
        name = f"{i:06d}.jpg"
        cv2.imwrite(str(folder / "images" / name), image[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})
    data = {"images": images, "annotations": annotations,
            "categories": [{"id": 10 + c, "name": f"class{c}"} for c in range(categories)]}
    annotations_file = folder / "annotations.json"
    annotations_file.write_text(json.dumps(data))
    return str(folder / "images"), str(annotations_file)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the COCO images' folder (default: generate a few)")
    parser.add_argument("--annotations", help="the COCO annotation file (with --data)")
    parser.add_argument("--library", choices=("headrace", "dali"), default="headrace")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="where the pipeline runs")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1, help="training steps")
    args = parser.parse_args(argv)
    if bool(args.data) != bool(args.annotations):
        parser.error("give --data and --annotations together")
    lib = library(args.library)
    with tempfile.TemporaryDirectory() as scratch:
        root, annotations = (args.data, args.annotations) if args.data else write_coco_set(scratch)
        result = train(lib, root, annotations, args.device, args.batch_size, args.steps)
    losses = result["losses"]
    print(f"{result['samples']} images in {result['batches']} step(s), SSD loss {losses[0]:.3f} -> {losses[-1]:.3f} "
          f"({args.library}, pipeline on {args.device})")
    return result


if __name__ == "__main__":
    main()
