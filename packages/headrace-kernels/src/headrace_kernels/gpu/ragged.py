"""Ragged batches as one packed array: the samples' rows concatenated (one copy), per-sample offsets, the sample of
each row, padded slot indices for per-sample reductions, and per-sample views of one output buffer. Host metadata is
numpy; the array functions take the array module (numpy or CuPy) as `xp`, so this imports without CuPy and its
index arithmetic is tested on the CPU."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


class PackedSamples(Sequence):
    """Samples of one element type in one 1-D buffer (`flat`): sample i is `sizes[i]` elements from `starts[i]`,
    in `shapes[i]`. A view of a sample is made only when one is asked for (and kept); kernels that read a batch
    as one array or as one record per sample use the buffer, the starts and the shapes, with no Python per sample."""

    def __init__(self, flat: Any, starts: Sequence[int], shapes: Sequence[tuple[int, ...]],
                 sizes: np.ndarray | None = None):
        self.flat, self.shapes = flat, [tuple(s) for s in shapes]
        self.starts = np.asarray(starts, np.int64).reshape(-1)
        self.sizes = element_counts(self.shapes) if sizes is None else np.asarray(sizes, np.int64).reshape(-1)
        """Each sample's element count (the product of its shape; given by a caller that knows them)."""
        self._views: list = [None] * len(self.shapes)

    def __len__(self) -> int:
        return len(self.shapes)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        view = self._views[index]
        if view is None:
            start = int(self.starts[index])
            view = self._views[index] = self.flat[start:start + int(self.sizes[index])].reshape(self.shapes[index])
        return view

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.flat.dtype)

    def back_to_back(self) -> bool:
        """Whether each sample starts where the one before ends (then starts[0].. is one packed array)."""
        return len(self) > 0 and bool(np.array_equal(self.starts[1:], self.starts[:-1] + self.sizes[:-1]))

    def addresses(self) -> np.ndarray:
        """uint64 [n]: each sample's device address (the buffer's, plus its start)."""
        return np.uint64(self.flat.data.ptr) + self.starts.astype(np.uint64) * np.uint64(self.dtype.itemsize)


def element_counts(shapes: Sequence[tuple[int, ...]]) -> np.ndarray:
    """int64 [n]: the element count of each shape."""
    return np.fromiter(map(math.prod, shapes), np.int64, len(shapes))


def direct_samples(value: Any) -> tuple[Any, list[tuple[int, ...]], np.ndarray] | None:
    """(buffer, sample shapes, each sample's device address) of a GPU batch held as one C-contiguous (N, ...) array
    or as PackedSamples, else None: kernels that take one record per sample make them from these, without a view
    per sample."""
    packed = getattr(value, "packed", None)
    if packed is not None:
        return packed.flat, packed.shapes, packed.addresses()
    dense = getattr(value, "dense", None)
    if dense is None or dense.ndim < 2 or not dense.flags.c_contiguous:  # a batch of scalars: nothing to gain
        return None
    n = dense.shape[0]
    addresses = np.uint64(dense.data.ptr) + np.arange(n, dtype=np.uint64) * np.uint64(dense.strides[0])
    return dense, [tuple(dense.shape[1:])] * n, addresses


def offsets(counts: Sequence[int]) -> np.ndarray:
    """int64 [n + 1]: where each sample's rows start in the packed array, then the total row count."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=out[1:])
    return out


def row_samples(counts: Sequence[int]) -> np.ndarray:
    """int32 [R]: the sample index of each packed row."""
    return np.repeat(np.arange(len(counts), dtype=np.int32), np.asarray(counts, dtype=np.int64))


def per_row(table: Any, counts: Sequence[int]) -> np.ndarray:
    """A per-sample host table ([n, ...]) repeated over each sample's rows: [R, ...]."""
    table = np.asarray(table)
    return np.repeat(table, np.asarray(counts, dtype=np.int64), axis=0)


def first_elements(counts: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """int64 [R]: in the concatenation of samples of sizes[i] elements, each holding counts[i] equal rows, the
    position of each row's first element (the first column of labels [N] or [N, k])."""
    starts = offsets(sizes)
    parts = [starts[i] + np.arange(c, dtype=np.int64) * (s // c if c else 0)
             for i, (c, s) in enumerate(zip(counts, sizes, strict=True))]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def contiguous(xp: Any, array: Any) -> Any:
    """`array` itself when it is C-contiguous (no call into the array module), else a contiguous copy."""
    return array if array.flags.c_contiguous else xp.ascontiguousarray(array)


def adjacent_view(xp: Any, samples: Sequence[Any]) -> Any:
    """The samples as one flat view when they lie back to back in one device buffer (a batch uploaded or computed
    as one block: pack would only copy them into the same order), else None."""
    if isinstance(samples, PackedSamples):
        if not samples.back_to_back():
            return None
        start = int(samples.starts[0])
        return samples.flat[start:start + int(samples.sizes.sum())]
    if len(samples) < 2 or getattr(samples[0].data, "ptr", None) is None:  # host arrays: pack copies
        return None
    first = next((s for s in samples if s.size), None)
    if first is None:
        return None
    dtype, start = first.dtype, first.data.ptr
    end = start
    for s in samples:
        if s.dtype != dtype or not s.flags.c_contiguous:
            return None
        if s.size:  # an empty sample may point anywhere
            if s.data.ptr != end:
                return None
            end += s.nbytes
    return xp.ndarray(((end - start) // dtype.itemsize,), dtype, memptr=first.data)


def pack(xp: Any, samples: Sequence[Any] | None, width: int, dense: Any = None, dtype: Any = None) -> Any:
    """The samples' elements as one contiguous [R, width] array, from a list of arrays (one concatenation, or none
    when they lie back to back in one buffer: then the result is a view of it) or from one dense [n, ...] array;
    `dtype`: the packed array's type (the samples' by default)."""
    if dense is not None:
        flat = contiguous(xp, dense).reshape(-1)
    else:
        flat = adjacent_view(xp, samples)
        if flat is None:
            parts = [contiguous(xp, s).reshape(-1) for s in samples]
            if not parts:
                return xp.zeros((0, width), dtype=np.dtype(dtype) if dtype is not None else np.float32)
            flat = parts[0] if len(parts) == 1 else xp.concatenate(parts)
    kind = np.dtype(dtype) if dtype is not None else np.dtype(flat.dtype)
    if flat.dtype != kind:
        flat = flat.astype(kind)
    return flat.reshape(-1, width)


def split(flat: Any, shapes: Sequence[tuple[int, ...]]) -> tuple[Any, PackedSamples | None]:
    """Consecutive samples of `shapes` out of one buffer (no copies): (the buffer as [n, ...], None) when the shapes
    agree, else (None, the samples as PackedSamples of the buffer)."""
    flat = flat.reshape(-1)
    shapes = [tuple(int(d) for d in s) for s in shapes]
    if shapes and len(set(shapes)) == 1:
        return flat.reshape((len(shapes), *shapes[0])), None
    sizes = element_counts(shapes)
    return None, PackedSamples(flat, np.cumsum(sizes) - sizes, shapes)
