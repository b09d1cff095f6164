"""readers.sequence (and DALI's deprecated name fn.sequence_reader) against DALI's CPU build on streams of PNG frames
written here with OpenCV: the listing (byte order of 'stream/frame' paths, hidden names, sub-sub-folders and files in
file_root left out, streams too short for a sequence give none), step and stride, every image_type DALI takes,
sharding and padding -- exact, sample for sample (PNG frames, and JPEG frames decoded to RGB: the same nvImageCodec CPU
decode as decoders.image, exact as tests/test_decoders.py finds for RGB). Shuffling: DALI's order sample for sample with
initial_fill=1, the same sequences per epoch otherwise. Checkpoints, the legacy names, the output spec and bad input
(errors naming the reader, the file and the argument)."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from oprun import needs_dali
from test_readers_numpy import (
    assert_resumes,
    assert_same,
    assert_same_epochs,
    assert_same_meta,
    key,
    read_dali,
    read_reader,
)

from headrace import fn, ops, pipeline_def, types
from headrace.errors import HeadraceError, SchemaError

STREAMS = {"b": 7, "a": 5, "a.b": 3, "c10": 2, "c2": 6, "B": 4}
"""Frames per stream: 'a.b' sorts before 'a' by path bytes ('.' < '/'), 'B' before both; 'c10' is too short for 3."""

def _frame(stream: str, number: int, shape: tuple[int, int]) -> np.ndarray:
    image = np.random.default_rng([ord(c) for c in stream] + [number]).integers(0, 256, (*shape, 3), dtype=np.uint8)
    image[0, 0] = (len(stream), ord(stream[0]), number)  # tells the frame in failures
    return image


@pytest.fixture(scope="module")
def stream_root(tmp_path_factory) -> Path:
    """Streams of PNG frames (each stream its own size), with what DALI's listing leaves out: a hidden stream, a hidden
    frame, a sub-sub-folder, a file in file_root. Frame names sort as text ('3.png' after '04.png')."""
    root = tmp_path_factory.mktemp("streams")
    for stream, count in STREAMS.items():
        (root / stream).mkdir()
        shape = (5 + len(stream), 7 + count)
        for i in range(count):
            name = f"{i}.png" if i == 3 else f"{i:02d}.png"
            cv2.imwrite(str(root / stream / name), _frame(stream, i, shape)[..., ::-1])
    (root / ".hidden").mkdir()
    for i in range(4):
        cv2.imwrite(str(root / ".hidden" / f"{i}.png"), _frame("h", i, (4, 4)))
    cv2.imwrite(str(root / "a" / ".99.png"), _frame("x", 0, (6, 12)))
    (root / "b" / "nested").mkdir()
    cv2.imwrite(str(root / "b" / "nested" / "99.png"), _frame("y", 0, (6, 14)))
    (root / "stray.txt").write_text("not a stream")
    return root


def _dali(batch_size: int, batches: int, **args) -> tuple[list[tuple], dict]:
    return read_dali("sequence", batch_size, batches, **args)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("args", [dict(sequence_length=3), dict(sequence_length=2, step=2, stride=3),
                                  dict(sequence_length=1, image_type=types.GRAY),
                                  dict(sequence_length=4, step=3, image_type=types.BGR),
                                  dict(sequence_length=2, image_type=types.ANY_DATA)])
def test_sequences_match_dali(stream_root, args):
    ours, meta = read_reader("sequence", 4, 5, file_root=str(stream_root), **args)
    theirs, dali_meta = _dali(4, 5, file_root=str(stream_root), **args)
    assert_same_meta(meta, dali_meta)
    assert_same(ours, theirs)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("sharding", [dict(num_shards=3, shard_id=1),
                                      dict(num_shards=4, shard_id=3, pad_last_batch=True),
                                      dict(num_shards=2, shard_id=1, stick_to_shard=True)])
def test_shards_and_padding_match_dali(stream_root, sharding):
    ours, meta = read_reader("sequence", 3, 6, file_root=str(stream_root), sequence_length=3, **sharding)
    theirs, dali_meta = _dali(3, 6, file_root=str(stream_root), sequence_length=3, **sharding)
    assert_same_meta(meta, dali_meta)
    assert_same(ours, theirs)


@pytest.mark.dali
@needs_dali
def test_shuffling_matches_dali(stream_root):
    """initial_fill=1: DALI's one-time permutation of the sequences alone, sample for sample; a real buffer: each
    epoch holds DALI's sequences, in a new order."""
    shuffle = dict(file_root=str(stream_root), sequence_length=2, random_shuffle=True)
    ours, _ = read_reader("sequence", 5, 4, initial_fill=1, **shuffle)
    theirs, _ = _dali(5, 4, initial_fill=1, **shuffle)
    assert_same(ours, theirs)
    epoch = _dali(1, 1, file_root=str(stream_root), sequence_length=2)[1]["epoch_size"]
    ours, _ = read_reader("sequence", epoch, 2, initial_fill=8, **shuffle)
    theirs, _ = _dali(epoch, 2, initial_fill=8, **shuffle)
    assert_same_epochs(ours, theirs, epoch)
    assert [key(s) for s in ours[:epoch]] != [key(s) for s in ours[epoch:]]


@pytest.mark.dali
@needs_dali
def test_jpeg_frames_match_dali(tmp_path):
    for stream in ("s", "t"):
        (tmp_path / stream).mkdir()
        for i in range(3):
            cv2.imwrite(str(tmp_path / stream / f"{i}.jpg"), cv2.GaussianBlur(_frame(stream, i, (24, 32)), (5, 5), 2))
    ours, _ = read_reader("sequence", 2, 2, file_root=str(tmp_path), sequence_length=2)
    theirs, _ = _dali(2, 2, file_root=str(tmp_path), sequence_length=2)
    assert_same(ours, theirs)


def test_sequences_are_the_frames_in_order(stream_root):
    """Without DALI: every sequence is its frames as OpenCV decodes them, in the documented order."""
    ours, meta = read_reader("sequence", 5, 1, file_root=str(stream_root), sequence_length=2, step=3, stride=2)
    expected = []
    for stream in sorted(STREAMS, key=lambda s: os.fsencode(s + "/")):
        names = sorted(os.listdir(stream_root / stream), key=lambda n: os.fsencode(f"{stream}/{n}"))
        names = [n for n in names if not n.startswith(".") and not (stream_root / stream / n).is_dir()]
        for start in range(0, len(names) - 2, 3):
            expected.append(np.stack([cv2.imread(str(stream_root / stream / names[start + k]))[..., ::-1]
                                      for k in (0, 2)]))
    assert meta["epoch_size"] == len(expected)
    for (sequence,), want in zip(ours, expected, strict=False):
        assert sequence.dtype == np.uint8 and np.array_equal(sequence, want)


def test_checkpoints_resume_exactly(stream_root):
    assert_resumes("sequence", 3, file_root=str(stream_root), sequence_length=2, random_shuffle=True, initial_fill=4,
                   num_shards=2, shard_id=1)
    assert_resumes("sequence", 2, file_root=str(stream_root), sequence_length=3, pad_last_batch=True, num_shards=3,
                   shard_id=2)


def test_legacy_names_and_the_output_spec(stream_root):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        legacy = fn.sequence_reader(file_root=str(stream_root), sequence_length=2)
        cls = ops.SequenceReader(file_root=str(stream_root), sequence_length=2)()
        return fn.readers.sequence(file_root=str(stream_root), sequence_length=2), legacy, cls

    p = pipe()
    new, legacy, cls = p.run()
    assert new.layout() == legacy.layout() == "FHWC"
    for i in range(2):
        assert np.array_equal(np.asarray(new.at(i)), np.asarray(legacy.at(i)))
        assert np.array_equal(np.asarray(new.at(i)), np.asarray(cls.at(i)))
    p.close()


def _error(root: Path, **args) -> str:
    with pytest.raises(HeadraceError) as info:
        read_reader("sequence", 1, 1, file_root=str(root), **args)
    return str(info.value)


def test_bad_input_names_the_reader_the_file_and_the_argument(tmp_path):
    message = _error(tmp_path / "nowhere", sequence_length=2)
    assert "readers.sequence" in message and "file_root" in message and "nowhere" in message
    (tmp_path / "s").mkdir()
    for i in range(2):
        cv2.imwrite(str(tmp_path / "s" / f"{i}.png"), _frame("s", i, (4, 5)))
    message = _error(tmp_path, sequence_length=3)
    assert "readers.sequence" in message and "no sequence" in message and "sequence_length=3" in message
    (tmp_path / "s" / "2.png").write_bytes(b"not an image")
    message = _error(tmp_path, sequence_length=3)
    assert "readers.sequence" in message and "2.png" in message and "not a decodable image" in message
    cv2.imwrite(str(tmp_path / "s" / "2.png"), _frame("s", 2, (6, 5)))
    message = _error(tmp_path, sequence_length=3)
    assert "2.png" in message and "shape" in message and "first frame" in message
    with pytest.raises(SchemaError, match="image_type"):
        read_reader("sequence", 1, 1, file_root=str(tmp_path), sequence_length=2, image_type=types.YCbCr)
    with pytest.raises(SchemaError, match="stride"):
        read_reader("sequence", 1, 1, file_root=str(tmp_path), sequence_length=2, stride=0)
