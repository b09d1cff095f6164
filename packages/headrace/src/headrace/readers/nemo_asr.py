"""`readers.nemo_asr`: speech samples listed in NVIDIA NeMo manifests, decoded as decoders.audio decodes them.

A manifest is JSON lines, one entry per line: `audio_filepath` (required), `duration` and `offset` in seconds and
`text` (optional). As DALI: a line that is not a JSON object, or has no audio_filepath, is skipped with a warning;
entries whose duration is outside [min_duration, max_duration] (each bound when > 0) are left out; an entry's index
(read_idxs) counts the kept entries of its own manifest from 0; paths are opened as written. The outputs are the
audio, then as asked the file's sampling rate (its own even when resampled, as DALI), the text (UTF-8 bytes, no
terminating zero) and the index.

Epochs, shards, padding, shuffling, on_error="skip" and checkpoints are readers.file's (FileReader, which this
class extends with the manifest's entries as its files): the reader reads each file's bytes, then decodes them on
the reader pool.
"""

from __future__ import annotations

import json
import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from headrace.errors import SampleError, SchemaError
from headrace.ops import audio_io  # noqa: F401 - registers the schemas of the op this reader implements
from headrace.readers.file import FileReader
from headrace.schema import short_repr
from headrace_kernels.bounded_io import read_bounded
from headrace_kernels.cpu.audio_io_ops import decode_audio
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import reader

OP = "readers.nemo_asr"


class ManifestEntry(NamedTuple):
    """One kept manifest line: the audio file, where to cut it (seconds; -1: to its end), its text and its index."""

    path: str
    offset: float
    duration: float
    text: bytes
    index: int


MAX_MANIFEST_BYTES = 1 << 30
"""The largest manifest read (1 GiB, millions of entries); a larger one, or anything but a regular file, is refused."""


def _float32(value: float) -> float:
    """A duration bound as DALI holds it (a float32 argument compared as a double): 0.1 is 0.100000001."""
    return float(np.float32(value))


def _number(entry: dict, key: str, default: float, where: str) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SchemaError(f"{where}: '{key}' must be a finite number of seconds, got {short_repr(value)}")
    return float(value)


def read_manifest(path: str, node: str, min_duration: float, max_duration: float, read_text: bool) \
        -> list[ManifestEntry]:
    """The kept entries of one manifest file, in order (the rules are in the module docstring)."""
    where = f"{OP} (node '{node}'): manifest {short_repr(path)}"
    try:
        lines = read_bounded(path, MAX_MANIFEST_BYTES).decode("utf-8", errors="surrogateescape").splitlines()
    except ValueError as exc:
        raise SchemaError(f"{where} cannot be read ({exc})") from None
    entries: list[ManifestEntry] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            warnings.warn(f"{where}, line {number}: skipping a line that is not a JSON object: {short_repr(line)}",
                          stacklevel=2)
            continue
        audio = entry.get("audio_filepath")
        if not audio:
            warnings.warn(f"{where}, line {number}: skipping an entry without an audio_filepath: "
                          f"{short_repr(line)}", stacklevel=2)
            continue
        line_where = f"{where}, line {number}"
        if not isinstance(audio, str) or "\x00" in audio:
            raise SchemaError(f"{line_where}: audio_filepath must be a file name, got {short_repr(audio)}")
        duration = _number(entry, "duration", -1.0, line_where)
        offset = _number(entry, "offset", 0.0, line_where)
        if (max_duration > 0 and duration > max_duration) or (min_duration > 0 and duration < min_duration):
            continue
        text = entry.get("text", "") if read_text else ""
        if not isinstance(text, str):
            raise SchemaError(f"{line_where}: text must be a string, got {short_repr(text)}")
        entries.append(ManifestEntry(audio, offset, duration, text.encode("utf-8", "surrogateescape"),
                                     len(entries)))
    return entries


@reader(OP)
class NemoAsrReader(FileReader):
    """Reads one shard of the entries of NeMo manifests and decodes their audio; the order of every epoch is a pure
    function of (seed, epoch, shard), as readers.file's."""

    gil_free_work = True
    """It decodes and resamples what it reads, without the GIL: the executor gives it the thread pool (the other
    readers read in the CPU stage's own thread)."""

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        entries: list[ManifestEntry] = []
        for manifest in args["manifest_filepaths"]:
            entries += read_manifest(manifest, node, _float32(args["min_duration"]), _float32(args["max_duration"]),
                                     bool(args["read_text"]))
        if not entries:
            raise SchemaError(f"{OP} (node '{node}'): no entries in {short_repr(args['manifest_filepaths'])} "
                              "(after the duration filters)")
        shards = args["num_shards"]
        if not 0 <= args["shard_id"] < shards:
            raise SchemaError(f"{OP} (node '{node}'): shard_id {args['shard_id']} is not in [0, num_shards={shards})")
        if len(entries) < shards:
            raise SchemaError(f"{OP} (node '{node}'): {len(entries)} entries cannot be split into num_shards={shards} "
                              "shards")
        for other in ("random_shuffle", "stick_to_shard"):
            if args["shuffle_after_epoch"] and args[other]:
                raise SchemaError(f"{OP} (node '{node}'): shuffle_after_epoch and {other} cannot both be True")
        own_seed = args.get("shuffle_after_epoch_seed")
        files_args = {**args, "file_root": None, "file_list": None, "files": [e.path for e in entries],
                      "labels": list(range(len(entries))), "seed": -1 if own_seed is None else own_seed,
                      "stick_to_shard": bool(args["stick_to_shard"] or args["shuffle_after_epoch"])}
        super().__init__(node, files_args, batch_size, seed, pool)
        self.use_mmap = False  # copies, as before readers.file mapped (its schema ignores dont_use_mmap)
        self.entries = entries
        self.dtype = numpy_dtype(args["dtype"])
        self.downmix, self.quality = bool(args["downmix"]), float(args["quality"])
        self.sample_rate = float(args["sample_rate"])
        self.wanted = (bool(args["read_sample_rate"]), bool(args["read_text"]), bool(args["read_idxs"]))

    def _decode(self, item: tuple[int, Any, int]) -> Any:
        """Sample `slot`'s audio from its file's bytes (or the OSError that reading it met); an undecodable file is
        an error naming the op, the sample and the file, or with on_error="skip" the OSError saying why."""
        slot, data, entry_number = item
        if isinstance(data, OSError):
            return data
        entry = self.entries[entry_number]
        try:
            audio, rate = decode_audio(data, self.dtype, self.downmix, self.sample_rate, self.quality, entry.offset,
                                       entry.duration)
        except ValueError as exc:
            if self.skip_errors:
                return OSError(f"cannot decode: {exc}")
            raise SampleError(f"{OP} (node '{self.node}') failed on sample {slot} [{entry.path}]: cannot decode: "
                              f"{exc}", node=self.node, op=OP, sample=slot, source=entry.path) from None
        return audio, rate

    def _outputs(self, data: list, labels: list[np.ndarray], slots: list[int]) -> list[list]:
        """The reader's outputs for the samples of these slots, from their bytes and entry numbers (FileReader's
        labels)."""
        numbers = [int(label[0]) for label in labels]
        items = list(zip(slots, data, numbers, strict=True))
        decoded = list(self.pool.map(self._decode, items)) if self.pool is not None and len(items) > 1 else \
            [self._decode(item) for item in items]
        audio, rates, texts, indices = [], [], [], []
        for result, number in zip(decoded, numbers, strict=True):
            entry = self.entries[number]
            failed = isinstance(result, OSError)
            audio.append(result if failed else result[0])
            rates.append(np.array(0.0 if failed else result[1], np.float32))
            texts.append(np.frombuffer(entry.text, np.uint8).copy())
            indices.append(np.array([entry.index], np.int64))
        read_rate, read_text, read_idxs = self.wanted
        return [audio, *([rates] if read_rate else []), *([texts] if read_text else []),
                *([indices] if read_idxs else [])]

    def next_batch(self, iteration: int) -> tuple[list[list], list[str]]:
        """([audio, then sampling rate / text / index as asked], source path per sample)."""
        try:
            (data, labels), sources = super().next_batch(iteration)
        except OSError as exc:  # a file that cannot be read: FileReader's error, under this op's name
            raise _renamed(exc) from None
        return self._outputs([_renamed(d) for d in data], labels, list(range(len(data)))), sources

    def replacements(self, slots: list[int]) -> tuple[list[list], list[str]]:
        """Samples for these slots of the last batch, whose samples were skipped (readers.file's rule)."""
        try:
            (data, labels), sources = super().replacements(slots)
        except OSError as exc:
            raise _renamed(exc) from None
        return self._outputs([_renamed(d) for d in data], labels, slots), sources


def _renamed(data: Any) -> Any:
    """FileReader's OSError for an unreadable file with this op's name in it instead of readers.file's; other data
    as it is."""
    if isinstance(data, OSError) and str(data).startswith("readers.file (node"):
        return OSError(OP + str(data)[len("readers.file"):])
    return data
