"""CPU kernels of decoders.inflate and experimental.inflate: zlib (DEFLATE, ZLIB) or the lz4 package (LZ4 blocks),
each chunk's output bounded by the size its shape gives, so that a hostile stream cannot inflate without limit."""

from __future__ import annotations

import math
import zlib

import numpy as np

from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel

MAX_OUTPUT_BYTES = 1 << 31


def _ints(value, name: str) -> list[int] | None:
    if value is None:
        return None
    values = [int(v) for v in np.asarray(value).reshape(-1)]
    if any(v < 0 for v in values):
        raise ValueError(f"argument '{name}' must not be negative, got {values[:8]}")
    return values


def chunk_bounds(size: int, args: dict) -> list[tuple[int, int]] | None:
    """(start, end) of each chunk in a sample of `size` bytes, None for a sample that is one chunk."""
    offsets, sizes = _ints(args.get("chunk_offsets"), "chunk_offsets"), _ints(args.get("chunk_sizes"), "chunk_sizes")
    if offsets is None and sizes is None:
        return None
    if offsets is not None and sizes is not None and len(offsets) != len(sizes):
        raise ValueError(f"arguments 'chunk_offsets' ({len(offsets)} values) and 'chunk_sizes' ({len(sizes)}) must "
                         "have as many values")
    if offsets is None:
        offsets = [int(v) for v in np.concatenate([[0], np.cumsum(sizes)[:-1]])] if sizes else []
    if sizes is None:
        sizes = [b - a for a, b in zip(offsets, [*offsets[1:], size], strict=True)]
        if any(s < 0 for s in sizes):
            raise ValueError(f"argument 'chunk_offsets' must be increasing without chunk_sizes, got {offsets[:8]}")
    bounds = [(a, a + s) for a, s in zip(offsets, sizes, strict=True)]
    for i, (a, b) in enumerate(bounds):
        if b > size:
            raise ValueError(f"chunk {i} (bytes {a} to {b}) reaches past the end of the sample ({size} bytes): "
                             "check 'chunk_offsets' and 'chunk_sizes'")
    return bounds


def chunk_shape(args: dict) -> tuple[int, ...]:
    shape = tuple(int(v) for v in np.asarray(args["shape"]).reshape(-1))
    if any(d < 0 for d in shape):
        raise ValueError(f"argument 'shape' must not be negative, got {shape}")
    return shape


def inflate_chunk(data: bytes, algorithm: str, nbytes: int) -> bytes:
    """`data` decompressed, exactly `nbytes` long; ValueError otherwise (never inflating past nbytes + 1)."""
    if algorithm == "LZ4":
        try:
            import lz4.block
        except ImportError:
            raise ValueError("algorithm 'LZ4' needs the lz4 package (pip install lz4); 'DEFLATE' and 'ZLIB' need "
                             "nothing more") from None
        try:
            out = lz4.block.decompress(data, uncompressed_size=nbytes)
        except lz4.block.LZ4BlockError as exc:
            raise ValueError(f"not a valid LZ4 block of {nbytes} bytes ({exc})") from None
    elif algorithm in ("DEFLATE", "ZLIB"):
        inflater = zlib.decompressobj(-15 if algorithm == "DEFLATE" else 15)
        try:
            out = inflater.decompress(data, nbytes + 1)
        except zlib.error as exc:
            raise ValueError(f"not a valid {algorithm} stream ({exc})") from None
        if len(out) <= nbytes and not inflater.eof:
            raise ValueError(f"the {algorithm} stream is truncated or inflates to more than {nbytes} bytes (arguments "
                             "'shape' and 'dtype')")
    else:
        raise ValueError(f"argument 'algorithm' must be one of LZ4, DEFLATE, ZLIB, got {algorithm!r}")
    if len(out) != nbytes:
        got = f"more than {nbytes}" if len(out) > nbytes else str(len(out))
        raise ValueError(f"the data inflates to {got} bytes; arguments 'shape' and 'dtype' say {nbytes}")
    return out


def inflate_sample(raw: bytes, args: dict) -> np.ndarray:
    """One sample inflated into its array (chunks stacked along a new outer axis)."""
    shape, dtype = chunk_shape(args), numpy_dtype(args["dtype"])
    nbytes = math.prod(shape) * dtype.itemsize
    bounds = chunk_bounds(len(raw), args)
    count = 1 if bounds is None else len(bounds)
    if nbytes * count > MAX_OUTPUT_BYTES:
        raise ValueError(f"the output would be {nbytes * count:,} bytes, more than a sample may have")
    chunks = [raw] if bounds is None else [raw[a:b] for a, b in bounds]
    out = np.empty((count, nbytes), np.uint8)
    for i, chunk in enumerate(chunks):
        try:
            out[i] = np.frombuffer(inflate_chunk(chunk, args["algorithm"], nbytes), np.uint8)
        except ValueError as exc:
            raise ValueError(f"chunk {i}: {exc}" if bounds is not None else str(exc)) from None
    data = out.reshape(-1).view(dtype)
    return data.reshape(shape if bounds is None else (count, *shape))


def sample_bytes(data, op: str) -> bytes:
    """The bytes of a 1D uint8 input sample."""
    array = np.asarray(data)
    if array.ndim != 1 or array.dtype not in (np.uint8, np.int8):
        raise ValueError(f"{op} needs 1D uint8 samples of compressed bytes, got {array.dtype} of shape "
                         f"{array.shape}")
    return array.tobytes()


@cpu_kernel("decoders.inflate", "experimental.inflate")
def inflate(inputs, args, ctx):
    return inflate_sample(sample_bytes(inputs[0], "inflate"), args)
