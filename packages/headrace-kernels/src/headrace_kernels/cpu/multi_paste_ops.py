"""CPU kernel of multi_paste: a paste plan per output sample (which source, which region, where), shared with the
GPU kernel, then numpy slice copies onto a zero canvas, converted as DALI's ConvertSat."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


@dataclasses.dataclass(frozen=True)
class Region:
    """One paste: rows/columns [in_y, in_y + h) x [in_x, in_x + w) of a source onto (out_y, out_x)."""

    source: tuple[int, int]
    """(input index, sample index) of the source image."""
    in_y: int
    in_x: int
    height: int
    width: int
    out_y: int
    out_x: int


def _pairs(args: dict, name: str, count: int, sample: int) -> np.ndarray | None:
    value = args.get(name)
    if value is None:
        return None
    pairs = np.asarray(value, dtype=np.float64).ravel()
    if pairs.size != 2 * count:
        raise ValueError(f"output sample {sample}: argument '{name}' needs one (row, column) pair per pasted region "
                         f"({count} regions, {2 * count} values), got {pairs.size} values")
    if name.endswith("_rel") and np.any((pairs < 0) | (pairs > 1)):
        raise ValueError(f"output sample {sample}: argument '{name}' must lie in [0, 1], got {pairs.tolist()}")
    return pairs.reshape(count, 2)


def sources_of(sample: int, args: dict, num_inputs: int, batch_size: int) -> list[tuple[int, int]]:
    """The (input, sample) pasted into output sample `sample`, in order."""
    ids = args.get("in_ids")
    if ids is None:
        return [(k, sample) for k in range(num_inputs)]
    if num_inputs != 1:
        raise ValueError(f"argument 'in_ids' takes exactly one input, got {num_inputs}")
    ids = [int(v) for v in np.asarray(ids).ravel()]
    for index in ids:
        if not 0 <= index < batch_size:
            raise ValueError(f"output sample {sample}: argument 'in_ids' names sample {index}, the batch has "
                             f"{batch_size}")
    return [(0, index) for index in ids]


def canvas_size(sample: int, args: dict, shapes: dict[tuple[int, int], tuple[int, ...]]) -> tuple[int, int]:
    """(H, W) of output sample `sample`'s canvas: output_size, else the common size of every input sample."""
    size = args.get("output_size")
    if size is not None:
        size = [int(v) for v in np.asarray(size).ravel()]
        if len(size) < 2 or size[0] < 0 or size[1] < 0:
            raise ValueError(f"output sample {sample}: argument 'output_size' must be (H, W), not negative, got "
                             f"{size}")
        return size[0], size[1]
    sizes = {shape[:2] for shape in shapes.values()}
    if len(sizes) != 1:
        raise ValueError(f"give argument 'output_size': the input samples differ in size ({sorted(sizes)})")
    return sizes.pop()


def paste_plan(sample: int, args: dict, sources: list[tuple[int, int]], shapes: dict[tuple[int, int], tuple],
               canvas: tuple[int, int]) -> list[Region]:
    """The regions pasted into output sample `sample`, checked to lie inside their source and the canvas."""
    count = len(sources)
    in_abs, in_rel = _pairs(args, "in_anchors", count, sample), _pairs(args, "in_anchors_rel", count, sample)
    sh_abs, sh_rel = _pairs(args, "shapes", count, sample), _pairs(args, "shapes_rel", count, sample)
    out_abs, out_rel = _pairs(args, "out_anchors", count, sample), _pairs(args, "out_anchors_rel", count, sample)
    regions = []
    for j, source in enumerate(sources):
        src = shapes[source][:2]
        if in_abs is not None:
            anchor = [int(v) for v in in_abs[j]]
        elif in_rel is not None:
            anchor = [math.floor(np.float32(r) * n) for r, n in zip(in_rel[j], src, strict=True)]
        else:
            anchor = [0, 0]
        if sh_abs is not None:
            extent = [int(v) for v in sh_abs[j]]
        elif sh_rel is not None:
            extent = [math.ceil(np.float32(r) * n) for r, n in zip(sh_rel[j], src, strict=True)]
        else:
            extent = [n - a for n, a in zip(src, anchor, strict=True)]
        if out_abs is not None:
            at = [int(v) for v in out_abs[j]]
        elif out_rel is not None:
            at = [math.floor(np.float32(r) * n) for r, n in zip(out_rel[j], canvas, strict=True)]
        else:
            at = [0, 0]
        for k in range(2):
            if not (anchor[k] >= 0 and extent[k] >= 0 and anchor[k] + extent[k] <= src[k]):
                raise ValueError(f"output sample {sample}, region {j}: the region at {anchor} of size {extent} is "
                                 f"not inside its source of size {list(src)} (arguments 'in_anchors' / 'shapes')")
            if not (at[k] >= 0 and at[k] + extent[k] <= canvas[k]):
                raise ValueError(f"output sample {sample}, region {j}: the region of size {extent} at {at} is not "
                                 f"inside the canvas of size {list(canvas)} (arguments 'out_anchors' / "
                                 "'output_size')")
        regions.append(Region(source, anchor[0], anchor[1], extent[0], extent[1], at[0], at[1]))
    return regions


def channels_of(sample: int, regions: list[Region], shapes: dict[tuple[int, int], tuple]) -> int:
    """The canvas's channels: the pasted sources' (which must agree), else input 0's sample `sample`'s."""
    found = {shapes[r.source][2] for r in regions}
    if len(found) > 1:
        raise ValueError(f"output sample {sample}: the pasted images differ in channels ({sorted(found)})")
    return found.pop() if found else shapes[(0, sample)][2]


def check_hwc(shapes: dict[tuple[int, int], tuple]) -> None:
    for (k, i), shape in shapes.items():
        if len(shape) != 3:
            raise ValueError(f"multi_paste expects HWC images, got shape {tuple(shape)} (input {k}, sample {i})")


@cpu_kernel("multi_paste")
def multi_paste(batch_inputs, batch_args, contexts):
    size = len(batch_inputs)
    num_inputs = len(batch_inputs[0]) if size else 0
    images = {(k, i): np.asarray(batch_inputs[i][k]) for i in range(size) for k in range(num_inputs)}
    shapes = {key: image.shape for key, image in images.items()}
    check_hwc(shapes)
    out = []
    for i, args in enumerate(batch_args):
        sources = sources_of(i, args, num_inputs, size)
        canvas = canvas_size(i, args, shapes)
        regions = paste_plan(i, args, sources, shapes, canvas)
        channels = channels_of(i, regions, shapes)
        source_dtype = images[(0, i)].dtype
        dtype = source_dtype if args.get("dtype") is None else numpy_dtype(args["dtype"])
        work = dtype if dtype == source_dtype else np.float64
        result = np.zeros((*canvas, channels), dtype=work)
        for r in regions:
            result[r.out_y:r.out_y + r.height, r.out_x:r.out_x + r.width] = \
                images[r.source][r.in_y:r.in_y + r.height, r.in_x:r.in_x + r.width]
        out.append(result if work == dtype else saturate_cast(result, dtype))
    return out
