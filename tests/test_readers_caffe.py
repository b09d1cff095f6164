"""readers.caffe and readers.caffe2 against DALI's CPU build on LMDB databases written here with the lmdb package
and protobuf-built Caffe Datums / Caffe2 TensorProtos: images (encoded and raw), labels of every label_type,
additional tensors and boxes, sharding and padding (exact, sample for sample), shuffling (the same samples per
epoch), checkpoints, corrupt databases and records. label_types 1 and 3 (sparse, weighted sparse) fail in DALI 2.4's
CPU build ("new_type must be valid type"), so they are checked against the record's own indices and weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali
from test_readers_numpy import (
    SHARDINGS,
    assert_resumes,
    assert_same,
    assert_same_epochs,
    assert_same_meta,
    read_dali,
    read_reader,
)

from headrace.errors import HeadraceError, SchemaError

lmdb = pytest.importorskip("lmdb")


def messages():
    from headrace.readers.lmdb_records import messages

    return messages()


def write_db(path: Path, records: dict[bytes, bytes]) -> str:
    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for key, value in records.items():
            txn.put(key, value)
    env.close()
    return str(path)


def both(op: str, batch_size: int, batches: int, **args):
    ours, meta = read_reader(op, batch_size, batches, **args)
    theirs, dali_meta = read_dali(op, batch_size, batches, **args)
    return ours, theirs, meta, dali_meta


@pytest.fixture(scope="module")
def caffe_dbs(tmp_path_factory) -> dict[str, str]:
    """Two Caffe databases: 13 encoded Datums (keys written out of order) and 6 raw (encoded=false) HWC ones."""
    root = tmp_path_factory.mktemp("caffe")
    rng = np.random.default_rng(1)
    datum = messages()["Datum"]
    encoded = {f"{k:05d}".encode(): datum(data=rng.integers(0, 256, 10 + k, dtype=np.uint8).tobytes(),
                                          label=int(rng.integers(-5, 1000)), encoded=True).SerializeToString()
               for k in rng.permutation(13)}
    raw = {}
    for k in range(6):
        shape = (int(rng.integers(2, 6)), int(rng.integers(2, 6)), 3)
        raw[f"raw{k}".encode()] = datum(channels=3, height=shape[0], width=shape[1], label=k, encoded=False,
                                        data=rng.integers(0, 256, shape, dtype=np.uint8).tobytes()).SerializeToString()
    return {"encoded": write_db(root / "encoded", encoded), "raw": write_db(root / "raw", raw)}


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("sharding", SHARDINGS)
def test_caffe_matches_dali(caffe_dbs, sharding):
    ours, theirs, meta, dali_meta = both("caffe", 4, 6, path=caffe_dbs["encoded"], **sharding)
    assert_same(ours, theirs)
    assert_same_meta(meta, dali_meta)


@pytest.mark.dali
@needs_dali
def test_caffe_raw_images_and_partial_outputs_match_dali(caffe_dbs):
    for db, args in (("raw", {}), ("raw", dict(label_available=False)), ("encoded", dict(image_available=False))):
        ours, theirs, _, _ = both("caffe", 4, 3, path=caffe_dbs[db], **args)
        assert_same(ours, theirs)
        assert len(ours[0]) == 2 - len(args)


def tensor(kind: str, values=None, **fields):
    proto = messages()["TensorProto"]
    types = {"FLOAT": 1, "INT32": 2, "BYTE": 3, "STRING": 4, "INT64": 10}
    data = {"FLOAT": "float_data", "INT32": "int32_data", "INT64": "int64_data", "STRING": "string_data"}
    if values is not None:
        fields[data[kind]] = values
    return proto(data_type=types[kind], **fields)


@pytest.fixture(scope="module")
def caffe2_dbs(tmp_path_factory) -> dict[str, str]:
    """Caffe2 databases, 9 records each, one per label layout: encoded image, label, 2 additional tensors, box."""
    root = tmp_path_factory.mktemp("caffe2")
    rng = np.random.default_rng(2)
    protos = messages()["TensorProtos"]
    dbs = {}

    def image(k):
        return tensor("STRING", [rng.integers(0, 256, 8 + k, dtype=np.uint8).tobytes()])

    def extras():
        return [tensor("FLOAT", rng.random(3).astype(np.float32).tolist()),
                tensor("INT64", rng.integers(-(2**40), 2**40, 2).tolist())]

    def box():
        return tensor("INT32", rng.integers(0, 100, 4).tolist())

    layouts = {
        "single_int": lambda: [tensor("INT32", [int(rng.integers(0, 50))])],
        "single_float": lambda: [tensor("FLOAT", [float(rng.random())])],
        "sparse": lambda: [tensor("INT32", sorted(rng.choice(6, 2, replace=False).tolist())), tensor("FLOAT", [1, 1])],
        "dense": lambda: [tensor("FLOAT", rng.random(6).astype(np.float32).tolist())],
        "weighted": lambda: [tensor("INT32", rng.choice(6, 3, replace=False).tolist()),
                             tensor("FLOAT", rng.random(3).astype(np.float32).tolist())],
        "none": lambda: [],
    }
    for name, label in layouts.items():
        dbs[name] = write_db(root / name, {f"r{k}".encode(): protos(protos=[image(k), *label(), *extras(), box()])
                                           .SerializeToString() for k in range(9)})
    raw = {}
    for k in range(5):
        shape = (int(rng.integers(2, 5)), int(rng.integers(2, 5)), 3)
        pixels = tensor("BYTE", dims=list(shape), byte_data=rng.integers(0, 256, shape, dtype=np.uint8).tobytes())
        raw[f"r{k}".encode()] = protos(protos=[pixels, tensor("INT32", [k])]).SerializeToString()
    dbs["raw"] = write_db(root / "raw", raw)
    return dbs


CAFFE2_CASES = [
    ("single_int", dict(label_type=0, additional_inputs=2, bbox=True)),
    ("single_float", dict(label_type=0)),
    ("dense", dict(label_type=2, additional_inputs=1)),
    ("none", dict(label_type=4, additional_inputs=2, bbox=True)),
    ("none", dict(label_type=4, image_available=True)),
    ("raw", dict(label_type=0)),
]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize(("db", "args"), CAFFE2_CASES)
def test_caffe2_matches_dali(caffe2_dbs, db, args):
    ours, theirs, _, _ = both("caffe2", 3, 4, path=caffe2_dbs[db], **args)
    assert_same(ours, theirs)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("sharding", SHARDINGS)
def test_caffe2_shards_match_dali(caffe2_dbs, sharding):
    ours, theirs, meta, dali_meta = both("caffe2", 2, 6, path=caffe2_dbs["single_int"], **sharding)
    assert_same(ours, theirs)
    assert_same_meta(meta, dali_meta)


def _records(path: str) -> list:
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        records = [messages()["TensorProtos"].FromString(value) for _, value in txn.cursor()]
    env.close()
    return records


def test_caffe2_sparse_labels(caffe2_dbs, tmp_path):
    """label_type 1: a one-hot vector of num_labels (the label's type) with a 1 at each index, the additional inputs
    after the tensor that follows the label; label_type 3: a float32 vector holding each index's weight."""
    import shutil

    copies = {}
    for name in ("sparse", "weighted"):  # lmdb opens a database once per process: read copies here
        copies[name] = str(tmp_path / name)
        shutil.copytree(caffe2_dbs[name], copies[name])
    ours, _ = read_reader("caffe2", 9, 1, path=caffe2_dbs["sparse"], label_type=1, num_labels=6, additional_inputs=2,
                          bbox=True)
    for (image, label, floats, ints, box), record in zip(ours, _records(copies["sparse"]), strict=True):
        want = np.zeros(6, np.int32)
        want[list(record.protos[1].int32_data)] = 1
        assert label.dtype == np.int32 and np.array_equal(label, want)
        assert image.tobytes() == record.protos[0].string_data[0]
        assert np.array_equal(floats, np.asarray(record.protos[3].float_data, np.float32))
        assert ints.dtype == np.int64 and np.array_equal(ints, record.protos[4].int64_data)
        assert np.array_equal(box, record.protos[5].int32_data)
    ours, _ = read_reader("caffe2", 9, 1, path=caffe2_dbs["weighted"], label_type=3, num_labels=6)
    for (_, label), record in zip(ours, _records(copies["weighted"]), strict=True):
        want = np.zeros(6, np.float32)
        want[list(record.protos[1].int32_data)] = np.asarray(record.protos[2].float_data, np.float32)
        assert label.dtype == np.float32 and np.array_equal(label, want)


@pytest.mark.dali
@needs_dali
def test_shuffled_epochs_hold_dalis_samples(caffe_dbs, caffe2_dbs):
    for op, path, size in (("caffe", caffe_dbs["encoded"], 13), ("caffe2", caffe2_dbs["single_int"], 9)):
        ours, theirs, _, _ = both(op, size, 3, path=path, random_shuffle=True)
        assert_same_epochs(ours, theirs, size)
        assert [s[0].tobytes() for s in ours[:size]] != [s[0].tobytes() for s in ours[size:2 * size]]


def test_several_databases_are_read_one_after_the_other(caffe_dbs):
    both_dbs, _ = read_reader("caffe", 19, 1, path=[caffe_dbs["encoded"], caffe_dbs["raw"]], image_available=False)
    first, _ = read_reader("caffe", 13, 1, path=caffe_dbs["encoded"], image_available=False)
    second, _ = read_reader("caffe", 6, 1, path=caffe_dbs["raw"], image_available=False)
    assert_same(both_dbs, first + second)


def test_checkpoints_resume_exactly(caffe_dbs, caffe2_dbs):
    assert_resumes("caffe", 3, path=caffe_dbs["encoded"], random_shuffle=True, num_shards=2, shard_id=1)
    assert_resumes("caffe2", 2, path=caffe2_dbs["sparse"], label_type=1, num_labels=6, random_shuffle=True,
                   pad_last_batch=True, num_shards=2)


def test_bad_databases_and_records_name_the_reader_the_database_and_the_record(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "data.mdb").write_bytes(b"\x00not an lmdb" * 500)
    for path in (tmp_path / "junk", tmp_path / "nowhere"):
        with pytest.raises(SchemaError) as info:
            read_reader("caffe", 1, 1, path=str(path))
        assert "readers.caffe" in str(info.value) and "cannot be read as LMDB" in str(info.value)
        assert path.name in str(info.value)
    datum = messages()["Datum"]
    db = write_db(tmp_path / "bad", {b"a": datum(data=b"x", label=1).SerializeToString(), b"b": b"\xff\xff\xff",
                                     b"c": datum(data=b"y").SerializeToString(),
                                     b"d": datum(data=b"zz", encoded=False, height=2, width=2, channels=3, label=0)
                                     .SerializeToString()})
    for position, key, why in [(1, "b", "not a Caffe Datum record"), (2, "c", "no label"),
                               (3, "d", "not height x width x channels")]:
        with pytest.raises(HeadraceError, match=rf"readers.caffe .*bad.*record {position} \(key b'{key}'\): .*{why}"):
            read_reader("caffe", 1, 1, path=db, num_shards=4, shard_id=position)
    protos = messages()["TensorProtos"]
    db2 = write_db(tmp_path / "bad2", {b"k": protos(protos=[tensor("STRING", [b"img"]), tensor("INT32", [1, 2])])
                                       .SerializeToString()})
    with pytest.raises(HeadraceError, match=r"readers.caffe2 .*bad2.*record 0 .*wants one value, .* has 2"):
        read_reader("caffe2", 1, 1, path=db2)
    with pytest.raises(HeadraceError, match=r"readers.caffe2 .*record 0 .*has 2 tensors, no tensor 2"):
        read_reader("caffe2", 1, 1, path=db2, label_type=2, additional_inputs=1)
