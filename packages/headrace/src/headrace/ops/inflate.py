"""Schemas of `decoders.inflate` and its older name `experimental.inflate`, as DALI's: decompress each sample (one
chunk, or several chunks of one shape stacked along a new outer axis) into an array of the given shape and type."""

from __future__ import annotations

from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
from headrace.schema import REQUIRED, Arg, Limits, OpSchema, OutputSpec, SpecArgs, registrar

register = registrar(__name__)

ALGORITHMS = ("LZ4", "DEFLATE", "ZLIB")
_OFFSETS = Limits(0, (1 << 31) - 1)


def _chunked(args: dict, per_sample: frozenset) -> bool:
    return any(args.get(name) is not None or name in per_sample for name in ("chunk_offsets", "chunk_sizes"))


def _inflated(a: SpecArgs) -> list[OutputSpec]:
    """The inflated data: of `dtype` and `shape` (after an outer axis of chunks where chunks are given)."""
    chunked = _chunked(a.args, a.per_sample)
    layout = a.args["layout"] or None
    if layout and chunked:
        layout = a.args["sequence_axis_name"] + layout
    shape = a.literal("shape")
    dims = None if shape is None else ((-1, *shape) if chunked else tuple(shape))
    return [OutputSpec(numpy_dtype(a.args["dtype"]), layout, dims)]


_ARGS = (
    Arg("shape", "int", REQUIRED, "Shape of one inflated chunk (of the whole sample when it is one chunk).",
        tensor_input=True, list_of=True, list_len=(0, 64), limits=Limits(0, 1 << 31, max_product=1 << 31)),
    Arg("dtype", "dtype", DALIDataType.UINT8, "Element type of the inflated data."),
    Arg("algorithm", "str", "LZ4", "Compression: 'LZ4' (LZ4 blocks, DALI's; needs the lz4 package), or headrace's "
        "'DEFLATE' (raw deflate streams) and 'ZLIB' (zlib streams), read with Python's zlib.", choices=ALGORITHMS),
    Arg("chunk_offsets", "int", None, "Where each chunk starts in the sample; without chunk_sizes, chunks are packed "
        "and the last one ends with the sample.", tensor_input=True, list_of=True, limits=_OFFSETS),
    Arg("chunk_sizes", "int", None, "The size of each chunk in the sample; without chunk_offsets, chunks are packed "
        "from the sample's start.", tensor_input=True, list_of=True, limits=_OFFSETS),
    Arg("layout", "str", "", "Layout of one inflated chunk."),
    Arg("sequence_axis_name", "str", "F", "Layout letter of the outer axis of chunks (where chunks are given and "
        "`layout` is)."),
    Arg("check_output_size", "bool", False, "Accepted for DALI compatibility: headrace always checks that each chunk "
        "inflates to exactly the size of `shape` and `dtype`."),
)

for _name, _doc in (("decoders.inflate", ""), ("experimental.inflate", " (DALI's older name of decoders.inflate)")):
    register(OpSchema(
        name=_name,
        doc="Decompresses each sample, a 1D uint8 array, as DALI's decoders.inflate" + _doc + ": one compressed "
            "chunk, or several (`chunk_offsets` and/or `chunk_sizes`) that each inflate to `shape` and are stacked "
            "along a new outer axis. Each chunk must inflate to exactly prod(shape) * itemsize bytes.",
        args=_ARGS,
        min_inputs=1, max_inputs=1, devices=("cpu", "gpu"),
        state="none", output_spec=_inflated,
    ))
