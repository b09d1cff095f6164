"""readers.mxnet: MXNet RecordIO files written here to the format's spec (dmlc-core's recordio: records split where
the data holds the magic number; MXNet's image header with one label or several), read by headrace and by DALI's CPU
build from the same .rec and .idx files; outputs equal exactly, sample for sample, for several shard settings.
Shuffling, checkpoints, the iterator's epoch size and bad records are checked on headrace alone."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from oprun import needs_dali

from headrace import SchemaError, fn, pipeline_def
from headrace.errors import SampleError

MAGIC = 0xCED7230A
COUNTS = (8, 5)  # records per .rec file


def encode_recordio(payload: bytes) -> bytes:
    """One record as dmlc-core writes it: split at every 4-aligned magic number of the payload (which is dropped),
    each part with its header (magic, flag << 29 | length) and padded to 4 bytes."""
    magic = struct.pack("<I", MAGIC)
    cuts = [k for k in range(0, len(payload) - 3, 4) if payload[k:k + 4] == magic]
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(payload[start:cut])
        start = cut + 4
    pieces.append(payload[start:])
    out = b""
    for k, piece in enumerate(pieces):
        flag = 0 if len(pieces) == 1 else 1 if k == 0 else 3 if k == len(pieces) - 1 else 2
        out += struct.pack("<II", MAGIC, flag << 29 | len(piece)) + piece + b"\0" * (-len(piece) % 4)
    return out


def image_record(number: int, rng: np.random.Generator) -> tuple[bytes, bytes, list[float]]:
    """(record payload, image bytes, labels): MXNet's IRHeader (flag, label, id, id2), `flag` labels, the image.
    Every third record has several labels; every fourth holds the magic number in its image."""
    image = rng.integers(0, 256, 9 + 5 * number, dtype=np.uint8).tobytes()
    if number % 4 == 1:
        image = image[:4] + struct.pack("<I", MAGIC) + image[4:12] + struct.pack("<I", MAGIC) + image[12:]
    if number % 3 == 2:
        labels = [float(number), number + 0.5, -1.0]
        head = struct.pack("<IfQQ", len(labels), 0.0, number, 0) + np.array(labels, np.float32).tobytes()
    else:
        labels = [float(number)]
        head = struct.pack("<IfQQ", 0, float(number), number, 0)
    return head + image, image, labels


@pytest.fixture(scope="module")
def recordio(tmp_path_factory):
    """Two .rec files and the one .idx over both (offsets into their concatenation, as DALI reads them)."""
    root = tmp_path_factory.mktemp("recordio")
    rng = np.random.default_rng(2)
    paths, lines, expected, stream, number = [], [], [], 0, 0
    for k, count in enumerate(COUNTS):
        data = b""
        for _ in range(count):
            payload, image, labels = image_record(number, rng)
            lines.append(f"{number}\t{stream + len(data)}\n")
            data += encode_recordio(payload)
            expected.append((image, labels))
            number += 1
        path = root / f"part{k}.rec"
        path.write_bytes(data)
        stream += len(data)
        paths.append(str(path))
    index = root / "all.idx"
    index.write_text("".join(lines))
    return paths, str(index), expected


def headrace_pipe(paths, index, batch_size=4, checkpoint=None, seed=4, **kwargs):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=seed, enable_checkpointing=True)
    def pipe():
        return fn.readers.mxnet(path=paths, index_path=index, name="Reader", **kwargs)

    return pipe(checkpoint=checkpoint)


def samples(pipe, batches: int) -> list[tuple[np.ndarray, ...]]:
    out = []
    for _ in range(batches):
        tensors = pipe.run()
        out += [tuple(np.asarray(t.at(i)) for t in tensors) for i in range(len(tensors[0]))]
    return out


def test_data_and_labels_as_written(recordio):
    paths, index, expected = recordio
    got = samples(headrace_pipe(paths, index, batch_size=13), 1)
    for (data, label), (image, labels) in zip(got, expected, strict=True):
        assert data.dtype == np.uint8 and data.tobytes() == image
        assert label.dtype == np.float32 and label.tolist() == labels


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("shards", [{}, dict(num_shards=3, shard_id=1), dict(num_shards=2, shard_id=1,
                                    stick_to_shard=True), dict(num_shards=3, shard_id=2, pad_last_batch=True)])
def test_outputs_equal_dali_sample_for_sample(recordio, shards):
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    paths, index, _ = recordio

    @dali_pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def dali_pipe():
        return tuple(dfn.readers.mxnet(path=paths, index_path=[index], name="Reader", **shards))

    dali = dali_pipe()
    dali.build()
    theirs = samples(dali, 8)
    pipe = headrace_pipe(paths, index, **shards)
    ours = samples(pipe, 8)
    for number, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for output, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f"sample {number}, {output}"
    meta, dali_meta = pipe.reader_meta("Reader"), dali.reader_meta("Reader")
    for key in ("epoch_size", "epoch_size_padded", "number_of_shards", "shard_id", "pad_last_batch"):
        assert meta[key] == dali_meta[key], key


def ids(pipe, batches: int) -> list[int]:
    """The record numbers (the first label) of what the pipeline reads."""
    return [int(s[1][0]) for s in samples(pipe, batches)]


def test_random_shuffle_and_shuffle_after_epoch(recordio):
    paths, index, _ = recordio
    got = ids(headrace_pipe(paths, index, batch_size=13, random_shuffle=True), 3)
    epochs = [got[k:k + 13] for k in range(0, 39, 13)]
    assert all(sorted(e) == list(range(13)) for e in epochs) and len({tuple(e) for e in epochs}) > 1
    got = ids(headrace_pipe(paths, index, batch_size=13, random_shuffle=True, initial_fill=2), 3)
    assert all(_in_windows(got[k:k + 13], 2) and sorted(got[k:k + 13]) == list(range(13)) for k in (0, 13, 26))
    got = ids(headrace_pipe(paths, index, batch_size=13, shuffle_after_epoch=True), 4)
    orders = {tuple(got[k:k + 13]) for k in range(0, 52, 13)}
    assert orders == {tuple(range(13)), (*range(8, 13), *range(8))}  # whole files, each in its order


def test_checkpoint_resumes_bit_for_bit(recordio):
    paths, index, _ = recordio
    reference = samples(headrace_pipe(paths, index, random_shuffle=True, num_shards=2, shard_id=1), 7)
    first = headrace_pipe(paths, index, random_shuffle=True, num_shards=2, shard_id=1)
    samples(first, 3)
    resumed = headrace_pipe(paths, index, random_shuffle=True, num_shards=2, shard_id=1,
                            checkpoint=first.checkpoint())
    for a, b in zip(samples(resumed, 4), reference[12:], strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_torch_iterator_reads_the_epoch_size_through_reader_name(recordio):
    from headrace_torch import GenericIterator, LastBatchPolicy

    paths, index, _ = recordio

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=3)
    def pipe():
        _, labels = fn.readers.mxnet(path=paths, index_path=index, name="Reader")
        return fn.reductions.min(labels)

    iterator = GenericIterator(pipe(), ["label"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
    seen = [int(v) for batch in iterator for v in batch[0]["label"].reshape(-1)]
    assert len(iterator) == 4 and seen == [n if n % 3 != 2 else -1 for n in range(13)]


def test_bad_records_and_indexes_name_the_file_and_the_record(recordio, tmp_path):
    paths, index, _ = recordio
    offsets = [int(line.split()[1]) for line in open(index)]
    data = bytearray(open(paths[0], "rb").read())
    data[offsets[3]] ^= 0xFF  # record 3's magic number
    bad = tmp_path / "bad.rec"
    bad.write_bytes(bytes(data))
    with pytest.raises(SampleError, match=r"readers.mxnet \(node 'Reader'\): .*bad.rec.*record 3 \(offset "
                                          rf"{offsets[3]}\).*wrong magic number"):
        samples(headrace_pipe([str(bad), paths[1]], index), 1)
    data = bytearray(open(paths[0], "rb").read())
    data[offsets[2] + 4:offsets[2] + 8] = struct.pack("<I", 5000)  # record 2 claims 5000 bytes
    bad.write_bytes(bytes(data))
    with pytest.raises(SampleError, match=r"bad.rec.*record 2 .*runs past the record's"):
        samples(headrace_pipe([str(bad), paths[1]], index), 1)
    stale = tmp_path / "stale.idx"
    stale.write_text(open(index).read() + f"99\t{10**7}\n")
    with pytest.raises(SchemaError, match=r"index file .*stale.idx.*line 14: offset 10000000 is past the end"):
        headrace_pipe(paths, str(stale)).build()
    stale.write_text("0 zero\n")
    with pytest.raises(SchemaError, match=r"stale.idx.*line 1: expected 'key<TAB>offset'"):
        headrace_pipe(paths, str(stale)).build()


def _in_windows(order: list[int], fill: int) -> bool:
    """Whether output i of a shuffle buffer of `fill` comes from the first fill + i records."""
    return all(n < fill + i for i, n in enumerate(order))


@pytest.mark.dali
@needs_dali
def test_random_shuffle_draws_through_initial_fill_as_dali(recordio):
    """Both readers give output i from the first initial_fill + i records of the epoch (the windows of DALI's shuffle
    buffer), and a permutation of the records over the first epoch; the orders themselves differ (other streams)."""
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    paths, index, _ = recordio
    for seed in range(3):
        @dali_pipeline_def(batch_size=13, num_threads=1, device_id=None, seed=seed)
        def dali_pipe():
            return tuple(dfn.readers.mxnet(path=paths, index_path=[index], random_shuffle=True, initial_fill=3))

        dali = dali_pipe()
        dali.build()
        theirs = [int(np.asarray(label)[0]) for label in dali.run()[1]]
        ours = ids(headrace_pipe(paths, index, batch_size=13, seed=seed, random_shuffle=True, initial_fill=3), 1)
        for order in (theirs, ours):
            assert sorted(order) == list(range(13)) and _in_windows(order, 3), order


def test_buffer_shuffle_statistics():
    """Through a buffer of 2 the first output is entry 0 or 1, each half the time; a buffer as large as the data is
    a uniform permutation (each entry first 1/6 of the time); every epoch of the reader stays in its windows."""
    from headrace.readers.recordio import shuffled_through_buffer

    rng = np.random.default_rng(0)
    order = np.arange(6)
    firsts = np.array([shuffled_through_buffer(order, 2, rng)[0] for _ in range(4000)])
    assert set(firsts.tolist()) == {0, 1} and abs(np.mean(firsts == 0) - 0.5) < 0.03
    firsts = np.array([shuffled_through_buffer(order, 6, rng)[0] for _ in range(6000)])
    assert np.all(np.abs(np.bincount(firsts, minlength=6) / 6000 - 1 / 6) < 0.025)
    for _ in range(50):
        out = shuffled_through_buffer(order, 3, rng).tolist()
        assert sorted(out) == order.tolist() and _in_windows(out, 3)
