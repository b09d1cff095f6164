"""`readers.file`: encoded files and labels from a class-folder tree, a file list or explicit files.

Sharding and the end of an epoch follow DALI's readers exactly (checked against DALI's CPU build in
tests/test_torch_vs_dali.py; each rule also has a plain test in tests/test_reader_sharding.py):

* The data set of N samples is split into S = num_shards contiguous shards; shard k holds the samples
  [k*N//S, (k+1)*N//S).
* A reader's *epoch* is one pass over one shard. Epoch e of reader `shard_id` reads shard
  (shard_id + e) % S, or always shard `shard_id` with stick_to_shard=True. Without shuffling, a reader
  thus reads one endless stream: its shard, the next one, ..., wrapping round the data set.
* Without pad_last_batch, batches are cut from that stream: a batch may end in one epoch and go on with the
  first samples of the next (the PyTorch iterator's last batch policy decides what the user sees of them).
* With pad_last_batch, every shard yields ceil(N/S) samples per epoch -- the largest shard's size -- by
  repeating its last sample, and then keeps repeating it up to the end of the batch. So every shard has the same
  number of batches per epoch, ceil(ceil(N/S) / batch_size), no batch spans two epochs, and a shard smaller than
  ceil(N/S) by more than its padding room may even get a batch made only of its last sample.
* reader_meta: epoch_size = N; epoch_size_padded = ceil(N/S) * S with pad_last_batch, else N.
* random_shuffle is DALI's (readers/shuffling.py): the data set is permuted once before it is sharded, with DALI's
  own fixed permutation (so a shard holds DALI's samples), and every epoch of the shard is given out through a
  shuffle buffer of `initial_fill` samples; shuffle_mode='permutation' (headrace's own) instead visits each epoch's
  unpermuted shard in a full random permutation. Either order is a pure function of (reader seed, epoch).
  shuffle_after_epoch shuffles the whole data set once per epoch with a seed shared by all shards (the reader's
  own `seed` argument, else a fixed one, as DALI), so that the shards of an epoch still partition the data set.
  Either way an epoch holds exactly the samples of its shard.
* on_error="skip" (headrace's own; the reader's for unreadable files, a decoder's for undecodable ones): the slot of
  a skipped sample gets the next unread sample of the slot's epoch (`replacements`), and the epoch pays each one
  back with a fill at its end (one of its last samples again, the last first), so an epoch keeps its number of
  slots and its end. The state counts both (`skipped`, `fills`), so a checkpoint resumes with the same samples.
"""

import dataclasses
import fnmatch
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from headrace.errors import SchemaError
from headrace.readers.shuffling import SHUFFLE_MODES, dali_permutation, shuffled_epoch
from headrace.schema import short_repr
from headrace_kernels.bounded_io import read_bounded, reason
from headrace_kernels.registry import reader


@dataclasses.dataclass
class ReaderState:
    """Where a reader stands: the epoch it is in, how many samples it returned in that epoch (padding included),
    how many more it handed out as replacements of skipped ones, and how many fills it gave back for them."""

    epoch: int = 0
    position: int = 0
    skipped: int = 0
    fills: int = 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class SampleSource(str):
    """A sample's source as errors name it (its full path, unambiguous) that also carries DALI's source_info for it
    (the path as listed, relative to file_root; 'file at index offset' for records): get_property(key='source_info')
    and the batches' source_info give `.source_info` (read with getattr, so plain str sources stay as they are)."""

    source_info: str

    def __new__(cls, name: str, source_info: str) -> "SampleSource":
        self = super().__new__(cls, name)
        self.source_info = source_info
        return self

    def __reduce__(self) -> tuple:
        return SampleSource, (str(self), self.source_info)


MAX_FILE_LIST_BYTES = 1 << 30
"""The largest file list read (1 GiB, some 15 million 'path label' lines); a larger one is refused unread."""
MAX_SAMPLE_BYTES = 1 << 31
"""The largest file a sample may be (2 GiB): a bigger one, or anything but a regular file, is an error."""
_LABEL = re.compile(r"-?[0-9]{1,10}")


def _list_class_tree(root: Path, filters: list[str], case_sensitive: bool, node: str,
                     dir_filters: list[str] | None = None) -> list[tuple[str, int]]:
    """DALI's class tree: each sub-folder of `root` (sorted; those matching `dir_filters` where given) is a class,
    labelled in order, and its samples are the files directly inside it that match `filters`, sorted. Files in
    deeper folders are not read (DALI's readers.file does not descend)."""
    where = f"readers.file (node '{node}'): file_root {short_repr(str(root))}"
    try:
        is_dir = stat.S_ISDIR(os.stat(root).st_mode)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise SchemaError(f"{where} is not a directory ({reason(exc)})") from None
    if not is_dir:
        raise SchemaError(f"{where} is not a directory")

    def matcher(globs: list[str]):
        patterns = globs if case_sensitive else [g.lower() for g in globs]
        return lambda name: any(fnmatch.fnmatchcase(name if case_sensitive else name.lower(), p) for p in patterns)

    wanted, wanted_dir = matcher(filters), matcher(dir_filters) if dir_filters is not None else None
    try:
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    except OSError as exc:
        raise SchemaError(f"{where} cannot be listed ({reason(exc)})") from None
    if wanted_dir is not None:
        classes = [c for c in classes if wanted_dir(c)]
    samples = []
    for label, cls in enumerate(classes):
        try:
            names = sorted(f.name for f in os.scandir(root / cls) if f.is_file() and wanted(f.name))
        except OSError as exc:
            raise SchemaError(f"{where}: class folder {short_repr(cls)} cannot be listed ({reason(exc)})") from None
        samples += [(os.path.join(cls, name), label) for name in names]
    return samples


def _read_file_list(path: str, node: str) -> list[tuple[str, int]]:
    """The (path, label) lines of a file list. Only a regular file of at most MAX_FILE_LIST_BYTES is read: a
    device (/dev/zero) or a FIFO would be read forever or block, so the pipeline file naming it is refused."""
    where = f"readers.file (node '{node}'): file_list {short_repr(path)}"
    try:
        data = read_bounded(path, MAX_FILE_LIST_BYTES)
    except ValueError as exc:
        raise SchemaError(f"{where} {exc} (readers.file.MAX_FILE_LIST_BYTES)") from None
    samples = []
    # surrogateescape: a path that is not UTF-8 stays the same bytes when it is opened
    for number, line in enumerate(data.decode("utf-8", errors="surrogateescape").splitlines(), 1):
        if not line.strip():
            continue
        name, _, label = line.rpartition(" ")
        if not name.strip() or not _LABEL.fullmatch(label.strip()):
            raise SchemaError(f"{where}, line {number}: expected 'path label', got {short_repr(line)}")
        samples.append((name.strip(), int(label)))
    return samples


def _check_samples(samples: list[tuple[str, int]], node: str) -> None:
    """Labels must fit the int32 label output, and names must be names (a NUL byte cannot be opened)."""
    for name, label in samples:
        if not -(2**31) <= label < 2**31:
            raise SchemaError(f"readers.file (node '{node}'): label {label} of {short_repr(name)} does not fit the "
                              "int32 label output")
        if "\x00" in name:
            raise SchemaError(f"readers.file (node '{node}'): file name {short_repr(name)} contains a NUL byte")


@reader("readers.file")
class FileReader:
    """Reads one shard of a file set; the order of every epoch is a pure function of (seed, epoch, shard)."""

    feeds_gpu = False
    """Set by the executor when a GPU-stage op (a mixed decoder, `.gpu()`) reads this reader's samples: then files
    are read into copies, not mapped. Mapping a batch's files beside the decoder's and CUDA's threads made the GPU
    training pipeline 0.90x as fast (benchmarks/HISTORY.md); CPU consumers gain from it."""

    read_into = None
    """Where a batch's copies go: a function giving a uint8 array of n bytes, or None for a new array. The CPU
    stage's worker process (executor option cpu_process) reads them into the shared block its answer goes in."""

    op = "readers.file"
    permutes_data_set = True
    """random_shuffle (buffer mode) first permutes the whole data set, as DALI's file-like loaders do (records in
    databases and archives keep their stored order: their readers set this False)."""

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        self.node, self.batch_size, self.pool = node, batch_size, pool
        self.seed = seed
        self.shuffle_globally = bool(args["shuffle_after_epoch"])
        self.shuffle = bool(args["random_shuffle"]) or self.shuffle_globally
        self.shuffle_mode, self.initial_fill = args.get("shuffle_mode", "buffer"), int(args.get("initial_fill", 1024))
        if self.shuffle_mode not in SHUFFLE_MODES or self.initial_fill < 1:
            raise SchemaError(f"{self.op} (node '{node}'): shuffle_mode must be one of {SHUFFLE_MODES} and "
                              f"initial_fill positive, got {self.shuffle_mode!r} and {self.initial_fill}")
        self._base_order: np.ndarray | None = None
        # shuffle_after_epoch: one permutation for all shards, so they must agree on its seed (DALI uses a fixed one)
        own_seed = args.get("shuffle_after_epoch_seed")
        if own_seed is None:
            own_seed = args.get("seed", -1)
        self.global_shuffle_seed = own_seed & (2**64 - 1) if own_seed is not None and own_seed != -1 else 0x5EED
        self.shard_id, self.num_shards = args["shard_id"], args["num_shards"]
        self.stick_to_shard, self.pad_last_batch = args["stick_to_shard"], args["pad_last_batch"]
        if not 0 <= self.shard_id < self.num_shards:
            raise SchemaError(f"readers.file (node '{node}'): shard_id {self.shard_id} is not in "
                              f"[0, num_shards={self.num_shards})")
        root = Path(args["file_root"]) if args.get("file_root") else None
        if args.get("file_list"):
            samples = _read_file_list(args["file_list"], node)
        elif args.get("files"):
            files = args["files"]
            labels = args.get("labels") or list(range(len(files)))
            if len(labels) != len(files):
                raise SchemaError(f"readers.file (node '{node}'): {len(files)} files but {len(labels)} labels")
            samples = list(zip(files, labels, strict=True))
        elif root is not None:
            dir_filters = args.get("dir_filters")
            if dir_filters is not None and not dir_filters:
                raise SchemaError(f"readers.file (node '{node}'): dir_filters cannot be an empty list (leave it out "
                                  "to take every class folder)")
            samples = _list_class_tree(root, args["file_filters"], args["case_sensitive_filter"], node, dir_filters)
        else:
            raise SchemaError(f"readers.file (node '{node}'): give file_root, file_list or files")
        _check_samples(samples, node)
        if not samples:
            raise SchemaError(f"readers.file (node '{node}'): no files found (file_root={args.get('file_root')!r})")
        if len(samples) < self.num_shards:
            raise SchemaError(f"readers.file (node '{node}'): {len(samples)} samples cannot be split into "
                              f"num_shards={self.num_shards} shards")
        self.root = root
        self.paths = [str(root / p) if root is not None and not os.path.isabs(p) else p for p, _ in samples]
        # DALI's source_info: each path as listed (relative to file_root), here the path past file_root's prefix
        # except where the listed name differs from that ('./a.jpg', 'c//b.jpg', an absolute name); errors keep
        # naming the full path
        self._prefix = os.path.join(str(root), "") if root is not None else None
        self._listed: dict[int, str] = {}
        if root is not None:
            cut = len(self._prefix)
            self._listed = {i: name for i, ((name, _), path) in enumerate(zip(samples, self.paths, strict=True))
                            if path[cut:] != name or not path.startswith(self._prefix)}
        self.labels = np.asarray([label for _, label in samples], dtype=np.int32)
        self.state = ReaderState()
        self._cached_order: tuple[int, np.ndarray] | None = None
        self._batch_reader = None  # made on the first serial batch
        self.skip_errors = args.get("on_error", "raise") == "skip"  # an unreadable file's data is its OSError
        # a batch's samples are views of its files mapped into memory, as DALI's (dont_use_mmap=True: copies),
        # unless the GPU stage reads them (feeds_gpu)
        self.use_mmap = not args.get("dont_use_mmap", False)
        self._layout: list[tuple[int, bool]] = []  # the last batch's slots: (epoch, whether it is a fill)
        self._ended: dict[int, int] = {}  # epochs that ended in the last batch -> the fills they gave

    # Sharding, as DALI: shard k holds samples [k*N//S, (k+1)*N//S).
    def shard_bounds(self, shard: int) -> tuple[int, int]:
        n = len(self.paths)
        return shard * n // self.num_shards, (shard + 1) * n // self.num_shards

    def shard_of_epoch(self, epoch: int) -> int:
        return self.shard_id if self.stick_to_shard else (self.shard_id + epoch) % self.num_shards

    def shard_size(self, epoch: int) -> int:
        start, stop = self.shard_bounds(self.shard_of_epoch(epoch))
        return stop - start

    @property
    def padded_shard_size(self) -> int:
        """What every shard returns per epoch with pad_last_batch: the largest shard's size, ceil(N/S)."""
        return -(-len(self.paths) // self.num_shards)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The sample indices of `epoch`, in reading order."""
        start, stop = self.shard_bounds(self.shard_of_epoch(epoch))
        if self.shuffle_globally:
            permutation = np.arange(len(self.paths))
            np.random.Generator(np.random.Philox(key=[self.global_shuffle_seed, epoch])).shuffle(permutation)
            return permutation[start:stop]
        if not self.shuffle:
            return np.arange(start, stop)
        if self.shuffle_mode == "permutation" or not self.permutes_data_set:
            order = np.arange(start, stop)
        else:
            if self._base_order is None:
                self._base_order = dali_permutation(len(self.paths))
            order = self._base_order[start:stop]
        return shuffled_epoch(order, self.shuffle_mode, self.initial_fill, self.seed, epoch)

    def meta(self) -> dict:
        """DALI's reader_meta: epoch_size, epoch_size_padded, number_of_shards, shard_id, pad_last_batch,
        stick_to_shard."""
        n, shards = len(self.paths), self.num_shards
        padded = self.padded_shard_size * shards if self.pad_last_batch else n
        return {"epoch_size": n, "epoch_size_padded": padded, "number_of_shards": shards, "shard_id": self.shard_id,
                "pad_last_batch": self.pad_last_batch, "stick_to_shard": self.stick_to_shard}

    def next_indices(self) -> list[int]:
        """The sample indices of the next batch, advancing the state (the rules are in the module docstring)."""
        indices: list[int] = []
        layout: list[tuple[int, bool]] = []
        self._ended = {}
        state = self.state
        order = self._order(state.epoch)
        while len(indices) < self.batch_size:
            if state.position < len(order):
                take = min(self.batch_size - len(indices), len(order) - state.position)
                start = state.position + state.skipped  # past the samples handed out as replacements
                samples = order[start:start + take].tolist()
                indices += samples
                layout += [(state.epoch, False)] * len(samples)
                for _ in range(take - len(samples)):  # the epoch's last slots pay its replacements back
                    indices.append(self._fill(order, state.fills))
                    state.fills += 1
                    layout.append((state.epoch, True))
                state.position += take
                continue
            if self.pad_last_batch and (indices or state.position < self.padded_shard_size):
                # repeat the shard's last sample: up to the end of this batch, or a whole batch while the shard
                # is still short of ceil(N/S) samples
                fill = self.batch_size - len(indices)
                indices += [int(order[-1])] * fill
                layout += [(state.epoch, False)] * fill
                state.position += fill
                break
            self._ended[state.epoch] = state.fills
            state.epoch, state.position, state.skipped, state.fills = state.epoch + 1, 0, 0, 0
            order = self._order(state.epoch)
        self._layout = layout
        return indices

    @staticmethod
    def _fill(order: np.ndarray, fills: int) -> int:
        """An epoch's fill number `fills`: its samples from the last backwards (a fill that fails too is replaced
        by the one before it)."""
        return int(order[len(order) - 1 - fills % len(order)])

    def replacements(self, slots: list[int]) -> tuple[list[list[np.ndarray]], list[str]]:
        """Samples for these slots of the last batch, whose samples were skipped: the next unread sample of the
        slot's epoch, or a fill once that epoch has none left (engine.skips)."""
        state = self.state
        indices = []
        for slot in slots:
            epoch = self._layout[slot][0]
            if epoch != state.epoch:  # the batch went on into the next epoch: this one has nothing left
                indices.append(self._fill(self.epoch_order(epoch), self._ended[epoch]))
                self._ended[epoch] += 1
                self._layout[slot] = (epoch, True)
                continue
            order = self._order(epoch)
            unread = state.position + state.skipped
            if unread < len(order):
                indices.append(int(order[unread]))
                state.skipped += 1
                self._layout[slot] = (epoch, False)
            else:
                indices.append(self._fill(order, state.fills))
                state.fills += 1
                self._layout[slot] = (epoch, True)
        return [self._read_all(indices), [self.labels[i:i + 1].copy() for i in indices]], self.sources(indices)

    def fill_slots(self) -> list[int]:
        """The slots of the last batch holding a fill."""
        return [slot for slot, (_, fill) in enumerate(self._layout) if fill]

    def _order(self, epoch: int) -> np.ndarray:
        if self._cached_order is None or self._cached_order[0] != epoch:
            self._cached_order = (epoch, self.epoch_order(epoch))
        return self._cached_order[1]

    def _read(self, index: int) -> np.ndarray | OSError:
        path = self.paths[index]
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # no file object; a FIFO must not block
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise OSError(0, "not a regular file")
                size = info.st_size
                if size > MAX_SAMPLE_BYTES:
                    raise OSError(0, f"{size:,} bytes, more than a sample may have ({MAX_SAMPLE_BYTES:,})")
                data = os.read(fd, size + 1)
                if len(data) > size:  # the file grew since fstat: read to its end, within the limit
                    parts, total = [data], len(data)
                    while total <= MAX_SAMPLE_BYTES and (part := os.read(fd, 1 << 20)):
                        parts.append(part)
                        total += len(part)
                    if total > MAX_SAMPLE_BYTES:
                        raise OSError(0, f"it grew past what a sample may have ({MAX_SAMPLE_BYTES:,} bytes)")
                    data = b"".join(parts)
            finally:
                os.close(fd)
            return np.frombuffer(data, dtype=np.uint8)
        except OSError as exc:
            error = OSError(f"readers.file (node '{self.node}'): cannot read '{path}': {exc.strerror}")
            if self.skip_errors:
                return error  # the engine replaces the sample (engine.skips)
            raise error from None

    @property
    def maps_files(self) -> bool:
        """Whether a batch's files are mapped into memory (else read into copies)."""
        return self.use_mmap and not self.feeds_gpu

    def _read_all(self, indices: list[int]) -> list[np.ndarray]:
        return [self._read(i) for i in indices]

    def _read_batch(self, indices: list[int]) -> list[np.ndarray]:
        """Every file of the batch mapped (or read: dont_use_mmap) with the GIL released once, per file where
        that cannot be done."""
        files = self.batch_files(indices, self._read)
        return self._read_all(indices) if files is None else files

    def batch_files(self, indices: list[int], fallback) -> list[np.ndarray] | None:
        """The bytes of these files, mapped or read (`maps_files`) as one batch by headrace_kernels.batch_read,
        with `fallback(index)` for a file it cannot take (for its error); None where batch reads are unavailable."""
        if self._batch_reader is None:
            from headrace_kernels.batch_read import BatchFileReader

            self._batch_reader = BatchFileReader(self.paths, MAX_SAMPLE_BYTES) if BatchFileReader.available() else False
        if self._batch_reader is False:
            return None
        if self.maps_files:
            return self._batch_reader.map(indices, fallback)
        return self._batch_reader.read(indices, fallback, self.read_into)

    def next_batch(self, iteration: int) -> tuple[list[list[np.ndarray]], list[str]]:
        """([encoded bytes per sample, label per sample], source path per sample)."""
        indices = self.next_indices()
        labels = list(self.labels[np.asarray(indices, np.int64)].reshape(-1, 1))  # rows of one new array
        return [self.batch_data(indices), labels], self.sources(indices)

    def batch_data(self, indices: list[int]) -> list:
        """What `_read_batch` makes of these samples, read on the pool's workers where there is one."""
        workers = getattr(self.pool, "_max_workers", 1) if self.pool is not None else 1
        if workers > 1 and len(indices) > 1:
            # one task per worker, each reading a contiguous run of files: a future per file cost more host time
            # than the read of a cached ~100 KB file
            step = -(-len(indices) // workers)
            runs = self.pool.map(self._read_all, [indices[k:k + step] for k in range(0, len(indices), step)])
            return [array for run in runs for array in run]
        return self._read_batch(indices)

    def source_info_of(self, index: int) -> str | None:
        """DALI's source_info of sample `index` where it differs from the name errors use (its path as listed,
        relative to file_root); None where they are the same."""
        if self._prefix is None:
            return None
        listed = self._listed.get(index)
        return listed if listed is not None else self.paths[index][len(self._prefix):]

    def sources(self, indices: list[int]) -> list[str]:
        """The source of each of these samples: its full name, carrying DALI's source_info where that differs."""
        out: list[str] = []
        for i in indices:
            name, info = self.paths[i], self.source_info_of(i)
            out.append(name if info is None or info == name else SampleSource(name, info))
        return out

    def get_state(self) -> dict:
        return self.state.to_dict()

    def set_state(self, state: dict) -> None:
        self.state = ReaderState(**state)
        self._cached_order = None
        self._layout, self._ended = [], {}
