"""Uploads of host batches through pinned staging memory: one asynchronous copy per batch on the current stream.

A copy from pageable memory blocks the host until the stream reaches it, so an upload queued behind a decode (the
boxes and labels of a detection pipeline) held the GPU stage's thread for the whole decode, and a ragged batch paid
that once per sample. Here the samples are packed into one pinned buffer, copied with one cudaMemcpyAsync, and
handed out as views of one device buffer; the pinned buffer is held until the stream has read it."""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import numba
import numpy as np

from headrace_kernels.gpu import events
from headrace_kernels.gpu.cupy_module import cupy
from headrace_kernels.gpu.memory import SMALL_BYTES, large_size
from headrace_kernels.gpu.ragged import PackedSamples
from headrace_kernels.numba_calls import bind, libc_function

ALIGN = 256
"""Byte alignment of each sample in the packed buffers (CUDA's allocation alignment)."""
SMALL_SAMPLE = 4096
"""Ragged samples of one element type up to this size (boxes, labels, coordinates) are packed back to back instead:
the ops that read them as one array of rows (gpu/ragged.py) then take the upload as it is, with no copy."""

_in_flight: list[tuple[Any, Any]] = []
"""(event, pinned memory) of copies the stream may still be reading: the memory goes back to CuPy's pinned pool
only once its event has passed."""
_lock = threading.Lock()


def hold_until_read(stream, memory) -> None:
    """Keep `memory` (pinned host memory) from CuPy's pool until `stream` has passed the work queued so far."""
    event = events.record(stream)
    with _lock:
        _in_flight[:] = [(e, m) for e, m in _in_flight if not e.done]
        _in_flight.append((event, memory))


@numba.njit(nogil=True, cache=True)
def _copy_all(c_memcpy, targets, sources, sizes):
    for i in range(len(sizes)):
        c_memcpy(targets[i], sources[i], sizes[i])


@functools.lru_cache(maxsize=1)
def _gather():
    """memcpy of every (target, source, size) in one call without the GIL: a copy per sample through numpy gives
    the GIL up and waits to take it back once per sample, behind the threads decoding the next batch."""
    u64 = ctypes.c_uint64
    return bind(_copy_all, libc_function("memcpy", [u64, u64, u64], u64))


def _pack(arrays: list[np.ndarray], packed: np.ndarray, offsets: list[int]) -> None:
    """Copy each array's bytes to packed[offset:]."""
    arrays = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
    sizes = np.array([a.nbytes for a in arrays], np.uint64)
    sources = np.array([a.ctypes.data if a.nbytes else 0 for a in arrays], np.uint64)
    _gather()(np.uint64(packed.ctypes.data) + np.asarray(offsets, np.uint64), sources, sizes)


def pinned_copies(arrays: list[np.ndarray]) -> tuple[list[np.ndarray], Any]:
    """Contiguous uint8 arrays copied back to back into one block of pinned host memory (CuPy's pinned pool), as
    views of it, and the block: give it to `hold_until_read` on each stream that reads the views asynchronously."""
    cp = cupy()
    sizes = np.array([a.nbytes for a in arrays], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    total = int(sizes.sum())
    memory = _pinned(cp, total)
    packed = np.frombuffer(memory, np.uint8, max(total, 1))
    _pack(arrays, packed, offsets.tolist())
    return [packed[o:o + n] for o, n in zip(offsets.tolist(), sizes.tolist(), strict=True)], memory


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def _pinned(cp, size: int):
    """Pinned host memory of at least `size` bytes, in a size class (a power of two up to 1 MiB, then one of 8 steps
    per power of two): batches of varying total size (ragged audio) reuse the pool's blocks instead of page-locking
    new memory every batch, which costs milliseconds."""
    size = max(size, 4096)
    return cp.cuda.alloc_pinned_memory(large_size(size) if size > SMALL_BYTES else 1 << (size - 1).bit_length())


def _staged(cp, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A host array of `shape` and `dtype` in pinned memory (it holds that memory)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return np.frombuffer(_pinned(cp, nbytes), np.uint8, nbytes).view(dtype).reshape(shape)


def _sent(cp, host: np.ndarray, stream):
    """`host` (a view of pinned memory) copied to a new device array on `stream`, held until it is read."""
    device = cp.empty(host.shape, host.dtype)
    send_bytes(device, host, stream)
    return device


def pinned_bytes(nbytes: int) -> np.ndarray:
    """A uint8 host array of `nbytes` in pinned memory (the array holds its block): fill it, then `send_bytes`."""
    return _staged(cupy(), (nbytes,), np.uint8)


def send_bytes(device, host: np.ndarray, stream=None) -> None:
    """Copy `host` (a view of pinned memory) to the start of `device` on `stream` (default: the current one)
    without waiting for the stream to get there; `host`, and so its pinned block, is held until the stream has
    read it."""
    if host.nbytes:
        stream = stream if stream is not None else cupy().cuda.get_current_stream()
        device.data.copy_from_host_async(host.ctypes.data, host.nbytes, stream)
        hold_until_read(stream, host)


def upload_array(array: np.ndarray):
    """One host array on the current device and stream, copied asynchronously through pinned memory."""
    cp = cupy()
    host = _staged(cp, array.shape, array.dtype)
    np.copyto(host, array)
    return _sent(cp, host, cp.cuda.get_current_stream())


def upload_column(column) -> tuple[Any, PackedSamples | None] | None:
    """What `upload_arrays` makes of a Column's samples, from the array they are views of (no Python per sample):
    (one (N, ...) array, None) or (None, PackedSamples); None where the column has no such array, or its samples
    are laid out as `upload_arrays` would not lay them."""
    if not len(column):
        return None
    dense = getattr(column, "dense", None)
    if dense is not None and len(dense) == len(column) and not dense.dtype.hasobject:
        return upload_array(dense), None
    packed = getattr(column, "packed", None)
    if packed is None or len(packed[2]) != len(column):
        return None
    flat, starts, shapes, sizes = packed
    if sizes.max() * flat.dtype.itemsize > SMALL_SAMPLE:  # upload_arrays aligns such samples
        return None
    if sizes.min() == sizes.max() and len(set(shapes)) == 1:  # every sample the same shape: one dense array
        return upload_array(flat[:sizes.sum()].reshape(len(shapes), *shapes[0])), None
    return None, PackedSamples(upload_array(flat), starts, shapes, sizes)


def upload_arrays(arrays: list[np.ndarray]) -> tuple[Any, PackedSamples | list | None]:
    """`arrays` on the current device and stream, copied asynchronously: (one (N, ...) array, None) when they share
    shape and element type, else (None, the samples in one device buffer: PackedSamples when they share an element
    type, else a list of views)."""
    if not arrays:
        return None, []
    cp = cupy()
    stream = cp.cuda.get_current_stream()
    first = arrays[0]
    if all(a.shape == first.shape and a.dtype == first.dtype for a in arrays):
        host = _staged(cp, (len(arrays), *first.shape), first.dtype)
        np.stack(arrays, out=host)
        return _sent(cp, host, stream), None
    offsets, total = [], 0
    one_type = all(a.dtype == first.dtype for a in arrays)
    tight = one_type and all(a.nbytes <= SMALL_SAMPLE for a in arrays)
    for a in arrays:
        offsets.append(total)
        total += a.nbytes if tight else _aligned(a.nbytes)
    packed = pinned_bytes(total)
    if tight:  # one copy for the batch
        np.concatenate([a.reshape(-1) for a in arrays], out=packed.view(first.dtype))
    else:
        _pack(arrays, packed, offsets)
    device = cp.empty(max(total, 1), np.uint8)
    send_bytes(device, packed, stream)
    itemsize = first.dtype.itemsize
    if one_type and (tight or ALIGN % itemsize == 0):  # one typed buffer
        flat = cp.ndarray((device.nbytes // itemsize,), first.dtype, memptr=device.data)
        return None, PackedSamples(flat, np.asarray(offsets, np.int64) // itemsize, [a.shape for a in arrays])
    return None, [cp.ndarray(a.shape, a.dtype, memptr=device.data + offset) if a.nbytes else cp.empty(a.shape, a.dtype)
                  for a, offset in zip(arrays, offsets, strict=True)]
