"""`readers.mxnet` (MXNet RecordIO), and `RecordReader`: the base of the readers of records at known offsets in files
(readers.tfrecord, readers.webdataset, readers.mxnet).

A RecordReader is readers.file over records instead of files: the same shards, epochs, padding and checkpoint state
(FileReader, which it extends, sees one entry per record). The shuffles are DALI's for these formats: random_shuffle
draws each next record of the epoch from a buffer of `initial_fill` records read ahead in stored order (refilled per
epoch, so that an epoch still holds exactly its shard; shuffle_mode='permutation', headrace's own, permutes it whole;
readers/shuffling.py); shuffle_after_epoch visits the files in a new order every epoch, each file's records in their
stored order, with a seed all shards share, and the epoch's shards are contiguous ranges of that order. Either order
is a pure function of (seed, epoch), so a checkpoint is the FileReader state.

Every record is read with a bound: its file must be a regular file, the index's offsets and sizes must lie inside it
(a stale index is refused when the reader is made), and a short read or a malformed record is a SampleError naming
the reader, the file and the record. Files are mapped into memory once per reader and records handed out as views
of the mapping, not copies, as DALI's readers do by default (dont_use_mmap=False). A file is measured again for
every batch before its records are read, so one truncated since it was mapped fails its records with a SampleError;
a truncation after that, while a batch's views are still in use, meets a SIGBUS, as in DALI: dont_use_mmap=True
reads copies instead.

RecordIO: each record is a magic number (0xced7230a), a uint32 whose top 3 bits say whether this is a whole record
(0) or its first (1), middle (2) or last (3) part and whose low 29 bits are the part's length, the part, and padding
to 4 bytes; parts are joined with the magic number between them (it was what split them). The record then holds
MXNet's image header (flag: uint32, label: float32, two uint64 ids), `flag` float32 labels when flag > 0, and the data.
The index (.idx) has 'key<TAB>offset' lines over the stream of all .rec files; as DALI, records are taken in the
order of their offsets and each one runs to the next offset (or the end of the stream).
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from headrace.errors import SampleError, SchemaError
from headrace.ops import record_readers  # noqa: F401 - registers the schemas of the ops these readers implement
from headrace.readers.file import MAX_SAMPLE_BYTES, FileReader
from headrace.readers.shuffling import shuffled_epoch, shuffled_through_buffer  # noqa: F401 - importable here too
from headrace.schema import short_repr
from headrace_kernels.bounded_io import read_bounded, reason
from headrace_kernels.registry import reader

MAX_INDEX_BYTES = 1 << 30
"""The largest index file read (1 GiB); a larger one, or anything but a regular file, is refused."""


class Record(NamedTuple):
    """Where one record lies: its file (an index into the reader's files), its first byte, its size, and what an
    error calls it ('record 5', 'sample x (index line 3)')."""

    file: int
    offset: int
    size: int
    name: str


def file_size(op: str, node: str, path: str, role: str) -> int:
    """The size of a data file a reader reads, which must be a regular file; else a SchemaError."""
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{op} (node '{node}'): {role} {short_repr(path)} cannot be read ({reason(exc)})") from None
    if not stat.S_ISREG(info.st_mode):
        raise SchemaError(f"{op} (node '{node}'): {role} {short_repr(path)} is not a regular file")
    return info.st_size


def read_index(op: str, node: str, path: str) -> str:
    """An index file's text (bounded: MAX_INDEX_BYTES); a SchemaError naming it if it cannot be read."""
    try:
        return read_bounded(path, MAX_INDEX_BYTES).decode("utf-8", errors="surrogateescape")
    except ValueError as exc:
        raise SchemaError(f"{op} (node '{node}'): index file {short_repr(path)} {exc}") from None


class RecordReader(FileReader):
    """readers.file over records: subclasses give the files and records, and `parse` turns a record's bytes into
    the sample's outputs."""

    op = ""
    permutes_data_set = False  # DALI reads records in their stored order, through the shuffle buffer
    num_outputs = 1

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None,
                 files: list[str], records: list[Record]):
        where = f"{self.op} (node '{node}')"
        if not records:
            raise SchemaError(f"{where}: no records in {short_repr(files)}")
        shards = args["num_shards"]
        if not 0 <= args["shard_id"] < shards:
            raise SchemaError(f"{where}: shard_id {args['shard_id']} is not in [0, num_shards={shards})")
        if len(records) < shards:
            raise SchemaError(f"{where}: {len(records)} records cannot be split into num_shards={shards} shards")
        if args["shuffle_after_epoch"] and args["stick_to_shard"]:
            raise SchemaError(f"{where}: shuffle_after_epoch and stick_to_shard cannot both be True")
        file_args = {**args, "file_root": None, "file_list": None, "labels": None, "seed": -1,
                     "files": [f"{files[r.file]} [{r.name}]" for r in records], "shuffle_after_epoch": False,
                     "random_shuffle": False,
                     "stick_to_shard": bool(args["stick_to_shard"] or args["shuffle_after_epoch"])}
        super().__init__(node, file_args, batch_size, seed, pool)
        self.files, self.records = files, records
        self.use_mmap = not args.get("dont_use_mmap", False)
        self._maps: dict[int, memoryview] = {}
        self._maps_lock = threading.Lock()
        self.file_shuffle = bool(args["shuffle_after_epoch"])
        self.buffer_shuffle, self.initial_fill = bool(args["random_shuffle"]), int(args["initial_fill"])
        own = args.get("shuffle_after_epoch_seed")
        self.file_seed = 0x5EED if own is None else own & (2**64 - 1)
        bounds = np.searchsorted(np.fromiter((r.file for r in records), np.int64, len(records)),
                                 np.arange(len(files) + 1))
        self.file_ranges = [(int(bounds[k]), int(bounds[k + 1])) for k in range(len(files))]

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The record indices of `epoch`, in reading order (the shuffles are in the module docstring)."""
        start, stop = self.shard_bounds(self.shard_of_epoch(epoch))
        if self.file_shuffle:
            files = np.arange(len(self.files))
            np.random.Generator(np.random.Philox(key=[self.file_seed, epoch])).shuffle(files)
            order = np.concatenate([np.arange(*self.file_ranges[f]) for f in files])[start:stop]
        else:
            order = np.arange(start, stop)
        if self.buffer_shuffle:
            order = shuffled_epoch(order, self.shuffle_mode, self.initial_fill, self.seed, epoch)
        return order

    def source_info_of(self, index: int) -> str:
        """DALI's source_info of a record: '<file> at index <its offset in the file>'."""
        record = self.records[index]
        return f"{self.files[record.file]} at index {record.offset}"

    def parse(self, index: int, data: bytes) -> tuple:
        """The outputs of sample `index` (a record number) from its record's bytes; ValueError says what is wrong."""
        raise NotImplementedError

    def error(self, record: Record, problem: str) -> SampleError:
        """The error of a record that cannot be read or parsed, naming the reader, the file and the record."""
        path = self.files[record.file]
        return SampleError(f"{self.op} (node '{self.node}'): {short_repr(path)}, {record.name} (bytes {record.offset}"
                           f"..{record.offset + record.size}): {problem}", node=self.node, op=self.op,
                           source=f"{path} [{record.name}]")

    def _read_all(self, indices: list[int]) -> list[tuple]:
        per_batch: dict[int, int] = {}  # per file: its size now (mapped), or its descriptor (dont_use_mmap)
        try:
            return [self._sample(i, per_batch) for i in indices]
        finally:
            if not self.use_mmap:
                for fd in per_batch.values():
                    os.close(fd)

    def _mapped_record(self, record: Record, sizes: dict[int, int]) -> memoryview:
        """The record's bytes as a view of its mapped file, after checking the file still holds them."""
        end = record.offset + record.size
        try:
            size = sizes.get(record.file)
            if size is None:
                size = sizes[record.file] = os.stat(self.files[record.file]).st_size
            mapped = self._mapped(record.file) if size >= end else None
        except (OSError, ValueError) as exc:  # ValueError: mmap of a file emptied since
            raise self.error(record, f"cannot read it ({reason(exc)})") from None
        if mapped is None or len(mapped) < end:
            have = max(0, min(size, end if mapped is None else len(mapped)) - record.offset)
            raise self.error(record, f"the file ends after {have} of its bytes (truncated, or a stale index)")
        return mapped[record.offset:end]

    def _copied_record(self, record: Record, fds: dict[int, int]) -> bytes:
        """The record's bytes read into a copy (dont_use_mmap); `fds` keeps the batch's open files."""
        try:
            if record.file not in fds:
                fds[record.file] = os.open(self.files[record.file], os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            data = os.pread(fds[record.file], record.size, record.offset)
        except OSError as exc:
            raise self.error(record, f"cannot read it ({reason(exc)})") from None
        if len(data) < record.size:
            raise self.error(record, f"the file ends after {len(data)} of its bytes (truncated, or a stale index)")
        return data

    def _mapped(self, file: int) -> memoryview:
        """File `file` mapped read-only, once for the reader's life (its views keep the mapping alive)."""
        view = self._maps.get(file)
        if view is None:
            with self._maps_lock:
                view = self._maps.get(file)
                if view is None:
                    fd = os.open(self.files[file], os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
                    try:
                        view = self._maps[file] = memoryview(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
                    finally:
                        os.close(fd)
        return view

    def _read_batch(self, indices: list[int]) -> list[tuple]:
        return self._read_all(indices)

    def _sample(self, index: int, per_batch: dict[int, int]) -> tuple:
        record = self.records[index]
        if record.size > MAX_SAMPLE_BYTES:
            raise self.error(record, f"{record.size:,} bytes, more than a sample may have ({MAX_SAMPLE_BYTES:,})")
        data = self._mapped_record(record, per_batch) if self.use_mmap else self._copied_record(record, per_batch)
        try:
            return self.parse(index, data)
        except ValueError as exc:
            raise self.error(record, str(exc)) from None

    def _columns(self, samples: list[tuple]) -> list[list]:
        return [[sample[k] for sample in samples] for k in range(self.num_outputs)]

    def next_batch(self, iteration: int) -> tuple[list[list], list[str]]:
        """(one list of samples per output, source per sample)."""
        (samples, _), sources = super().next_batch(iteration)
        return self._columns(samples), sources

    def replacements(self, slots: list[int]) -> tuple[list[list], list[str]]:
        """Samples for these slots of the last batch, whose samples were skipped downstream (readers.file's rule)."""
        (samples, _), sources = super().replacements(slots)
        return self._columns(samples), sources


_MAGIC = 0xCED7230A
_HEADER = struct.Struct("<IfQQ")


def parse_recordio(data: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
    """(data, label) of one RecordIO record (the format is in the module docstring); ValueError if malformed."""
    view = memoryview(data)
    parts, position = [], 0
    while True:
        if position + 8 > len(view):
            raise ValueError(f"a part's header needs 8 bytes at byte {position}, the record has {len(view)}")
        magic, length_flag = struct.unpack_from("<II", view, position)
        if magic != _MAGIC:
            raise ValueError(f"wrong magic number {magic:#010x} at byte {position} (expected {_MAGIC:#010x})")
        flag, length = length_flag >> 29, length_flag & ((1 << 29) - 1)
        if flag not in ((0, 1) if not parts else (2, 3)):
            raise ValueError(f"part flag {flag} at byte {position} is out of sequence")
        position += 8
        if position + length > len(view):
            raise ValueError(f"a part of {length} bytes at byte {position} runs past the record's {len(view)} bytes")
        parts.append(view[position:position + length])
        position += (length + 3) & ~3
        if flag in (0, 3):
            break
    payload = parts[0] if len(parts) == 1 else memoryview(struct.pack("<I", _MAGIC).join(p.tobytes() for p in parts))
    if len(payload) < _HEADER.size:
        raise ValueError(f"{len(payload)} bytes of payload, less than the {_HEADER.size}-byte image header")
    label_count, label = _HEADER.unpack_from(payload)[:2]
    label_bytes = 4 * label_count
    if _HEADER.size + label_bytes > len(payload):
        raise ValueError(f"the header's {label_count} labels need {label_bytes} bytes, the record has "
                         f"{len(payload) - _HEADER.size}")
    labels = np.frombuffer(payload, "<f4", label_count, _HEADER.size).astype(np.float32) if label_count else \
        np.array([label], np.float32)
    return np.frombuffer(payload, np.uint8, offset=_HEADER.size + label_bytes), labels


def recordio_records(op: str, node: str, paths: list[str], index_path: str) -> list[Record]:
    """The records of RecordIO files `paths` (one stream) from their index, in the order of their offsets."""
    sizes = [file_size(op, node, p, "RecordIO file") for p in paths]
    starts = np.cumsum([0, *sizes])
    offsets = []
    for number, line in enumerate(read_index(op, node, index_path).splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or not all(f.isdigit() for f in fields):
            raise SchemaError(f"{op} (node '{node}'): index file {short_repr(index_path)}, line {number}: expected "
                              f"'key<TAB>offset', got {short_repr(line)}")
        offset = int(fields[1])
        if offset >= starts[-1]:
            raise SchemaError(f"{op} (node '{node}'): index file {short_repr(index_path)}, line {number}: offset "
                              f"{offset} is past the end of the RecordIO files ({int(starts[-1])} bytes): a stale "
                              "index?")
        offsets.append(offset)
    offsets = sorted(set(offsets))
    records = []
    for k, offset in enumerate(offsets):
        file = int(np.searchsorted(starts, offset, side="right")) - 1
        end = min(offsets[k + 1] if k + 1 < len(offsets) else int(starts[-1]), int(starts[file + 1]))
        records.append(Record(file, offset - int(starts[file]), end - offset, f"record {k} (offset {offset})"))
    return records


@reader("readers.mxnet")
class MXNetReader(RecordReader):
    """Reads one shard of the records of MXNet RecordIO files (the format is in the module docstring)."""

    op = "readers.mxnet"
    num_outputs = 2

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        paths = list(args["path"])
        records = recordio_records(self.op, node, paths, args["index_path"][0])
        super().__init__(node, args, batch_size, seed, pool, paths, records)

    def parse(self, index: int, data: bytes) -> Any:
        return parse_recordio(data)
