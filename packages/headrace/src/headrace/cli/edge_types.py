"""What flows along each edge of a graph, inferred from the op schemas and arguments without running anything:
the element type and the layout, where they can be known."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from headrace import types
from headrace.graph import OpNode

Key = tuple[str, int]  # (node name, output index)


@dataclasses.dataclass(frozen=True)
class EdgeType:
    """The element type (numpy name) and layout of one node output; None where it cannot be known statically."""

    dtype: str | None = None
    layout: str | None = None
    note: str = ""

    @property
    def label(self) -> str:
        parts = [p for p in (self.dtype, self.layout, f"({self.note})" if self.note else "") if p]
        return " ".join(parts) if parts else "?"


UNKNOWN = EdgeType()
_RULES: dict[str, Callable[[OpNode, list[EdgeType]], list[EdgeType]]] = {}


def rule(*ops: str):
    def decorate(fn):
        for op in ops:
            _RULES[op] = fn
        return fn

    return decorate


def _dtype_name(value) -> str | None:
    return None if value is None else types.to_numpy_dtype(value).name


def _first(inputs: list[EdgeType]) -> EdgeType:
    return inputs[0] if inputs else UNKNOWN


@rule("readers.file")
def _reader(node, inputs):
    return [EdgeType("uint8", None, "encoded file"), EdgeType("int32", None, "label")]


@rule("external_source", "constant")
def _declared(node, inputs):
    return [EdgeType(_dtype_name(node.arg("dtype")), node.arg("layout") or None)]


@rule("decoders.image", "decoders.image_random_crop")
def _decoder(node, inputs):
    return [EdgeType("uint8", "HWC", node.arg("output_type").name)]


@rule("resize", "crop")
def _resampled(node, inputs):
    source = _first(inputs)
    dtype = _dtype_name(node.arg("dtype")) or source.dtype
    return [EdgeType(dtype, source.layout)]


@rule("crop_mirror_normalize")
def _normalized(node, inputs):
    return [EdgeType(_dtype_name(node.arg("dtype")), node.arg("output_layout"))]


@rule("random_resized_crop", "flip", "copy")
def _same(node, inputs):
    source = _first(inputs)
    return [EdgeType(source.dtype, source.layout)]


@rule("cast")
def _cast(node, inputs):
    return [EdgeType(_dtype_name(node.arg("dtype")), _first(inputs).layout)]


@rule("random.coin_flip", "random.uniform", "random.normal")
def _random(node, inputs):
    return [EdgeType(_dtype_name(node.arg("dtype")), None)]


@rule("math.unary")
def _unary(node, inputs):
    source = _first(inputs)
    return [EdgeType(source.dtype, source.layout)]


@rule("math.binary")
def _binary(node, inputs):
    from headrace_kernels.cpu.math_ops import operand_types, result_type

    layout = next((i.layout for i in inputs if i.layout), None)
    if any(i.dtype is None for i in inputs):
        return [EdgeType(None, layout)]
    args = {name: node.arg(name) for name in ("scalar_dtype", "scalar_on_left")}
    left, right = operand_types(args, [np.dtype(i.dtype) for i in inputs])
    return [EdgeType(result_type(node.arg("op"), left, right).name, layout)]


def infer(nodes: list[OpNode]) -> dict[Key, EdgeType]:
    """The type of every node output, for nodes in topological order; unknown ops give '?' edges."""
    known: dict[Key, EdgeType] = {}
    for node in nodes:
        inputs = [known.get((d.op.name, d.index), UNKNOWN) for d in node.inputs]
        found = _RULES.get(node.schema.name, lambda n, i: [])(node, inputs)
        for index in range(len(node.outputs)):
            known[(node.name, index)] = found[index] if index < len(found) else UNKNOWN
    return known
