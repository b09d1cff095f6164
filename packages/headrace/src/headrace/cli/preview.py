"""`headrace preview FILE --out grid.png`: run one batch and write a contact sheet of its samples. Images are
turned back into viewable RGB (the crop_mirror_normalize node's mean, std, scale, shift and layout undone), and
the small outputs (labels) are written under each tile."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from headrace.cli.common import CliError, add_command, say
from headrace.cli.contact_sheet import write_sheet
from headrace.cli.loading import add_loading_options, load_pipeline, positive_int
from headrace.cli.progress import check_runnable, to_host
from headrace.graph import DataNode, OpNode

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "preview", "run one batch and write a contact sheet of its samples", main)
    add_loading_options(parser)
    parser.add_argument("--out", type=Path, required=True, help="the contact sheet (.png, .jpg or .webp)")
    parser.add_argument("--output", type=int, help="which pipeline output to show (default: the first image output)")
    parser.add_argument("--max", "--samples", dest="max", type=positive_int, default=32,
                        help="show at most the first N samples of the batch (default 32: captions stay readable)")
    parser.add_argument("--cols", type=positive_int, help="tiles per row (default: a near-square grid)")
    parser.add_argument("--max-tile", type=positive_int, default=256,
                        help="shrink samples whose longer side exceeds this many pixels (default 256)")


def _producer(data: DataNode) -> OpNode:
    """The op that made `data`, looking through host/GPU copies."""
    node = data.op
    while node.schema.name == "copy" and node.inputs:
        node = node.inputs[0].op
    return node


def _decoder_colour(node: OpNode) -> str | None:
    """The output_type of the decoder the image came from (following first inputs upstream), if any."""
    while node is not None:
        if node.schema.name.startswith("decoders."):
            return node.arg("output_type").name
        node = node.inputs[0].op if node.inputs else None
    return None


def _to_hwc(sample: np.ndarray, layout: str) -> np.ndarray:
    if sample.ndim == 2:
        return sample[..., None]
    if layout == "CHW" or (not layout and sample.shape[0] in (1, 3, 4) and sample.shape[-1] not in (1, 3, 4)):
        return np.moveaxis(sample, 0, -1)
    return sample


def is_image(sample: np.ndarray, layout: str) -> bool:
    """A 2-D array, or a 3-D HWC/CHW array with 1 to 4 channels, at least 8 pixels a side."""
    if sample.ndim == 2:
        return min(sample.shape) >= 8
    if sample.ndim != 3:
        return False
    hwc = _to_hwc(sample, layout)
    return hwc.shape[2] <= 4 and min(hwc.shape[:2]) >= 8


def denormalize(samples: list[np.ndarray], node: OpNode) -> list[np.ndarray]:
    """Undo crop_mirror_normalize: x = (y - shift) / (scale / std) + mean, HWC float32 (the pad channel dropped)."""
    from headrace_kernels.cpu.geometry_ops import normalize_coefficients

    layout = node.arg("output_layout")
    out = []
    for sample in samples:
        hwc = _to_hwc(np.asarray(sample), layout).astype(np.float32)
        channels = hwc.shape[2] - (1 if node.arg("pad_output") else 0)
        coefficients = {k: node.arg(k) for k in ("mean", "std", "scale", "shift")}
        mean, multiplier, shift = normalize_coefficients(coefficients, channels)
        out.append((hwc[..., :channels] - shift) / multiplier + mean)
    return out


def viewable(samples: list[np.ndarray], data: DataNode, layout: str) -> tuple[list[np.ndarray], str]:
    """uint8 RGB (or gray) tiles of an image output, and how they were made viewable."""
    node = _producer(data)
    if node.schema.name == "crop_mirror_normalize" and not {"mean", "std"} & set(node.arg_inputs):
        values, how = denormalize(samples, node), f"mean/std of '{node.name}' undone"
    else:
        values = [_to_hwc(np.asarray(s), layout) for s in samples]
        how = "as is"
        if any(v.dtype != np.uint8 for v in values):
            values = [v.astype(np.float32) for v in values]
            if all(v.min() >= 0 and v.max() <= 1 for v in values):
                values, how = [v * 255 for v in values], "scaled from [0, 1]"
            else:
                values = [(v - v.min()) / max(float(v.max() - v.min()), 1e-12) * 255 for v in values]
                how = "each sample stretched to its own min..max (no crop_mirror_normalize with literal mean/std)"
    tiles = [np.clip(np.rint(v), 0, 255).astype(np.uint8) for v in values]
    colour = _decoder_colour(node)
    if colour == "BGR":
        tiles = [t[..., ::-1] if t.shape[2] >= 3 else t for t in tiles]
    elif colour == "YCbCr":
        from PIL import Image

        tiles = [np.asarray(Image.fromarray(np.ascontiguousarray(t[..., :3]), "YCbCr").convert("RGB"))
                 if t.shape[2] >= 3 else t for t in tiles]
    tiles = [t[..., 0] if t.shape[2] in (1, 2) else t[..., :3] for t in tiles]
    return tiles, how


def shrink(tile: np.ndarray, longest: int) -> np.ndarray:
    """`tile` scaled down (Lanczos) so that its longer side is at most `longest`."""
    height, width = tile.shape[:2]
    if max(height, width) <= longest:
        return tile
    from PIL import Image

    factor = longest / max(height, width)
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    return np.asarray(Image.fromarray(tile).resize(size, Image.LANCZOS))


def _format(values: np.ndarray) -> str:
    flat = values.ravel()
    if flat.dtype.kind in "iub":
        text = ", ".join(str(int(v)) for v in flat)
    else:
        text = ", ".join(f"{float(v):.3g}" for v in flat)
    return text if flat.size == 1 else f"[{text}]"


def captions(outputs: list, nodes: list[DataNode], shown: int, count: int) -> list[list[str]]:
    """Per sample: the small outputs (labels: at most 4 values), then the sample's source file."""
    lines: list[list[str]] = [[] for _ in range(count)]
    small = [(i, batch) for i, batch in enumerate(outputs) if i != shown
             and all(np.asarray(batch.at(j)).size <= 4 for j in range(count))]
    for j in range(count):
        parts = []
        for i, batch in small:
            value = _format(np.asarray(batch.at(j)))
            producer = nodes[i].op
            is_label = producer.schema.name == "readers.file" and nodes[i].index == 1
            parts.append(f"label {value}" if is_label and len(small) == 1 else f"out{i}={value}")
        lines[j].append("  ".join(parts))
        source = outputs[shown].source_info(j) if hasattr(outputs[shown], "source_info") else ""
        if source:
            lines[j].append(os.path.basename(source))
    return lines


def main(args: argparse.Namespace) -> int:
    if args.out.suffix.lower() not in IMAGE_SUFFIXES:
        raise CliError(f"--out {args.out}: the contact sheet must be a {', '.join(IMAGE_SUFFIXES)} file")
    loaded = load_pipeline(args)
    pipe = loaded.pipe
    check_runnable(pipe)
    try:
        outputs = [to_host(batch) for batch in pipe.run()]
    finally:
        pipe.close()
    layouts = [batch.layout() if hasattr(batch, "layout") else "" for batch in outputs]
    images = [i for i, batch in enumerate(outputs) if len(batch) and is_image(np.asarray(batch.at(0)), layouts[i])]
    if args.output is not None:
        if not 0 <= args.output < len(outputs):
            raise CliError(f"--output {args.output}: the pipeline has {len(outputs)} outputs (0 to {len(outputs) - 1})")
        if args.output not in images:
            shape = np.asarray(outputs[args.output].at(0)).shape
            raise CliError(f"--output {args.output} is not an image (its first sample has shape {shape})")
        shown = args.output
    elif images:
        shown = images[0]
    else:
        shapes = ", ".join(f"{i}: {np.asarray(b.at(0)).shape}" for i, b in enumerate(outputs))
        raise CliError(f"no output of this pipeline is an image (first sample shapes: {shapes})")
    count = min(len(outputs[shown]), args.max)
    samples = [np.asarray(outputs[shown].at(j)) for j in range(count)]
    tiles, how = viewable(samples, pipe.outputs[shown], layouts[shown])
    tiles = [shrink(t, args.max_tile) for t in tiles]
    layout = write_sheet(tiles, captions(outputs, pipe.outputs, shown, count), args.out, args.cols)
    height, width = samples[0].shape[:2] if layouts[shown] != "CHW" else samples[0].shape[1:]
    of = f" of {len(outputs[shown])}; --max to show more" if count < len(outputs[shown]) else ""
    say(f"output {shown} ({count} samples{of}, {height} x {width}, {how}) written to {args.out} "
        f"({layout.size[0]} x {layout.size[1]} px)")
    return 0
