"""headrace_kernels.example_wire (readers.tfrecord finding features in an Example's bytes, without protobuf's copies)
against protobuf's own parse of the same bytes: every output equal (exact), for Examples written by protobuf and
for encodings protobuf reads but does not write (unpacked numeric lists, unknown fields, a key given twice, two
lists in one Feature, a Features message in two parts), and a string output is a view of the record, not a copy."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from headrace import tfrecord
from headrace.readers.tfrecord import TFRecordReader
from headrace_kernels import example_wire

FEATURES = {
    "image": tfrecord.FixedLenFeature((), tfrecord.string, ""),
    "label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1),
    "box": tfrecord.VarLenFeature([4], tfrecord.float32, 0.0),
    "ids": tfrecord.VarLenFeature(tfrecord.int64, 0),
    "score": tfrecord.FixedLenFeature([2], tfrecord.float32, 0.5),
    "name": tfrecord.FixedLenFeature((), tfrecord.string, "none"),
    "": tfrecord.VarLenFeature(tfrecord.int64, 0),  # an empty key
}


def _reader(tmp_path) -> TFRecordReader:
    """A reader over a one-record file: only its parsers and parse methods are used."""
    from headrace.schema import get_schema

    path, index = tmp_path / "one.tfrecord", tmp_path / "one.idx"
    path.write_bytes(tfrecord.encode_record(b""))
    index.write_text(f"0 {path.stat().st_size}\n")
    schema = get_schema("readers.tfrecord")
    args = schema.resolve(schema.validate_args("Reader", {"path": [str(path)], "index_path": [str(index)],
                                                          "features": FEATURES}))
    return TFRecordReader("Reader", args, 1, 0, None)


def _example(**features) -> bytes:
    example = tfrecord.example_class()()
    for name, (kind, values) in features.items():
        getattr(example.features.feature[name], kind).value.extend(values)
    return example.SerializeToString()


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(payload)) + payload


def _entry(key: bytes, feature: bytes) -> bytes:
    return _field(1, _field(1, key) + _field(2, feature))


RNG = np.random.default_rng(5)
WRITTEN = [
    _example(image=("bytes_list", [RNG.bytes(3000)]), label=("int64_list", [7]),
             box=("float_list", RNG.standard_normal(8).astype(np.float32).tolist()),
             ids=("int64_list", [-1, 2**62, -(2**63), 0]), score=("float_list", [0.25])),
    _example(image=("bytes_list", [b"", b"second"]), name=("bytes_list", [b"x" * 200])),
    _example(label=("int64_list", [])),
    _example(**{"": ("int64_list", [3, 4])}),
    b"",
]
UNPACKED_INTS = _entry(b"ids", _field(3, b"".join(_tag(1, 0) + _varint(v) for v in (5, -3, 2**40))))
UNPACKED_FLOATS = _entry(b"box", _field(2, b"".join(_tag(1, 5) + struct.pack("<f", v) for v in (1.5, -2.0, 0.0, 8.0))))
UNKNOWN = _tag(9, 0) + _varint(300) + _tag(10, 1) + b"\0" * 8 + _tag(11, 5) + b"\0" * 4 + _field(12, b"junk")
CRAFTED = [
    _field(1, UNPACKED_INTS + UNPACKED_FLOATS),
    UNKNOWN + _field(1, UNKNOWN + _entry(b"label", _field(3, _field(1, _varint(9)))) + _entry(b"other", b"")),
    _field(1, _entry(b"label", _field(3, _field(1, _varint(1))))) + _field(1, _entry(b"ids", b"")),  # two parts
]
FALLBACKS = [  # protobuf's merge rules decide these: (payload, what protobuf makes of label / ids, or an error)
    (_field(1, _entry(b"label", _field(3, _field(1, _varint(1)))) + _entry(b"label", _field(3, _field(1, _varint(2))))),
     ("label", [2])),  # a key given twice: the map keeps the last
    (_field(1, _entry(b"ids", _field(3, _field(1, _varint(1))) + _field(3, _field(1, _varint(2))))),
     ("ids", [1, 2])),  # two lists of one kind: merged
    (_field(1, _entry(b"image", _field(1, _field(1, b"a")) + _field(3, _field(1, _varint(2))))),
     None),  # a bytes list, then an int64 list: the oneof keeps the last, which the declaration refuses
]


def _same(a: tuple, b: tuple) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("payload", WRITTEN + CRAFTED, ids=[f"written{i}" for i in range(len(WRITTEN))] +
                         [f"crafted{i}" for i in range(len(CRAFTED))])
def test_located_outputs_are_protobufs(tmp_path, payload):
    reader = _reader(tmp_path)
    located = reader._located(memoryview(payload))
    assert located is not None
    _same(located, reader._parsed(memoryview(payload)))


@pytest.mark.parametrize("payload, want", FALLBACKS)
def test_merge_rules_go_to_protobuf(tmp_path, payload, want):
    reader = _reader(tmp_path)
    assert reader._located(memoryview(payload)) is None
    if want is None:
        with pytest.raises(ValueError, match="holds a int64_list, it is declared string"):
            reader._parsed(memoryview(payload))
        return
    outputs = dict(zip(FEATURES, reader._parsed(memoryview(payload)), strict=True))
    assert outputs[want[0]].reshape(-1).tolist() == want[1]


def test_a_string_is_a_view_of_the_record(tmp_path):
    reader = _reader(tmp_path)
    record = bytearray(WRITTEN[0])
    image = reader._located(memoryview(record))[0]
    assert len(image) == 3000 and np.shares_memory(image, np.frombuffer(record, np.uint8))


@pytest.mark.parametrize("cut", [1, 5, 40, 2000])
def test_a_truncated_example_falls_back_to_protobufs_error(tmp_path, cut):
    reader = _reader(tmp_path)
    payload = memoryview(WRITTEN[0][:-cut])
    assert reader._located(payload) is None
    with pytest.raises(ValueError, match="not a tf.train.Example"):
        reader._parsed(payload)


def test_a_numeric_list_longer_than_its_room_falls_back():
    buf = np.frombuffer(_field(3, _field(1, b"".join(_varint(v) for v in range(5)))), np.uint8)
    first = np.zeros(2, np.int64)
    status, _, _ = example_wire.values(buf, 0, len(buf), np.empty(2, np.int64), np.empty(0, np.uint8), first)
    assert status == example_wire.FALLBACK
    status, kind, count = example_wire.values(buf, 0, len(buf), np.empty(len(buf), np.int64), np.empty(0, np.uint8),
                                              first)
    assert (status, kind, count) == (example_wire.OK, example_wire.INT64S, 5)
