"""Read a batch of files with the GIL released once per batch, not four times per file.

Python's os.open / fstat / read / close each release and re-take the GIL; beside a thread running Python (the GPU
stage wrapping a decode, the look-ahead's host work) every re-take can wait out the interpreter's switch interval.
Here numba loops call libc's open, lseek, pread (or mmap) and close directly: sizes first, then every file into one
buffer, or every file mapped into one reserved address range (one munmap for the batch when its last sample is
freed, not one per file: an unmapping interrupts every thread of the process). Anything unusual (an error, a file
that changed size between the two loops, one that cannot be mapped) is left to the caller's per-file reader, which
raises the error with its message."""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import sys

import numba
import numpy as np

from headrace_kernels.numba_calls import bind, libc_function


@numba.njit(nogil=True, cache=True)
def _open_and_size(c_open, c_lseek, read_only, seek_end, name_at, fds, sizes):
    for i in range(len(name_at)):
        fd = c_open(name_at[i], read_only)
        fds[i] = fd
        sizes[i] = c_lseek(fd, 0, seek_end) if fd >= 0 else -1


@numba.njit(nogil=True, cache=True)
def _read_and_close(c_pread, c_close, fds, sizes, out_at, got):
    for i in range(len(fds)):
        if fds[i] < 0:
            got[i] = -1
            continue
        total = 0
        while total < sizes[i]:  # pread may return less than asked
            step = c_pread(fds[i], out_at[i] + np.uint64(total), np.uint64(sizes[i] - total), total)
            if step <= 0:
                break
            total += step
        got[i] = total
        c_close(fds[i])


@numba.njit(nogil=True, cache=True)
def _map_and_close(c_mmap, c_close, prot, flags, fds, sizes, at, got):
    for i in range(len(fds)):
        if fds[i] < 0:
            got[i] = -1
            continue
        if sizes[i] > 0:
            # MAP_FIXED over the batch's reserved range: the file's pages replace the reservation's
            address = c_mmap(at[i], np.uint64(sizes[i]), prot, flags, fds[i], 0)
            got[i] = sizes[i] if address == at[i] else -1
        c_close(fds[i])


@functools.lru_cache(maxsize=1)
def _loops():
    """(sizes, read) loops bound to libc's open, lseek, pread and close; None off Linux. The functions are
    arguments of the numba loops (not globals), so numba caches the compiled loops on disk."""
    if not sys.platform.startswith("linux"):
        return None
    u64, i32, i64 = ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64
    c_open = libc_function("open", [u64, i32], i32)  # open(path, O_RDONLY): no mode argument is read
    c_lseek = libc_function("lseek", [i32, i64, i32], i64)
    c_pread = libc_function("pread", [i32, u64, u64, i64], i64)
    c_close = libc_function("close", [i32], i32)
    # O_NONBLOCK: a FIFO named as a sample must not block the open (regular files ignore the flag)
    read_only = np.int32(os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    seek_end = np.int32(os.SEEK_END)

    return bind(_open_and_size, c_open, c_lseek, read_only, seek_end), bind(_read_and_close, c_pread, c_close)


@functools.lru_cache(maxsize=1)
def _map_loop():
    """The loop that maps each open file at a given address (MAP_FIXED, read-only, private) and closes it."""
    u64, i32, i64 = ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64
    c_mmap = libc_function("mmap", [u64, u64, i32, i32, i32, i64], u64)
    c_close = libc_function("close", [i32], i32)
    fixed = 0x10  # MAP_FIXED on Linux (the mmap module does not name it)
    return bind(_map_and_close, c_mmap, c_close, np.int32(mmap.PROT_READ), np.int32(mmap.MAP_PRIVATE | fixed))


class BatchFileReader:
    """Reads files of a fixed list by index; `read(indices, fallback)` returns one uint8 array per index (views
    into one buffer per batch), with `fallback(index)` reading the files the fast path could not."""

    def __init__(self, paths: list[str], max_bytes: int = 1 << 31):
        self.max_bytes = max_bytes  # a larger file goes to the per-file reader (its error), never into the buffer
        encoded = [os.fsencode(p) + b"\0" for p in paths]
        self.names = np.frombuffer(b"".join(encoded), np.uint8)
        starts = np.concatenate([[0], np.cumsum([len(e) for e in encoded])[:-1]]) if encoded else np.zeros(0)
        self.name_at = np.uint64(self.names.ctypes.data) + starts.astype(np.uint64)

    @staticmethod
    def available() -> bool:
        try:
            return _loops() is not None
        except (OSError, AttributeError, ImportError):
            return False

    def _open(self, indices: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(descriptors, sizes (-1: for the per-file reader), which go to the per-file reader) of these files."""
        open_and_size, _ = _loops()
        n = len(indices)
        fds, sizes = np.zeros(n, np.int32), np.zeros(n, np.int64)
        open_and_size(self.name_at[np.asarray(indices, np.int64)], fds, sizes)
        # empty or oversized (and devices, which report 0): left to the per-file reader, which checks what they are
        odd = (sizes <= 0) | (sizes > self.max_bytes)
        sizes[odd] = -1
        return fds, sizes, odd

    @staticmethod
    def _views(buffer: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
        ends = starts + np.maximum(sizes, 0)
        return [buffer[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]

    def read(self, indices: list[int], fallback, into=None) -> list[np.ndarray]:
        """Copies of the files, in one buffer: `into(nbytes)` where given and it returns a uint8 array (a worker's
        shared block, so the bytes need no second copy), else a new one."""
        fds, sizes, odd = self._open(indices)
        sizes_ok = np.maximum(sizes, 0)
        ends = np.cumsum(sizes_ok)
        total = max(int(ends[-1]) if len(indices) else 0, 1)
        buffer = into(total) if into is not None else None
        if buffer is None:
            buffer = np.empty(total, np.uint8)
        starts = ends - sizes_ok
        got = np.zeros(len(indices), np.int64)
        _loops()[1](fds, sizes, np.uint64(buffer.ctypes.data) + starts.astype(np.uint64), got)
        out = self._views(buffer, starts, sizes)
        for i in np.flatnonzero((got != sizes) | (fds < 0) | odd).tolist():
            out[i] = fallback(indices[i])  # an error to report, or a file that changed under us: read it alone
        return out

    def map(self, indices: list[int], fallback) -> list[np.ndarray]:
        """Read-only views of the files mapped into memory: nothing is copied until a sample's bytes are read. The
        batch's files share one reserved range, unmapped when the last view of the batch is freed. A file truncated
        while its view is in use raises SIGBUS when the lost pages are touched (as in DALI, whose readers map)."""
        fds, sizes, odd = self._open(indices)
        page = mmap.PAGESIZE
        slots = (np.maximum(sizes, 0) + page - 1) // page * page
        starts = np.cumsum(slots) - slots
        reserved = mmap.mmap(-1, max(int(slots.sum()), page), flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        buffer = np.frombuffer(reserved, np.uint8)  # keeps the reservation (and so every mapping in it) alive
        got = np.zeros(len(indices), np.int64)
        _map_loop()(fds, sizes, np.uint64(buffer.ctypes.data) + starts.astype(np.uint64), got)
        out = self._views(buffer, starts, sizes)
        for i in np.flatnonzero((got != sizes) | (fds < 0) | odd).tolist():
            out[i] = fallback(indices[i])  # an error to report, a file that cannot be mapped: read it alone
        return out
