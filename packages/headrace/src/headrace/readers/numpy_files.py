"""`readers.numpy`: arrays from .npy files, whole or a region of interest, on the CPU or (through kvikio) the GPU.

The header is parsed with numpy.lib.format; only the bytes the ROI needs are read: the span of the outermost stored
axis that the ROI covers (the ROI's own bytes when it spans the inner axes whole). A file that is not a .npy, is
big-endian (refused, as DALI) or is shorter than its header says is an error naming the reader, the file and the
sample. Also `IndexedReader`, the base of the readers here: readers.file's epochs, shards, padding, shuffling and
checkpoints over a list of items that a subclass reads by index.
"""

from __future__ import annotations

import fnmatch
import math
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from headrace.errors import SampleError, SchemaError
from headrace.ops import data_readers  # noqa: F401 - registers the schemas of the readers
from headrace.readers.file import MAX_SAMPLE_BYTES, FileReader
from headrace.schema import short_repr
from headrace_kernels.bounded_io import read_bounded, reason
from headrace_kernels.npy_header import MAX_HEADER_BYTES, read_npy_header
from headrace_kernels.registry import reader

OP = "readers.numpy"
MAX_FILE_LIST_BYTES = 1 << 30
"""The largest file list read (1 GiB); a larger one, or anything but a regular file, is refused."""


class IndexedReader(FileReader):
    """readers.file's order of `names` (its epochs, shards, padding, shuffling, checkpoints), whose items a subclass
    reads with `read_item(index)` -> one array per output."""

    op = "readers.file"

    def __init__(self, node: str, args: dict, names: list[str], batch_size: int, seed: int,
                 pool: ThreadPoolExecutor | None):
        where = f"{self.op} (node '{node}')"
        shards = args["num_shards"]
        if not 0 <= args["shard_id"] < shards:
            raise SchemaError(f"{where}: shard_id {args['shard_id']} is not in [0, num_shards={shards})")
        if not names:
            raise SchemaError(f"{where}: the data set is empty")
        if len(names) < shards:
            raise SchemaError(f"{where}: {len(names)} samples cannot be split into num_shards={shards} shards")
        after_epoch = bool(args.get("shuffle_after_epoch", False))
        for other in ("random_shuffle", "stick_to_shard"):
            if after_epoch and args[other]:
                raise SchemaError(f"{where}: shuffle_after_epoch and {other} cannot both be True")
        own_seed = args.get("shuffle_after_epoch_seed")
        files_args = {**args, "file_root": None, "file_list": None, "files": names,
                      "labels": list(range(len(names))), "seed": -1 if own_seed is None else own_seed,
                      "shuffle_after_epoch": after_epoch, "stick_to_shard": bool(args["stick_to_shard"] or after_epoch),
                      "on_error": "raise"}
        super().__init__(node, files_args, batch_size, seed, pool)

    def read_item(self, index: int) -> tuple[Any, ...]:
        raise NotImplementedError

    def _read_all(self, indices: list[int]) -> list:
        return [self.read_item(i) for i in indices]

    def _read_batch(self, indices: list[int]) -> list:
        return self._read_all(indices)

    @staticmethod
    def _columns(items: list[tuple]) -> list[list]:
        return [list(column) for column in zip(*items, strict=True)]

    def next_batch(self, iteration: int) -> tuple[list[list], list[str]]:
        """(one list of samples per output, source name per sample)."""
        indices = self.next_indices()
        return self._columns(self.batch_data(indices)), self.sources(indices)

    def replacements(self, slots: list[int]) -> tuple[list[list], list[str]]:
        (items, _), sources = super().replacements(slots)
        return self._columns(items), sources


def list_folder(root: str, pattern: str, node: str, op: str = OP) -> list[str]:
    """DALI's listing (readers.numpy's, and the FITS reader's): the files of `root` matching `pattern`
    (case-sensitively), sorted, then those of each direct sub-folder, sub-folders sorted; errors name `op`."""
    where = f"{op} (node '{node}'): file_root {short_repr(root)}"
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{where} cannot be listed ({reason(exc)})") from None
    names = [e.name for e in entries if e.is_file() and fnmatch.fnmatchcase(e.name, pattern)]
    for folder in (e for e in entries if e.is_dir()):
        try:
            inner = sorted(e.name for e in os.scandir(folder.path) if e.is_file())
        except OSError as exc:
            raise SchemaError(f"{where}: sub-folder {short_repr(folder.name)} cannot be listed ({reason(exc)})") \
                from None
        names += [f"{folder.name}/{n}" for n in inner if fnmatch.fnmatchcase(n, pattern)]
    return names


def file_names(args: dict, node: str, op: str = OP) -> tuple[list[str], list[str]]:
    """(the files' paths, their names as DALI's source_info gives them: as listed, a file of file_root's own
    listing as './name'), from file_list, files or file_root's listing (readers.numpy's and the FITS reader's);
    errors name `op`."""
    root = args.get("file_root")
    listed = None
    if args.get("file_list"):
        try:
            text = read_bounded(args["file_list"], MAX_FILE_LIST_BYTES).decode("utf-8", errors="surrogateescape")
        except ValueError as exc:
            raise SchemaError(f"{op} (node '{node}'): file_list {short_repr(args['file_list'])} {exc}") from None
        names = [line.strip() for line in text.splitlines() if line.strip()]
    elif args.get("files"):
        names = list(args["files"])
    elif root:
        names = list_folder(root, args["file_filter"], node, op)
        listed = [n if "/" in n else f"./{n}" for n in names]
    else:
        raise SchemaError(f"{op} (node '{node}'): give file_root, file_list or files")
    bad = next((n for n in names if "\x00" in n), None)
    if bad is not None:
        raise SchemaError(f"{op} (node '{node}'): file name {short_repr(bad)} contains a NUL byte")
    paths = [os.path.join(root, n) if root and not os.path.isabs(n) else n for n in names]
    return paths, names if listed is None else listed


class NpyHeader(NamedTuple):
    """What a .npy header says: the array's shape, element type, whether it is stored in Fortran order, and where
    its data starts."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    offset: int


def parse_header(fd: int, size: int) -> NpyHeader:
    """The header of the open .npy file `fd` of `size` bytes; ValueError saying what is wrong with it."""
    try:
        shape, dtype, fortran, offset = read_npy_header(os.pread(fd, min(size, MAX_HEADER_BYTES), 0))
    except ValueError as exc:
        raise ValueError(f"not a readable .npy header ({exc})") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"element type {dtype} is not a plain number type")
    if dtype.byteorder == ">" and dtype.itemsize > 1:
        raise ValueError("big-endian files are not supported (as in DALI)")
    header = NpyHeader(shape, dtype.newbyteorder("="), fortran, offset)
    nbytes = math.prod(header.shape) * dtype.itemsize
    if nbytes > MAX_SAMPLE_BYTES:
        raise ValueError(f"its array is {nbytes:,} bytes, more than a sample may have ({MAX_SAMPLE_BYTES:,})")
    if size < header.offset + nbytes:
        raise ValueError(f"truncated: its header says {nbytes:,} bytes of data, the file has "
                         f"{max(0, size - header.offset):,}")
    return header


class Roi(NamedTuple):
    """The ROI of one array: start and end per axis (either may reach out of the array)."""

    start: tuple[int, ...]
    end: tuple[int, ...]


def _rel(value: float, extent: int) -> int:
    """A relative coordinate in elements as DALI computes it: the product in float32, rounded half away from zero
    (0.9 * 5 is 4.5 in float32, so 5)."""
    x = float(np.float32(value) * np.float32(extent))
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def roi_of(args: dict, shape: tuple[int, ...]) -> Roi | None:
    """The ROI the arguments give for an array of `shape`, or None when they give none; ValueError if they do not
    fit the array."""
    given = {k: args.get(k) for k in ("roi_start", "rel_roi_start", "roi_end", "rel_roi_end", "roi_shape",
                                      "rel_roi_shape")}
    if all(v is None for v in given.values()):
        return None
    ndim = len(shape)
    axes = list(args.get("roi_axes") or range(ndim))
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise ValueError(f"roi_axes {axes} do not fit an array of {ndim} dimensions")
    axes = [a % ndim for a in axes]
    for name, value in given.items():
        if value is not None and len(value) != len(axes):
            raise ValueError(f"{name} has {len(value)} values for {len(axes)} axes (shape {shape}, roi_axes "
                             f"{args.get('roi_axes') or 'all'})")
    start, end = [0] * ndim, list(shape)
    for k, axis in enumerate(axes):
        extent = shape[axis]
        if given["roi_start"] is not None:
            start[axis] = int(given["roi_start"][k])
        elif given["rel_roi_start"] is not None:
            start[axis] = _rel(given["rel_roi_start"][k], extent)
        if given["roi_end"] is not None:
            end[axis] = int(given["roi_end"][k])
        elif given["rel_roi_end"] is not None:
            end[axis] = _rel(given["rel_roi_end"][k], extent)
        elif given["roi_shape"] is not None:
            end[axis] = start[axis] + int(given["roi_shape"][k])
        elif given["rel_roi_shape"] is not None:
            rel_start = given["rel_roi_start"][k] if given["rel_roi_start"] is not None else 0.0
            end[axis] = _rel(float(np.float32(rel_start) + np.float32(given["rel_roi_shape"][k])), extent)
        if end[axis] < start[axis]:
            raise ValueError(f"the ROI ends before it starts on axis {axis} (start {start[axis]}, end {end[axis]})")
    return Roi(tuple(start), tuple(end))


def read_span(fd: int, offset: int, nbytes: int) -> np.ndarray:
    """`nbytes` bytes of the file from `offset`, as uint8."""
    data = os.pread(fd, nbytes, offset)
    if len(data) != nbytes:
        raise OSError(0, f"the file shrank while it was read ({len(data):,} of {nbytes:,} bytes at {offset:,})")
    return np.frombuffer(data, np.uint8)


def saturated(value: float, dtype: np.dtype) -> Any:
    """`value` in `dtype` as DALI converts it: clamped to an integer type's range and rounded (-3 is 0 in uint8)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(min(max(round(value), info.min), info.max))
    return dtype.type(value)


def assemble(xp: Any, read: Any, header: NpyHeader, roi: Roi | None, policy: str, fill: float) -> Any:
    """The array (or its ROI) of a .npy file, in array module `xp` (numpy or cupy): `read(offset, nbytes)` gives the
    file's bytes as uint8 of that module. Only the span of the outermost stored axis the ROI covers is read."""
    shape, dtype = header.shape, header.dtype
    stored = shape[::-1] if header.fortran else shape  # the order of the bytes: C order of the stored shape
    if roi is None:
        start, end = (0,) * len(shape), shape
    else:
        start, end = roi.start, roi.end
        inside = all(0 <= s and e <= n for s, e, n in zip(start, end, shape, strict=True))
        if not inside and policy == "error":
            raise ValueError(f"the ROI [{', '.join(map(str, start))}] to [{', '.join(map(str, end))}] is out of the "
                             f"array's shape {shape} (out_of_bounds_policy='error')")
    lo = tuple(min(max(s, 0), n) for s, n in zip(start, shape, strict=True))  # the part inside the array
    hi = tuple(max(min(e, n), lo_k) for e, n, lo_k in zip(end, shape, lo, strict=True))
    if not shape:  # a 0-d array
        data = read(header.offset, dtype.itemsize).view(dtype).reshape(())
        return data.copy()
    outer = len(shape) - 1 if header.fortran else 0
    row = math.prod(stored[1:]) * dtype.itemsize
    first, last = lo[outer], hi[outer]
    if last > first and row:
        data = read(header.offset + first * row, (last - first) * row).view(dtype).reshape((last - first,) + stored[1:])
    else:
        data = xp.zeros((0,) + stored[1:], dtype)
    if header.fortran:
        data = data.transpose()
    index = tuple(slice(0, h - lo_k) if axis == outer else slice(lo_k, h)
                  for axis, (lo_k, h) in enumerate(zip(lo, hi, strict=True)))
    inner = data[index]
    if roi is None or policy != "pad" or (lo == start and hi == end):
        return xp.ascontiguousarray(inner)
    out = xp.full(tuple(e - s for s, e in zip(start, end, strict=True)), saturated(fill, dtype), dtype)
    place = tuple(slice(lo_k - s, h - s) for lo_k, h, s in zip(lo, hi, start, strict=True))
    out[place] = inner
    return out


@reader(OP)
class NumpyReader(IndexedReader):
    """Reads one shard of a set of .npy files (readers.file's epochs and order)."""

    op = OP
    gil_free_work = True
    """Arrays are large: their reads and copies, without the GIL, overlap in the thread pool (1.9x on 1 MiB arrays
    with 2 threads, benchmarks/HISTORY.md), where a batch of small records is faster read in one thread."""

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        names, self.listed = file_names(args, node)
        super().__init__(node, args, names, batch_size, seed, pool)
        self.args = args
        self.policy, self.fill = args["out_of_bounds_policy"], float(args["fill_value"])
        self.on_gpu = args.get("device") == "gpu"
        self.headers: dict[int, tuple[int, int, NpyHeader]] | None = {} if args["cache_header_information"] else None

    def source_info_of(self, index: int) -> str:
        """DALI's source_info: the file's name as listed (relative to file_root)."""
        return self.listed[index]

    def _error(self, index: int, why: str) -> SampleError:
        path = self.paths[index]
        return SampleError(f"{OP} (node '{self.node}'): file {short_repr(path)} (sample {index} of the data set): "
                           f"{why}", node=self.node, op=OP, sample=index, source=path)

    def read_item(self, index: int) -> tuple[Any]:
        path = self.paths[index]
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except (OSError, ValueError) as exc:
            raise self._error(index, f"cannot open it ({reason(exc)})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._error(index, "is not a regular file")
            header = self._header(index, fd, info)
            roi = roi_of(self.args, header.shape)
            if self.on_gpu:
                return (self._read_gpu(path, header, roi),)
            return (assemble(np, lambda offset, n: read_span(fd, offset, n), header, roi, self.policy, self.fill),)
        except (ValueError, OSError) as exc:
            raise self._error(index, reason(exc)) from None
        finally:
            os.close(fd)

    def _header(self, index: int, fd: int, info: os.stat_result) -> NpyHeader:
        """The file's header; kept with cache_header_information, for as long as the file's size and time stay."""
        if self.headers is None:
            return parse_header(fd, info.st_size)
        kept = self.headers.get(index)
        if kept is not None and kept[:2] == (info.st_size, info.st_mtime_ns):
            return kept[2]
        header = parse_header(fd, info.st_size)
        self.headers[index] = (info.st_size, info.st_mtime_ns, header)
        return header

    def next_batch(self, iteration: int) -> tuple[list[list], list[str]]:
        """([the arrays], file per sample); as DALI, the arrays of a batch must share their type and number of
        dimensions."""
        (arrays,), sources = super().next_batch(iteration)
        first = arrays[0]
        for array, source in zip(arrays, sources, strict=True):
            if array.dtype != first.dtype or array.ndim != first.ndim:
                raise SampleError(f"{OP} (node '{self.node}'): the arrays of a batch must share their type and number "
                                  f"of dimensions (as DALI): {short_repr(sources[0])} is {first.dtype} "
                                  f"{first.ndim}-D, {short_repr(source)} is {array.dtype} {array.ndim}-D",
                                  node=self.node, op=OP, source=source)
        return [arrays], sources

    def _read_gpu(self, path: str, header: NpyHeader, roi: Roi | None) -> Any:
        from headrace_kernels.gpu import numpy_read

        return numpy_read.read_array(path, header, roi, self.policy, self.fill, assemble)
