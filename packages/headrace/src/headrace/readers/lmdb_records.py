"""`readers.caffe` and `readers.caffe2`: records of LMDB databases (the `lmdb` package), parsed with protobuf --
Caffe's Datum and Caffe2's TensorProtos, whose small .proto descriptors are declared here (no Caffe needed).

Records are taken in the databases' key order (LMDB sorts its keys), the databases of `path` one after the other.
A database that cannot be opened or listed is an error naming the reader and the database; a record that does not
parse, or lacks what the arguments ask of it, is an error naming the reader, the database, the key and the record's
number. Epochs, shards, padding, shuffling and checkpoints are readers.file's (IndexedReader over the records).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from headrace.errors import SampleError, SchemaError
from headrace.readers.numpy_files import IndexedReader
from headrace.schema import short_repr
from headrace_kernels.bounded_io import reason
from headrace_kernels.registry import reader

MAX_MAP_BYTES = 1 << 40
"""The map size a database is opened with (read-only: address space, not memory)."""

# Caffe2's TensorProto.DataType values this reader uses
FLOAT, INT32, BYTE, STRING, INT64 = 1, 2, 3, 4, 10
_CAFFE2_TYPES = {0: "UNDEFINED", 1: "FLOAT", 2: "INT32", 3: "BYTE", 4: "STRING", 5: "BOOL", 6: "UINT8", 7: "INT8",
                 8: "UINT16", 9: "INT16", 10: "INT64", 12: "FLOAT16", 13: "DOUBLE"}


@functools.cache
def messages() -> dict[str, type]:
    """The protobuf classes Datum (Caffe), TensorProto and TensorProtos (Caffe2), built from descriptors declared
    here: the fields of caffe.proto and caffe2.proto that the readers read, with their numbers and types."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    package = "headrace_records"
    file = descriptor_pb2.FileDescriptorProto(name="headrace_records.proto", package=package, syntax="proto2")

    def message(name: str, fields: list[tuple]) -> Any:
        declared = file.message_type.add(name=name)
        for field_name, number, kind, label, extra in fields:
            entry = declared.field.add(name=field_name, number=number, type=kind, label=label)
            if extra.pop("packed", False):
                entry.options.packed = True
            for key, value in extra.items():
                setattr(entry, key, value)
        return declared

    message("Datum", [
        ("channels", 1, field.TYPE_INT32, optional, {}), ("height", 2, field.TYPE_INT32, optional, {}),
        ("width", 3, field.TYPE_INT32, optional, {}), ("data", 4, field.TYPE_BYTES, optional, {}),
        ("label", 5, field.TYPE_INT32, optional, {}), ("float_data", 6, field.TYPE_FLOAT, repeated, {}),
        ("encoded", 7, field.TYPE_BOOL, optional, {"default_value": "false"}),
    ])
    tensor = message("TensorProto", [
        ("dims", 1, field.TYPE_INT64, repeated, {}),
        ("data_type", 2, field.TYPE_ENUM, optional, {"type_name": f".{package}.TensorProto.DataType",
                                                     "default_value": "FLOAT"}),
        ("float_data", 3, field.TYPE_FLOAT, repeated, {"packed": True}),
        ("int32_data", 4, field.TYPE_INT32, repeated, {"packed": True}),
        ("byte_data", 5, field.TYPE_BYTES, optional, {}), ("string_data", 6, field.TYPE_BYTES, repeated, {}),
        ("name", 7, field.TYPE_STRING, optional, {}),
        ("double_data", 9, field.TYPE_DOUBLE, repeated, {"packed": True}),
        ("int64_data", 10, field.TYPE_INT64, repeated, {"packed": True}),
    ])
    data_type = tensor.enum_type.add(name="DataType")
    for number, name in _CAFFE2_TYPES.items():
        data_type.value.add(name=name, number=number)
    message("TensorProtos", [("protos", 1, field.TYPE_MESSAGE, repeated, {"type_name": f".{package}.TensorProto"})])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
            for name in ("Datum", "TensorProto", "TensorProtos")}


_environments: dict[str, tuple[Any, int]] = {}  # realpath -> (environment, readers holding it)
_environments_lock = threading.Lock()
_holder = [0]  # the ident of the thread inside the lock (0: none)
_deferred: list[str] = []  # releases asked for by that thread while it held the lock


@contextlib.contextmanager
def _registry():
    """The lock over `_environments`. A pipeline collected by the garbage collector while this thread holds it (lmdb
    allocates inside `environment`) closes its readers there: their releases wait until the lock is let go."""
    with _environments_lock:
        _holder[0] = threading.get_ident()
        try:
            yield
        finally:
            while _deferred:
                _release(os.path.realpath(_deferred.pop()))
            _holder[0] = 0


def environment(path: str) -> Any:
    """The read-only LMDB environment of the database at `path`, one per process (lmdb refuses to open one twice in a
    process, and every pipeline reading it shares it), held until `release_environment`; lmdb.Error or OSError when
    it cannot be opened."""
    import lmdb

    key = os.path.realpath(path)
    with _registry():
        env, holders = _environments.get(key, (None, 0))
        if env is None:
            env = lmdb.open(path, readonly=True, lock=False, readahead=False, subdir=os.path.isdir(path),
                            map_size=MAX_MAP_BYTES, max_readers=1024)
        _environments[key] = (env, holders + 1)
        return env


def release_environment(path: str) -> None:
    """One holder of `path`'s environment lets it go; the last one closes it, unmapping the database (the pages it
    read leave the process's RSS)."""
    if _holder[0] == threading.get_ident():
        _deferred.append(path)
        return
    with _registry():
        _release(os.path.realpath(path))


def _release(key: str) -> None:
    env, holders = _environments.get(key, (None, 0))
    if holders > 1:
        _environments[key] = (env, holders - 1)
    elif env is not None:
        del _environments[key]
        env.close()


class RecordError(ValueError):
    """A record that does not hold what the reader's arguments ask of it."""


class LmdbReader(IndexedReader):
    """The records of the LMDB databases of `path`, in key order; a subclass parses one with `parse(bytes)`."""

    permutes_data_set = False  # DALI's LMDB loader keeps the key order and shuffles through the buffer alone

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        try:
            import lmdb
        except ImportError as exc:
            raise SchemaError(f"{self.op} (node '{node}') reads LMDB through the lmdb package, which is not installed "
                              f"({exc}): pip install lmdb") from None
        self.node = node
        self.databases, self.records = [], []  # records: (database number, key)
        for number, path in enumerate(args["path"]):
            where = f"{self.op} (node '{node}'): database {short_repr(path)}"
            try:
                env = environment(path)
                with env.begin() as txn:
                    self.records += [(number, bytes(key)) for key in txn.cursor().iternext(keys=True, values=False)]
            except (lmdb.Error, OSError, ValueError) as exc:
                raise SchemaError(f"{where} cannot be read as LMDB ({reason(exc)})") from None
            self.databases.append((path, env))
        names = [f"{self.databases[db][0]} [key {key!r}]" for db, key in self.records]  # a key may hold any byte
        super().__init__(node, {**args, "shuffle_after_epoch": False}, names, batch_size, seed, pool)

    def close(self) -> None:
        """Let the databases go when the pipeline closes (CpuStage.close): the last reader of one unmaps it."""
        databases, self.databases = self.databases, []
        for path, _ in databases:
            release_environment(path)

    def _record(self, index: int) -> bytes:
        db, key = self.records[index]
        path, env = self.databases[db]
        try:
            with env.begin(buffers=False) as txn:
                value = txn.get(key)
        except Exception as exc:  # noqa: BLE001 - lmdb.Error and its kin from a damaged database
            raise self._error(index, f"cannot be read ({type(exc).__name__}: {exc})") from None
        if value is None:
            raise self._error(index, "is gone from the database")
        return value

    def source_info_of(self, index: int) -> str:
        """DALI's source_info: '<database> at key <key>'."""
        db, key = self.records[index]
        return f"{self.databases[db][0]} at key {key.decode('utf-8', errors='replace')}"

    def _error(self, index: int, why: str) -> SampleError:
        db, key = self.records[index]
        path = self.databases[db][0]
        return SampleError(f"{self.op} (node '{self.node}'): database {short_repr(path)}, record {index} (key "
                           f"{short_repr(key)}): {why}", node=self.node, op=self.op, sample=index,
                           source=self.paths[index])

    def parse(self, data: bytes) -> tuple[np.ndarray, ...]:
        raise NotImplementedError

    def read_item(self, index: int) -> tuple[np.ndarray, ...]:
        from google.protobuf.message import DecodeError

        data = self._record(index)
        try:
            return self.parse(data)
        except DecodeError as exc:
            raise self._error(index, f"not a {self.record_kind} record ({len(data):,} bytes: {exc})") from None
        except RecordError as exc:
            raise self._error(index, str(exc)) from None


@reader("readers.caffe")
class CaffeReader(LmdbReader):
    """Caffe Datums: the image (encoded bytes, or raw (H, W, C) uint8 when encoded=false) and the label."""

    op = "readers.caffe"
    record_kind = "Caffe Datum"

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        super().__init__(node, args, batch_size, seed, pool)
        self.image, self.label = bool(args["image_available"]), bool(args["label_available"])

    def parse(self, data: bytes) -> tuple[np.ndarray, ...]:
        datum = messages()["Datum"].FromString(data)
        outputs = []
        if self.image:
            if not datum.HasField("data"):
                raise RecordError("the Datum has no image data (image_available=True)")
            image = np.frombuffer(datum.data, np.uint8)
            if datum.HasField("encoded") and not datum.encoded:
                shape = (datum.height, datum.width, datum.channels)
                if image.size != np.prod(shape):
                    raise RecordError(f"a raw image of {image.size:,} bytes is not height x width x channels "
                                      f"{shape}")
                image = image.reshape(shape)
            outputs.append(image.copy())
        if self.label:
            if not datum.HasField("label"):
                raise RecordError("the Datum has no label (label_available=True)")
            outputs.append(np.asarray([datum.label], np.int32))
        return tuple(outputs)


def _values(proto: Any, kind: type) -> np.ndarray:
    """A TensorProto's int32_data (int) or float_data (float)."""
    return np.asarray(proto.int32_data, np.int32) if kind is int else np.asarray(proto.float_data, np.float32)


@reader("readers.caffe2")
class Caffe2Reader(LmdbReader):
    """Caffe2 TensorProtos: the image, the label as label_type says, additional tensors and a box."""

    op = "readers.caffe2"
    record_kind = "Caffe2 TensorProtos"

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        super().__init__(node, args, batch_size, seed, pool)
        self.image, self.label_type = bool(args["image_available"]), int(args["label_type"])
        self.num_labels, self.additional, self.bbox = int(args["num_labels"]), int(args["additional_inputs"]), \
            bool(args["bbox"])

    def _proto(self, protos: Any, number: int, what: str) -> Any:
        if number >= len(protos.protos):
            raise RecordError(f"the record has {len(protos.protos)} tensors, no tensor {number} ({what})")
        return protos.protos[number]

    def _image(self, proto: Any) -> np.ndarray:
        if proto.data_type == STRING:
            if not proto.string_data:
                raise RecordError("the image tensor (STRING) holds no string")
            return np.frombuffer(proto.string_data[0], np.uint8).copy()
        if proto.data_type == BYTE:
            dims = list(proto.dims)
            if len(dims) not in (2, 3):
                raise RecordError(f"a raw image (BYTE) needs 2 or 3 dims, got {dims}")
            shape = (dims[0], dims[1], dims[2] if len(dims) == 3 else 1)
            image = np.frombuffer(proto.byte_data, np.uint8)
            if image.size != np.prod(shape):
                raise RecordError(f"a raw image of {image.size:,} bytes is not {shape}")
            return image.reshape(shape).copy()
        raise RecordError(f"the image tensor is {_CAFFE2_TYPES.get(proto.data_type, proto.data_type)}, not STRING "
                          "(encoded) or BYTE (raw)")

    def _label(self, protos: Any, number: int) -> np.ndarray:
        proto = self._proto(protos, number, "the label")
        if proto.data_type not in (FLOAT, INT32):
            raise RecordError(f"the label tensor is {_CAFFE2_TYPES.get(proto.data_type, proto.data_type)}, not "
                              "FLOAT or INT32")
        kind = int if proto.data_type == INT32 else float
        values = _values(proto, kind)
        if self.label_type == 0:
            if values.size != 1:
                raise RecordError(f"label_type 0 (single label) wants one value, the label tensor has {values.size}")
            return values
        if self.label_type == 2:
            return values
        indices = values.astype(np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.num_labels):
            raise RecordError(f"label indices {values.tolist()} are out of [0, num_labels={self.num_labels})")
        if self.label_type == 1:
            out = np.zeros(self.num_labels, values.dtype)
            out[indices] = 1
            return out
        weights = _values(self._proto(protos, number + 1, "the label weights"), float)
        if weights.size < indices.size:
            raise RecordError(f"{indices.size} label indices but {weights.size} weights")
        out = np.zeros(self.num_labels, np.float32)
        out[indices] = weights[:indices.size]
        return out

    def parse(self, data: bytes) -> tuple[np.ndarray, ...]:
        protos = messages()["TensorProtos"].FromString(data)
        outputs, number = [], 0
        if self.image:
            outputs.append(self._image(self._proto(protos, 0, "the image")))
            number = 1
        if self.label_type != 4:
            outputs.append(self._label(protos, number))
            number += 1
        start = number + (1 if self.label_type in (1, 3) else 0)  # DALI skips one tensor after a sparse label
        for k in range(start, start + self.additional):
            proto = self._proto(protos, k, "an additional input")
            if proto.data_type == FLOAT:
                outputs.append(np.asarray(proto.float_data, np.float32))
            elif proto.data_type == INT32:
                outputs.append(np.asarray(proto.int32_data, np.int32))
            elif proto.data_type == INT64:
                outputs.append(np.asarray(proto.int64_data, np.int64))
            else:
                raise RecordError(f"additional tensor {k} is {_CAFFE2_TYPES.get(proto.data_type, proto.data_type)}, "
                                  "not FLOAT, INT32 or INT64")
        if self.bbox:
            end = start + self.additional
            if len(protos.protos) != end + 1:
                raise RecordError(f"bbox=True but the record has {len(protos.protos)} tensors, not {end + 1} (the "
                                  "box last)")
            box = protos.protos[end]
            if box.data_type != INT32 or len(box.int32_data) != 4:
                raise RecordError("the box tensor must be INT32 with 4 values")
            outputs.append(np.asarray(box.int32_data, np.int32))
        return tuple(outputs)
