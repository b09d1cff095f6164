"""A CPU stage's values (columns of host arrays) moved between processes: every array copied once into one
shared-memory file (a block), or read into it in the first place (a reader's files: `RunBlock`), the rest
(layouts, sources, states) pickled beside it. The receiver maps the block read-only and gets views into it; when
the last view is freed, the block's number goes back to the writer, which writes a later batch into it. Both
sides keep their blocks mapped: no page is faulted in or zeroed per batch."""

from __future__ import annotations

import errno
import glob
import itertools
import mmap
import os
import tempfile
import weakref

import numpy as np

from headrace_kernels.columns import Column
from headrace_kernels.host_arrays import addresses_and_sizes

ALIGN = 64
"""Every array starts at a multiple of this many bytes in the block (what vectorized loops like)."""

_SHARED = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_counter = itertools.count()


def _block_name(pid: int) -> str:
    return f"headrace-cpu-{pid}-"


def _folders() -> list[str]:
    """Where blocks go: /dev/shm, then the temporary folder (where /dev/shm has no room)."""
    return list(dict.fromkeys([_SHARED, tempfile.gettempdir()]))


def block_paths(pid: int) -> list[str]:
    """The blocks process `pid` has written and not removed (the receiver removes any left when the writer ends)."""
    return [path for folder in _folders() for path in glob.glob(os.path.join(folder, _block_name(pid) + "*"))]


def remove_blocks(pid: int) -> None:
    """Remove the blocks process `pid` wrote and nobody removed (its receiver's job; a new worker's, for a killed
    pipeline's worker that had its pid)."""
    for path in block_paths(pid):
        try:
            os.unlink(path)
        except OSError:
            pass


def _aligned(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def _new_block(number: int, size: int) -> tuple[str, mmap.mmap]:
    """A new shared file of `size` bytes, mapped: in /dev/shm, or in the temporary folder where /dev/shm has no room
    for it (a container's is 64 MiB unless given more). Its pages are reserved up front, so a full file system is
    an error here and never a SIGBUS when the block is written."""
    folders = _folders()
    for folder in folders:
        path = os.path.join(folder, _block_name(os.getpid()) + str(number))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, size)
            else:
                os.ftruncate(fd, size)
            return path, mmap.mmap(fd, size)
        except OSError as exc:
            os.unlink(path)
            full = exc.errno in (errno.ENOSPC, errno.EOPNOTSUPP, errno.EINVAL)
            if not full or folder == folders[-1]:
                raise
        finally:
            os.close(fd)
    raise OSError(errno.ENOSPC, "no room for a shared block")  # not reached: the last folder's error is raised


class RunBlock:
    """The block a worker's next answer goes in, taken before the run: `allocate(n)` hands out its bytes back to
    back (None once it has no room), so a reader reads its files straight into it and they are not copied again."""

    def __init__(self, number: int, array: np.ndarray):
        self.number, self.array, self.used = number, array, 0
        self.address = array.__array_interface__["data"][0]

    def allocate(self, nbytes: int) -> np.ndarray | None:
        if self.used + nbytes > len(self.array):
            return None
        start, self.used = self.used, self.used + nbytes
        return self.array[start:self.used]

    def offset_of(self, flats: list[np.ndarray]) -> int | None:
        """Where C-contiguous arrays that lie back to back in this block's handed-out bytes start, else None (empty
        arrays lie nowhere: numpy gives an empty slice its base's address)."""
        addresses, sizes = addresses_and_sizes(flats)
        kept = sizes > 0
        if not kept.any():
            return None
        offsets, sizes = addresses[kept].astype(np.int64) - self.address, sizes[kept]
        if (offsets[1:] != offsets[:-1] + sizes[:-1]).any():  # not back to back
            return None
        start, end = int(offsets[0]), int(offsets[-1] + sizes[-1])
        return start if 0 <= start and end <= self.used else None


class BlockWriter:
    """Lays arrays out in one block: `add` reserves a place for an array, `add_joined` for 1-D arrays laid back to
    back, each returning its record (offset, dtype, shape); `write_into` copies them all into a block. Arrays that
    already lie in `run`'s block keep their place there (and are copied only if the answer goes in another)."""

    def __init__(self, run: RunBlock | None = None):
        self.run = run
        self.parts: list[tuple[int, np.ndarray | list[np.ndarray], bool]] = []  # (offset, array(s), in place)
        self.size = _aligned(run.used) if run is not None else 0

    def _reserve(self, nbytes: int) -> int:
        offset = self.size
        self.size += _aligned(nbytes)
        return offset

    def add(self, array: np.ndarray) -> tuple[int, str, tuple[int, ...]]:
        array = np.ascontiguousarray(array)
        offset = self.run.offset_of([array]) if self.run is not None else None
        if offset is not None:
            self.parts.append((offset, array, True))
        else:
            offset = self._reserve(array.nbytes)
            self.parts.append((offset, array, False))
        return offset, array.dtype.str, array.shape

    def add_joined(self, flats: list[np.ndarray], dtype: np.dtype, total: int) -> tuple[int, str, tuple[int, ...]]:
        offset = self.run.offset_of(flats) if self.run is not None else None
        if offset is not None:
            self.parts.append((offset, self.run.array[offset:offset + total * dtype.itemsize], True))
        else:
            offset = self._reserve(total * dtype.itemsize)
            if total:
                self.parts.append((offset, flats, False))
        return offset, dtype.str, (total,)

    def write_into(self, block: np.ndarray, in_run_block: bool = False) -> None:
        """Copy the arrays into `block` (at least `size` bytes); those in place stay where they are when `block` is
        the run's block (`in_run_block`)."""
        for offset, part, in_place in self.parts:
            if in_place and in_run_block:
                continue
            if isinstance(part, np.ndarray):
                block[offset:offset + part.nbytes] = part.reshape(-1).view(np.uint8)
            else:
                dtype = part[0].dtype
                count = sum(p.size for p in part)
                np.concatenate(part, out=block[offset:offset + count * dtype.itemsize].view(dtype))


class Blocks:
    """The writer's blocks: shared files kept mapped, each either holding a batch the receiver still reads or free
    for the next one. `write` puts a BlockWriter's arrays into a free block large enough (a new one when none is)
    and returns (its number, its path); `free(number)` takes it back. At most `keep_free` free blocks are kept; the
    numbers of those let go since the last `take_dropped()` are what it returns (the receiver unmaps them)."""

    def __init__(self, keep_free: int = 3):
        self.keep_free = keep_free
        self.mapped: dict[int, tuple[str, mmap.mmap, np.ndarray]] = {}
        self.free_numbers: list[int] = []
        self.dropped: list[int] = []
        self.last_size = 0  # of the last answer written: what the next run's block is taken for

    def take_dropped(self) -> list[int]:
        dropped, self.dropped = self.dropped, []
        return dropped

    def _take(self, size: int) -> int:
        """A free block of at least `size` bytes (the smallest), or a new one with room to spare."""
        fits = [n for n in self.free_numbers if len(self.mapped[n][2]) >= size]
        if fits:
            number = min(fits, key=lambda n: len(self.mapped[n][2]))
            self.free_numbers.remove(number)
            return number
        number = next(_counter)
        path, mapped = _new_block(number, _aligned(size * 5 // 4))  # room for a batch a little larger than this
        self.mapped[number] = (path, mapped, np.frombuffer(mapped, np.uint8))
        return number

    def take_run_block(self) -> RunBlock | None:
        """The block for the next answer, taken now so the run's readers read into it: as large as the last
        answer's with room to spare; None before the first answer (nothing to size it by)."""
        if not self.last_size:
            return None
        number = self._take(self.last_size)
        return RunBlock(number, self.mapped[number][2])

    def write(self, writer: BlockWriter) -> tuple[int, str] | None:
        """The answer's block (number, path) with the writer's arrays in it: the run's block where they fit in it
        (a run block not used goes back), else another; None where there is nothing to write."""
        run = writer.run
        self.last_size = writer.size
        if run is not None and 0 < writer.size <= len(run.array):
            writer.write_into(run.array, in_run_block=True)
            return run.number, self.mapped[run.number][0]
        if run is not None:
            self.free(run.number)
        if not writer.size:
            return None
        number = self._take(writer.size)
        writer.write_into(self.mapped[number][2])
        return number, self.mapped[number][0]

    def free(self, number: int) -> None:
        if number not in self.mapped or number in self.free_numbers:
            return
        self.free_numbers.append(number)
        while len(self.free_numbers) > self.keep_free:  # the smallest go first
            self._drop(min(self.free_numbers, key=lambda n: len(self.mapped[n][2])))

    def _drop(self, number: int) -> None:
        self.free_numbers.remove(number)
        path, mapped, _ = self.mapped.pop(number)
        os.unlink(path)
        self.dropped.append(number)

    def close(self) -> None:
        for path, _, _ in self.mapped.values():
            try:
                os.unlink(path)
            except OSError:
                pass
        self.mapped.clear()
        self.free_numbers.clear()


class BlockReader:
    """The receiver's maps of the writer's blocks (read-only, shared, each mapped once). `batch(number, path)` is a
    new uint8 array over the block for one batch: when it and every view of it are gone, `on_free(number)` is
    called (from whichever thread lets go of the last view)."""

    def __init__(self, on_free):
        self.on_free = on_free
        self.maps: dict[int, mmap.mmap] = {}

    def batch(self, number: int, path: str) -> np.ndarray:
        mapped = self.maps.get(number)
        if mapped is None:
            fd = os.open(path, os.O_RDONLY)
            try:
                mapped = self.maps[number] = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
        block = np.frombuffer(mapped, np.uint8)  # a new array: the views of this batch hold it, not the map
        weakref.finalize(block, self.on_free, number)
        return block

    def drop(self, numbers: list[int]) -> None:
        """Let go of the blocks the writer dropped (free blocks: no view of them is left)."""
        for number in numbers:
            self.maps.pop(number, None)


def _view(block: np.ndarray, record: tuple[int, str, tuple[int, ...]]) -> np.ndarray:
    offset, dtype, shape = record
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    return block[offset:offset + count * dtype.itemsize].view(dtype).reshape(shape)


def pack_column(column: list, writer: BlockWriter) -> tuple:
    """A column's record: its array (dense), or its samples back to back with their element offsets and shapes
    (packed; samples of one element type and rank); else each sample's array, and samples that are not plain
    arrays (None, objects) pickled in the record."""
    if isinstance(column, Column) and column.dense is not None:
        return ("dense", writer.add(column.dense))
    if isinstance(column, Column) and column.packed is not None:
        flat, starts, shapes, counts = column.packed
        return ("packed", writer.add(flat), starts, np.asarray(shapes, np.int64).reshape(len(shapes), -1), counts)
    first = column[0] if len(column) else None
    if isinstance(first, np.ndarray) and not first.dtype.hasobject and all(
            isinstance(s, np.ndarray) and s.dtype == first.dtype and s.ndim == first.ndim for s in column):
        flats = [np.ascontiguousarray(s).reshape(-1) for s in column]
        counts = np.fromiter((f.size for f in flats), np.int64, len(flats))
        starts = np.cumsum(counts) - counts
        shapes = np.fromiter((d for s in column for d in s.shape), np.int64, len(column) * first.ndim)
        record = writer.add_joined(flats, first.dtype, int(counts.sum()))
        return ("packed", record, starts, shapes.reshape(len(column), first.ndim), counts)
    records = [writer.add(s) if isinstance(s, np.ndarray) and not s.dtype.hasobject else ("object", s)
               for s in column]
    return ("samples", records)


def unpack_column(record: tuple, block: np.ndarray) -> list:
    """The column of a record: a Column of the block's dense or packed array, or a list of each sample's view."""
    kind = record[0]
    if kind == "dense":
        return Column.of_dense(_view(block, record[1]))
    if kind == "packed":
        _, flat, starts, shapes, counts = record
        return Column.of_packed(_view(block, flat), starts, list(map(tuple, shapes.tolist())), counts)
    return [r[1] if r[0] == "object" else _view(block, r) for r in record[1]]
