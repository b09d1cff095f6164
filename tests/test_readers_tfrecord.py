"""readers.tfrecord and `headrace tfrecord2idx`: tf.train.Example records written here with protobuf, read by headrace
and by DALI's CPU build from the same files and the same index files (built by the subcommand); outputs equal
exactly (dtype, shape and values), sample for sample, for several shard settings. Shuffling, checkpoints, the
iterator's epoch size, the pipeline file and bad records are checked on headrace alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali

from headrace import Pipeline, SchemaError, fn, pipeline_def, tfrecord
from headrace.cli import main as cli_main
from headrace.errors import SampleError

SIZES = (7, 6)  # records per file: 13 in all, divisible by neither the batch nor the shard counts
NAMES = ("label", "image", "box", "pairs", "values")


def make_example(i: int, rng: np.random.Generator) -> bytes:
    example = tfrecord.example_class()()
    features = example.features.feature
    features["label"].int64_list.value.append(i)
    features["image"].bytes_list.value.append(rng.integers(0, 256, 5 + 3 * i, dtype=np.uint8).tobytes())
    features["box"].float_list.value.extend(rng.random(4, dtype=np.float32).tolist())
    features["pairs"].int64_list.value.extend(rng.integers(-(2**40), 2**40, 2 * (i % 3 + 1)).tolist())
    features["values"].float_list.value.extend(rng.standard_normal(i % 4 + 1).astype(np.float32).tolist())
    return example.SerializeToString()


def features() -> dict:
    return {"label": tfrecord.FixedLenFeature([], tfrecord.int64, -1),
            "image": tfrecord.FixedLenFeature((), tfrecord.string, ""),
            "box": tfrecord.FixedLenFeature([4], tfrecord.float32, 0.0),
            "pairs": tfrecord.VarLenFeature([2], tfrecord.int64, 0),
            "values": tfrecord.VarLenFeature(tfrecord.float32, 0.0)}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Two TFRecord files and their index files (written by `headrace tfrecord2idx`)."""
    root = tmp_path_factory.mktemp("tfrecord")
    rng = np.random.default_rng(3)
    paths, indices, number = [], [], 0
    for k, size in enumerate(SIZES):
        path, index = root / f"part{k}.tfrecord", root / f"part{k}.idx"
        path.write_bytes(b"".join(tfrecord.encode_record(make_example(number + i, rng)) for i in range(size)))
        number += size
        assert cli_main(["tfrecord2idx", str(path), str(index)]) == 0
        paths.append(str(path))
        indices.append(str(index))
    return paths, indices


def by_name(outputs, names=NAMES) -> dict:
    """The reader's outputs by feature name (fn.readers.tfrecord returns a dict, as DALI's)."""
    if isinstance(outputs, dict):
        return outputs
    return dict(zip(names, outputs if isinstance(outputs, tuple) else (outputs,), strict=True))


def headrace_pipe(paths, indices, batch_size=4, feats=None, checkpoint=None, lookahead="before", **kwargs):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=11, enable_checkpointing=True,
                  executor_options={"lookahead": lookahead})
    def pipe():
        out = by_name(fn.readers.tfrecord(path=paths, index_path=indices, features=feats or features(),
                                          name="Reader", **kwargs), list(feats or features()))
        return tuple(out[name] for name in (feats or features()))

    return pipe(checkpoint=checkpoint)


def samples(pipe, batches: int) -> list[tuple[np.ndarray, ...]]:
    out = []
    for _ in range(batches):
        tensors = pipe.run()
        out += [tuple(np.asarray(t.at(i)) for t in tensors) for i in range(len(tensors[0]))]
    return out


def test_tfrecord2idx_writes_dali_index_format(records):
    paths, indices = records
    lines = open(indices[0]).read().splitlines()
    assert len(lines) == SIZES[0]
    offset = 0
    data = open(paths[0], "rb").read()
    for line in lines:  # 'offset size', records back to back, each 8 + 4 + length + 4 bytes
        start, size = map(int, line.split())
        assert start == offset
        assert size == int.from_bytes(data[start:start + 8], "little") + 16
        offset += size
    assert offset == len(data)


def _dali_tfrecord2idx() -> str | None:
    """DALI's own tfrecord2idx script: beside this Python (a virtual environment's bin) or on the PATH."""
    beside = Path(sys.executable).parent / "tfrecord2idx"
    return str(beside) if beside.exists() else shutil.which("tfrecord2idx")


@pytest.mark.dali
@pytest.mark.skipif(_dali_tfrecord2idx() is None, reason="DALI's tfrecord2idx script is not installed")
def test_tfrecord2idx_writes_what_dalis_script_writes(records, tmp_path):
    paths, indices = records
    subprocess.run([_dali_tfrecord2idx(), paths[1], str(tmp_path / "dali.idx")], check=True, capture_output=True)
    assert (tmp_path / "dali.idx").read_text() == open(indices[1]).read()


def test_features_and_their_shapes(records):
    paths, indices = records
    got = samples(headrace_pipe(*records, batch_size=13), 1)
    rng = np.random.default_rng(3)
    example_cls = tfrecord.example_class()
    for i, (label, image, box, pairs, values) in enumerate(got):
        want = example_cls.FromString(make_example(i, rng)).features.feature
        assert label.dtype == np.int64 and label.shape == () and int(label) == i
        assert image.dtype == np.uint8 and image.tobytes() == want["image"].bytes_list.value[0]
        assert box.dtype == np.float32 and box.shape == (4,)
        assert np.array_equal(box, np.array(want["box"].float_list.value, np.float32))
        assert pairs.shape == (i % 3 + 1, 2) and pairs.dtype == np.int64
        assert np.array_equal(pairs.ravel(), want["pairs"].int64_list.value)
        assert values.shape == (i % 4 + 1,)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("shards", [{}, dict(num_shards=3, shard_id=1), dict(num_shards=2, shard_id=1,
                                    stick_to_shard=True), dict(num_shards=3, shard_id=2, pad_last_batch=True)])
def test_outputs_equal_dali_sample_for_sample(records, shards):
    """DALI reads the same files through the index files tfrecord2idx wrote; every output is equal."""
    import nvidia.dali.tfrecord as dali_tfrecord
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    paths, indices = records
    dali_features = {"label": dali_tfrecord.FixedLenFeature([], dali_tfrecord.int64, -1),
                     "image": dali_tfrecord.FixedLenFeature((), dali_tfrecord.string, ""),
                     "box": dali_tfrecord.FixedLenFeature([4], dali_tfrecord.float32, 0.0),
                     "pairs": dali_tfrecord.VarLenFeature([2], dali_tfrecord.int64, 0),
                     "values": dali_tfrecord.VarLenFeature(dali_tfrecord.float32, 0.0)}

    @dali_pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def dali_pipe():
        out = dfn.readers.tfrecord(path=paths, index_path=indices, features=dali_features, name="Reader", **shards)
        return tuple(out[name] for name in NAMES)

    dali = dali_pipe()
    dali.build()
    theirs = samples(dali, 8)
    ours_pipe = headrace_pipe(paths, indices, **shards)
    ours = samples(ours_pipe, 8)
    assert len(ours) == len(theirs)
    for number, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for name, x, y in zip(NAMES, a, b, strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f"sample {number}, {name}"
    meta, dali_meta = ours_pipe.reader_meta("Reader"), dali.reader_meta("Reader")
    for key in ("epoch_size", "epoch_size_padded", "number_of_shards", "shard_id", "pad_last_batch"):
        assert meta[key] == dali_meta[key], key


def test_the_schema_presents_the_outputs_as_a_dict_by_feature_name():
    from headrace.schema import SCHEMAS

    outputs = ("a", "b", "c", "d", "e")  # what add_op returns, in the order of `features`
    assert SCHEMAS["readers.tfrecord"].present({"features": features()}, outputs) == dict(zip(NAMES, outputs,
                                                                                             strict=True))


def test_fn_returns_a_dict_by_feature_name_as_dali(records):
    seen = []

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        out = fn.readers.tfrecord(path=records[0], index_path=records[1], features=features())
        seen.append(out)
        return out["label"]

    pipe().build()
    assert isinstance(seen[0], dict) and list(seen[0]) == list(NAMES)


def labels_of(pipe, batches: int) -> list[int]:
    return [int(s[0]) for s in samples(pipe, batches)]


def test_random_shuffle_permutes_each_epoch_of_the_shard(records):
    pipe = headrace_pipe(*records, batch_size=5, feats={"label": features()["label"]}, num_shards=2, shard_id=1,
                         stick_to_shard=True, random_shuffle=True)
    got = labels_of(pipe, 6)  # shard 1 holds records 6..12 (7 of them); 30 samples: 4 epochs and a bit
    epochs = [got[k:k + 7] for k in range(0, 28, 7)]
    assert all(sorted(e) == list(range(6, 13)) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1


def test_shuffle_after_epoch_reorders_whole_files_and_shards_partition_each_epoch(records):
    per_shard = [labels_of(headrace_pipe(*records, batch_size=7, feats={"label": features()["label"]},
                                         num_shards=2, shard_id=k, pad_last_batch=True, shuffle_after_epoch=True),
                           4) for k in range(2)]
    orders = set()
    for epoch in range(4):  # one padded batch of 7 per epoch and shard: shards of 6 and 7 records
        seen = per_shard[0][7 * epoch:7 * epoch + 6] + per_shard[1][7 * epoch:7 * epoch + 7]
        assert sorted(seen) == list(range(13)), f"epoch {epoch}"
        orders.add(tuple(seen))
        # each file's records stay in their order, one file after the other
        assert seen in ([*range(7), *range(7, 13)], [*range(7, 13), *range(7)])
    assert len(orders) == 2  # 4 epochs over 2 files: both orders (seeded, the same for every run)
    with pytest.raises(SchemaError, match=r"readers.tfrecord \(node 'Reader'\).*stick_to_shard"):
        headrace_pipe(*records, shuffle_after_epoch=True, stick_to_shard=True).build()


def test_checkpoint_resumes_bit_for_bit(records):
    shuffle = dict(random_shuffle=True, initial_fill=3)
    reference = samples(headrace_pipe(*records, **shuffle), 9)
    first = headrace_pipe(*records, **shuffle)
    samples(first, 5)  # past the first epoch's end (13 records, batches of 4)
    state = first.checkpoint()
    resumed = headrace_pipe(*records, checkpoint=state, **shuffle)
    for a, b in zip(samples(resumed, 4), reference[20:], strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_pipeline_file_round_trip_keeps_the_features_in_order(records, tmp_path):
    pipe = headrace_pipe(*records)
    pipe.serialize(tmp_path / "pipe.json")
    stored = json.loads((tmp_path / "pipe.json").read_text())
    node = next(n for n in stored["nodes"] if n["op"] == "readers.tfrecord")
    assert [name for name, _ in node["args"]["features"]] == list(NAMES)
    loaded = Pipeline.load(tmp_path / "pipe.json")
    for a, b in zip(samples(loaded, 4), samples(headrace_pipe(*records), 4), strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_torch_iterator_reads_the_epoch_size_through_reader_name(records):
    from headrace_torch import GenericIterator, LastBatchPolicy

    iterator = GenericIterator(headrace_pipe(*records, feats={"label": features()["label"]}), ["label"],
                               reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)
    seen = [int(v) for batch in iterator for v in batch[0]["label"].reshape(-1)]
    assert seen == list(range(13))


def _corrupt(tmp_path, records, position: int, name: str = "bad.tfrecord"):
    """A copy of the first file with one byte flipped. Each call writes a new file: rewriting one that a reader of
    an earlier pipeline still maps (its read-ahead) would truncate the mapping under it (SIGBUS, as in DALI)."""
    paths, indices = records
    data = bytearray(open(paths[0], "rb").read())
    data[position] ^= 0x55
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return [str(path)], [indices[0]]


def test_a_corrupt_record_names_the_reader_the_file_and_the_record(records, tmp_path):
    offsets = [int(line.split()[0]) for line in open(records[1][0])]
    bad = _corrupt(tmp_path, records, offsets[2] + 20)  # inside record 2's data
    with pytest.raises(SampleError, match=r"readers.tfrecord \(node 'Reader'\).*bad.tfrecord.*record 2.*CRC of the "
                                          r"record's data"):
        samples(headrace_pipe(*bad, batch_size=3), 1)
    bad = _corrupt(tmp_path, records, offsets[1] + 2, "bad_length.tfrecord")  # record 1's length
    with pytest.raises(SampleError, match=r"bad_length.tfrecord.*record 1.*CRC of the record's length"):
        samples(headrace_pipe(*bad, batch_size=3), 1)


def test_a_truncated_file_or_a_stale_index_is_refused_naming_the_index_line(records, tmp_path):
    paths, indices = records
    data = open(paths[0], "rb").read()
    short = tmp_path / "short.tfrecord"
    short.write_bytes(data[:-10])
    with pytest.raises(SchemaError, match=r"readers.tfrecord \(node 'Reader'\): index file .*part0.idx.*line 7.*"
                                          r"past the end.*stale index"):
        headrace_pipe([str(short)], [indices[0]]).build()
    assert cli_main(["tfrecord2idx", str(short), str(tmp_path / "short.idx")]) == 1
    with pytest.raises(SchemaError, match=r"1 files in `path` but 2 in `index_path`"):
        headrace_pipe([paths[0]], indices).build()


def test_a_feature_of_another_type_or_too_many_values_is_an_error(records):
    with pytest.raises(SampleError, match=r"record 0.*feature 'label' holds a int64_list, it is declared float32"):
        samples(headrace_pipe(*records, feats={"label": tfrecord.FixedLenFeature([], tfrecord.float32, 0.0)}), 1)
    with pytest.raises(SampleError, match=r"feature 'box' has 4 values, more than its shape \[2\] holds"):
        samples(headrace_pipe(*records, feats={"box": tfrecord.FixedLenFeature([2], tfrecord.float32, 0.0)}), 1)
    with pytest.raises(SchemaError, match=r"argument 'features': feature 'image': .*tensors of strings"):
        headrace_pipe(*records, feats={"image": tfrecord.VarLenFeature(tfrecord.string, "")})


def test_a_missing_feature_is_its_default_or_empty_and_short_fixed_features_take_the_default(tmp_path):
    example = tfrecord.example_class()()
    example.features.feature["few"].int64_list.value.extend([5, 6])
    path, index = tmp_path / "one.tfrecord", tmp_path / "one.idx"
    path.write_bytes(tfrecord.encode_record(example.SerializeToString()))
    assert cli_main(["tfrecord2idx", str(path), str(index)]) == 0
    feats = {"few": tfrecord.FixedLenFeature([2, 2], tfrecord.int64, -3),
             "absent": tfrecord.VarLenFeature([3], tfrecord.float32, 0.0),
             "gone": tfrecord.FixedLenFeature([2], tfrecord.float32, 0.5),
             "text": tfrecord.FixedLenFeature([], tfrecord.string, "none")}
    few, absent, gone, text = samples(headrace_pipe([str(path)], [str(index)], batch_size=1, feats=feats), 1)[0]
    assert few.tolist() == [[5, 6], [-3, -3]]
    assert absent.dtype == np.float32 and absent.shape == (0, 3)
    assert gone.dtype == np.float32 and gone.tolist() == [0.5, 0.5]
    assert text.tobytes() == b"none"


@pytest.mark.parametrize("which", ["path", "index_path"])
def test_a_device_or_a_fifo_is_refused_unread(records, tmp_path, which):
    """A data or index file that is not a regular file would be read forever (/dev/zero) or block (a FIFO)."""
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for bad, shown in (("/dev/zero", "/dev/zero"), (str(fifo), "fifo")):  # long paths are shortened in errors
        paths, indices = records
        given = {"path": [bad, paths[1]], "index_path": indices} if which == "path" else \
            {"path": paths, "index_path": [indices[0], bad]}
        with pytest.raises(SchemaError, match=rf"readers.tfrecord \(node 'Reader'\): .*{shown}' is not a regular file"):
            headrace_pipe(given["path"], given["index_path"]).build()


def test_a_file_truncated_after_it_was_mapped_fails_its_records_with_an_error(records, tmp_path):
    """Records are views of the mapped file: one cut short since fails the records it lost with a SampleError
    naming them (a read of the lost pages would be a SIGBUS), measured before every batch."""
    paths, indices = records
    copy = tmp_path / "mapped.tfrecord"
    copy.write_bytes(open(paths[0], "rb").read())
    pipe = headrace_pipe([str(copy)], [indices[0]], batch_size=2, lookahead="off")
    pipe.build()
    executor = pipe._executor  # batches run here, in this thread, without read-ahead: nothing races the truncation
    executor.run(0)
    with open(copy, "r+b") as f:
        f.truncate(copy.stat().st_size // 2)
    with pytest.raises(SampleError, match=r"readers.tfrecord \(node 'Reader'\).*mapped.tfrecord.*record \d.*the file "
                                          r"ends after \d+ of its bytes"):
        for iteration in range(1, 8):
            executor.run(iteration)
    pipe.close()


def test_dont_use_mmap_reads_copies_with_the_same_samples(records):
    mapped = samples(headrace_pipe(*records, batch_size=5), 6)
    copied = samples(headrace_pipe(*records, batch_size=5, dont_use_mmap=True), 6)
    assert len(mapped) == len(copied) == 30
    for a, b in zip(mapped, copied, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
