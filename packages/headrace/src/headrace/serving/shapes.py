"""What a pipeline's outputs look like per sample (dtype and dims, -1 where an extent varies), inferred from the op
arguments in the graph: enough to write a Triton model config without running the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headrace.graph import DataNode, OpNode
from headrace.types import DALIImageType, to_numpy_dtype


@dataclass(frozen=True)
class SampleSpec:
    """One sample's element type and dims; None where the graph does not say."""

    dtype: np.dtype | None
    dims: tuple[int, ...] | None


_UNKNOWN = SampleSpec(None, None)
_CHANNELS = {DALIImageType.RGB: 3, DALIImageType.BGR: 3, DALIImageType.YCbCr: 3, DALIImageType.GRAY: 1}


def _literal(node: OpNode, name: str):
    """An argument's literal value; None when it comes from another node per sample."""
    return None if name in node.arg_inputs else node.arg(name)


def _window(node: OpNode) -> tuple[int, int] | None:
    crop = _literal(node, "crop")
    if crop:
        return int(round(crop[0])), int(round(crop[1]))
    crop_h, crop_w = _literal(node, "crop_h"), _literal(node, "crop_w")
    if crop_h and crop_w:
        return int(round(crop_h)), int(round(crop_w))
    return None


def _image(dims: tuple[int, ...] | None) -> tuple[int, int, int]:
    """(height, width, channels) of an HWC input, -1 where unknown."""
    return tuple(dims) if dims is not None and len(dims) == 3 else (-1, -1, -1)


def _resize_hw(node: OpNode) -> tuple[int, int]:
    x, y, size = _literal(node, "resize_x"), _literal(node, "resize_y"), _literal(node, "size")
    if size:
        y, x = size
    mode = node.arg("mode")
    if x and y and mode in ("default", "stretch") and not _literal(node, "max_size"):
        return int(round(y)), int(round(x))
    return -1, -1


def infer(node: OpNode, index: int, inputs: list[SampleSpec]) -> SampleSpec:
    """The spec of output `index` of `node`, given the specs of its inputs."""
    op, first = node.schema.name, (inputs[0] if inputs else _UNKNOWN)
    if op == "external_source":
        dtype = node.arg("dtype")
        ndim = node.arg("ndim")
        return SampleSpec(to_numpy_dtype(dtype) if dtype is not None else None,
                          (-1,) * ndim if ndim is not None else None)
    if op.startswith("decoders."):
        return SampleSpec(np.dtype(np.uint8), (-1, -1, _CHANNELS.get(node.arg("output_type"), -1)))
    if op == "resize":
        dtype = node.arg("dtype")
        return SampleSpec(to_numpy_dtype(dtype) if dtype is not None else first.dtype,
                          (*_resize_hw(node), _image(first.dims)[2]))
    if op == "random_resized_crop":
        h, w = node.arg("size")
        return SampleSpec(first.dtype, (int(round(h)), int(round(w)), _image(first.dims)[2]))
    if op in ("crop", "crop_mirror_normalize"):
        window = _window(node) or _image(first.dims)[:2]
        if node.arg("out_of_bounds_policy") == "trim_to_shape":
            window = (-1, -1)
        channels = _image(first.dims)[2]
        dtype = node.arg("dtype")
        dtype = to_numpy_dtype(dtype) if dtype is not None else first.dtype
        if op == "crop":
            return SampleSpec(dtype, (*window, channels))
        if node.arg("pad_output") and channels != -1:
            channels += 1
        layout = node.arg("output_layout")
        return SampleSpec(dtype, (channels, *window) if layout == "CHW" else (*window, channels))
    if op in ("flip", "copy"):
        return first
    if op == "cast":
        return SampleSpec(to_numpy_dtype(node.arg("dtype")), first.dims)
    if op.startswith("random."):
        return SampleSpec(to_numpy_dtype(node.arg("dtype")), tuple(node.arg("shape")))
    if op == "constant":
        return SampleSpec(to_numpy_dtype(node.arg("dtype")), tuple(node.arg("shape")))
    if op == "readers.file":
        return SampleSpec(np.dtype(np.uint8), (-1,)) if index == 0 else SampleSpec(np.dtype(np.int32), (1,))
    return _UNKNOWN


def output_specs(nodes: list[OpNode], outputs: list[DataNode]) -> list[SampleSpec]:
    """The spec of every pipeline output, walking the graph in its (topological) order."""
    specs: dict[tuple[str, int], SampleSpec] = {}
    for node in nodes:
        inputs = [specs.get((d.op.name, d.index), _UNKNOWN) for d in node.inputs]
        for index in range(len(node.outputs)):
            specs[(node.name, index)] = infer(node, index, inputs)
    return [specs.get((o.op.name, o.index), _UNKNOWN) for o in outputs]
