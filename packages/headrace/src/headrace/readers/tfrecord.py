"""`readers.tfrecord`: tf.train.Example records from TFRecord files, located by DALI's index files.

A TFRecord is its length (uint64, little-endian), the masked crc32c of those 8 bytes, the data (a serialized
tf.train.Example) and the data's masked crc32c; both CRCs are checked. An index file (`headrace tfrecord2idx`, DALI's
tfrecord2idx) has one 'offset size' line per record, the size covering the whole record. Each feature becomes one
output, as DALI's parser makes it (headrace.ops.record_readers says how); a record that is not what its index says,
a CRC mismatch or an Example that does not parse is a SampleError naming the file and the record.
"""

from __future__ import annotations

import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from headrace import tfrecord
from headrace.errors import SchemaError
from headrace.ops.record_readers import feature_dims
from headrace.readers.recordio import Record, RecordReader, file_size, read_index
from headrace.schema import short_repr
from headrace_kernels import example_wire
from headrace_kernels.registry import reader

OP = "readers.tfrecord"
_LISTS = {"int64": "int64_list", "float32": "float_list", "string": "bytes_list"}
_DTYPES = {"int64": np.int64, "float32": np.float32, "string": np.uint8}
_KIND_NAMES = {0: None, example_wire.BYTES: "bytes_list", example_wire.FLOATS: "float_list",
               example_wire.INT64S: "int64_list"}


def index_records(node: str, file: int, path: str, index_path: str) -> list[Record]:
    """The records of one TFRecord file from its index; a SchemaError for a malformed index or one that points past
    the file's end (a stale index)."""
    size = file_size(OP, node, path, "TFRecord file")
    records = []
    for number, line in enumerate(read_index(OP, node, index_path).splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        where = f"{OP} (node '{node}'): index file {short_repr(index_path)}, line {number}"
        if len(fields) != 2 or not all(f.isdigit() for f in fields):
            raise SchemaError(f"{where}: expected 'offset size', got {short_repr(line)}")
        offset, length = int(fields[0]), int(fields[1])
        if offset + length > size:
            raise SchemaError(f"{where}: a record of {length} bytes at offset {offset} runs past the end of "
                              f"{short_repr(path)} ({size} bytes): a stale index?")
        records.append(Record(file, offset, length, f"record {len(records)}"))
    return records


def parse_record(data: bytes) -> memoryview:
    """The Example bytes of one TFRecord (a view, not a copy), its length and CRCs checked; ValueError says what is
    wrong."""
    if len(data) < 16:
        raise ValueError(f"{len(data)} bytes, less than a TFRecord's 16 bytes of framing")
    view = memoryview(data)
    length, length_crc = struct.unpack_from("<QI", view)
    if length_crc != tfrecord.masked_crc32c(view[:8]):
        raise ValueError("the CRC of the record's length does not match (not a TFRecord, or a wrong offset)")
    if length + 16 != len(data):
        raise ValueError(f"the record says it holds {length} bytes of data, its index gives it {len(data) - 16}")
    payload = view[12:12 + length]
    if struct.unpack_from("<I", view, 12 + length)[0] != tfrecord.masked_crc32c(payload):
        raise ValueError("the CRC of the record's data does not match (corrupt data)")
    return payload


class FeatureParser:
    """One declared feature of an Example as DALI's parser gives it, with what the declaration fixes worked out once
    (dtype, list field, shape, default) rather than per record."""

    def __init__(self, name: str, feature: dict):
        self.name, self.feature = name, feature
        self.kind, self.type = feature["kind"], feature["type"]
        self.dtype, self.list_name = _DTYPES[self.type], _LISTS[self.type]
        self.dims = feature_dims(feature)
        self.size = int(np.prod(self.dims)) if self.kind != "var" else 0
        row = self.dims[1:]
        self.row = int(np.prod(row)) if row else 1
        self.default = tfrecord.default_value(feature) or 0

    def __call__(self, features) -> np.ndarray:
        """The output of this feature from an Example's feature map (protobuf's); ValueError if it does not fit the
        declaration."""
        if self.name not in features:
            return _missing(self.feature)
        encoded = features[self.name]
        kind = encoded.WhichOneof("kind")
        return self.from_values(kind, getattr(encoded, kind).value if kind is not None else ())

    def from_values(self, kind: str | None, values) -> np.ndarray:
        """The output of this feature from the list its Feature holds: `kind` 'bytes_list', 'float_list',
        'int64_list' or None (none set), `values` the list's values."""
        if kind is not None and kind != self.list_name:
            raise ValueError(f"feature {short_repr(self.name)} holds a {kind}, it is declared {self.type}")
        if self.type == "string":
            return np.frombuffer(values[0], np.uint8) if len(values) else _missing(self.feature)
        count = len(values)
        if self.kind == "var":
            if self.row == 0 or count % self.row:
                raise ValueError(f"feature {short_repr(self.name)} has {count} values, not a whole number of rows "
                                 f"of partial_shape {list(self.dims[1:])}")
            return np.array(values, self.dtype).reshape(count // self.row, *self.dims[1:])
        if count == self.size:
            return np.array(values, self.dtype).reshape(self.dims)
        if count > self.size:
            raise ValueError(f"feature {short_repr(self.name)} has {count} values, more than its shape "
                             f"{list(self.dims)} holds")
        out = np.full(self.dims, self.default, self.dtype)
        out.reshape(-1)[:count] = np.array(values, self.dtype)
        return out


def _missing(feature: dict) -> np.ndarray:
    """What a record lacking a feature gives: its default in its shape (fixed), empty rows (variable)."""
    default = tfrecord.default_value(feature)
    if feature["type"] == "string":
        return np.frombuffer((default or "").encode("utf-8", "surrogateescape"), np.uint8)
    if feature["kind"] == "var":
        return np.empty((0, *feature_dims(feature)[1:]), _DTYPES[feature["type"]])
    return np.full(feature_dims(feature), default or 0, _DTYPES[feature["type"]])


@reader(OP)
class TFRecordReader(RecordReader):
    """Reads one shard of the records of TFRecord files (the format is in the module docstring)."""

    op = OP

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        paths, indices = list(args["path"]), list(args["index_path"])
        if len(paths) != len(indices):
            raise SchemaError(f"{OP} (node '{node}'): {len(paths)} files in `path` but {len(indices)} in "
                              "`index_path` (one index per file)")
        records = [r for k, (p, i) in enumerate(zip(paths, indices, strict=True)) for r in index_records(node, k, p, i)]
        self.parsers = [FeatureParser(name, feature) for name, feature in args["features"]]
        self.num_outputs = len(self.parsers)
        self.example = tfrecord.example_class()
        names = [parser.name.encode("utf-8", "surrogateescape") for parser in self.parsers]
        lengths = np.array([len(n) for n in names], np.int64)
        ends = np.cumsum(lengths)
        self._keys = np.frombuffer(b"".join(names) or b"\0", np.uint8)
        self._key_bounds = np.stack([ends - lengths, ends], axis=1)
        super().__init__(node, args, batch_size, seed, pool, paths, records)

    def parse(self, index: int, data: bytes) -> tuple:
        payload = parse_record(data)
        found = self._located(payload)
        return found if found is not None else self._parsed(payload)

    def _parsed(self, payload: memoryview) -> tuple:
        """The outputs through protobuf: a copy of every value; its errors for a malformed Example."""
        from google.protobuf.message import DecodeError

        try:
            example = self.example.FromString(payload)
        except DecodeError as exc:
            raise ValueError(f"not a tf.train.Example ({exc})") from None
        features = example.features.feature
        return tuple(parser(features) for parser in self.parsers)

    def _located(self, payload: memoryview) -> tuple | None:
        """The outputs found in the Example's bytes (example_wire): a string comes out as a view of the record,
        not a copy. None where protobuf's rules are needed (example_wire.FALLBACK)."""
        buf = np.frombuffer(payload, np.uint8)
        found = np.empty((len(self.parsers), 2), np.int64)
        if example_wire.locate(buf, self._keys, self._key_bounds, found) != example_wire.OK:
            return None
        first = np.zeros(2, np.int64)
        outputs = []
        for parser, (start, stop) in zip(self.parsers, found.tolist(), strict=True):
            if start < 0:
                outputs.append(_missing(parser.feature))
                continue
            room = stop - start if parser.type != "string" else 0  # what a numeric list can hold at most
            ints = np.empty(room if parser.type == "int64" else 0, np.int64)
            floats = np.empty(room if parser.type == "float32" else 0, np.uint8)
            status, kind, count = example_wire.values(buf, start, stop, ints, floats, first)
            if status != example_wire.OK:
                return None
            if kind == example_wire.BYTES:
                values = [payload[first[0]:first[1]]] if count else []
            elif kind == example_wire.INT64S:
                values = ints[:count]
            else:
                values = floats[:4 * count].view("<f4")
            outputs.append(parser.from_values(_KIND_NAMES[kind], values))
        return tuple(outputs)
