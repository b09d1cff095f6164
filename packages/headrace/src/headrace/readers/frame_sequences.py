"""`readers.sequence`: frame sequences from a folder of streams, one image file per frame, decoded on the CPU.

The listing is DALI's (its glob of file_root/*/*, checked against DALI's CPU build in tests/test_readers_sequence.py):
the non-hidden files of the non-hidden sub-folders of file_root, sorted by the bytes of their 'stream/frame' paths and
grouped by stream in that order. A stream of n frames gives the sequences starting at 0, step, 2*step, ... while the
last frame, start + (sequence_length - 1) * stride, is < n. The sequences, in stream order then start order, are the
data set: sharding, padding, random_shuffle (DALI's one-time permutation, then the buffer) and checkpoints are
readers.file's (IndexedReader). Frames are decoded with the decoder of decoders.image (nvImageCodec's CPU backend)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from headrace.errors import SampleError, SchemaError
from headrace.ops import sequence_readers  # noqa: F401 - registers the schema
from headrace.readers.file import MAX_SAMPLE_BYTES
from headrace.readers.numpy_files import IndexedReader
from headrace.schema import short_repr
from headrace_kernels.bounded_io import read_bounded, reason
from headrace_kernels.cpu.decode import decode_image
from headrace_kernels.registry import reader

OP = "readers.sequence"


def list_streams(root: str, node: str) -> list[tuple[str, list[str]]]:
    """(stream folder, its frame files) per stream of `root`, in DALI's order (module docstring)."""
    where = f"{OP} (node '{node}'): file_root {short_repr(root)}"
    try:
        if not os.path.isdir(root):
            raise SchemaError(f"{where} is not a directory")
        streams = [e.name for e in os.scandir(root) if not e.name.startswith(".") and e.is_dir()]
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{where} cannot be listed ({reason(exc)})") from None
    paths: list[tuple[bytes, str, str]] = []
    for stream in streams:
        try:
            frames = [e.name for e in os.scandir(os.path.join(root, stream))
                      if not e.name.startswith(".") and not e.is_dir()]
        except OSError as exc:
            raise SchemaError(f"{where}: stream {short_repr(stream)} cannot be listed ({reason(exc)})") from None
        paths += [(os.fsencode(f"{stream}/{frame}"), stream, frame) for frame in frames]
    paths.sort()
    grouped: dict[str, list[str]] = {}
    for _, stream, frame in paths:
        grouped.setdefault(stream, []).append(frame)
    return [(os.path.join(root, stream), frames) for stream, frames in grouped.items()]


def sequence_starts(frames: int, length: int, step: int, stride: int) -> range:
    """The first frames of a stream's sequences: 0, step, ... while the sequence's last frame is in the stream."""
    last = frames - (length - 1) * stride  # a start must be below this
    return range(0, max(last, 0), step)


@reader(OP)
class SequenceReader(IndexedReader):
    """Reads one shard of the frame sequences of a folder of streams (readers.file's epochs and order)."""

    op = OP

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        length, step, stride = int(args["sequence_length"]), int(args["step"]), int(args["stride"])
        streams = list_streams(args["file_root"], node)
        self.sequences: list[list[str]] = []
        for folder, frames in streams:
            for start in sequence_starts(len(frames), length, step, stride):
                self.sequences.append([os.path.join(folder, frames[start + k * stride]) for k in range(length)])
        if not self.sequences:
            longest = max((len(frames) for _, frames in streams), default=0)
            raise SchemaError(f"{OP} (node '{node}'): no sequence in file_root {short_repr(args['file_root'])}: "
                              f"{len(streams)} streams, the longest of {longest} frames, and a sequence of "
                              f"sequence_length={length} with stride={stride} spans {(length - 1) * stride + 1}")
        args = {**args, "shuffle_after_epoch": False}
        super().__init__(node, args, [s[0] for s in self.sequences], batch_size, seed, pool)
        self.output_type, self.file_root = int(args["image_type"]), str(args["file_root"])

    def _error(self, index: int, path: str, why: str) -> SampleError:
        return SampleError(f"{OP} (node '{self.node}'): frame {short_repr(path)} of sequence {index} of the data set "
                           f"(file_root {short_repr(self.file_root)}): {why}", node=self.node, op=OP, sample=index,
                           source=path)

    def read_item(self, index: int) -> tuple[np.ndarray]:
        frames = []
        for path in self.sequences[index]:
            try:
                data = read_bounded(path, MAX_SAMPLE_BYTES)
            except (OSError, ValueError) as exc:
                raise self._error(index, path, reason(exc)) from None
            try:
                frame = decode_image(np.frombuffer(data, np.uint8), self.output_type)
            except ValueError as exc:
                raise self._error(index, path, str(exc)) from None
            if frames and frame.shape != frames[0].shape:
                raise self._error(index, path, f"its shape {frame.shape} differs from the sequence's first frame "
                                               f"{frames[0].shape} (the frames of a sequence must share their shape, "
                                               "as in DALI)")
            frames.append(frame)
        return (np.stack(frames),)
