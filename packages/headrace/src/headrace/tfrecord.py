"""TFRecord features, as `nvidia.dali.tfrecord`: `FixedLenFeature`, `VarLenFeature` and the types `int64`, `string`,
`float32` (DALI's numbers), for `fn.readers.tfrecord(features={...})`; and `tf.train.Example`, declared here with
protobuf (no TensorFlow needed) for the reader to parse records and for tools and tests to write them.

A feature is held as a plain dict (JSON in a pipeline file): {"kind": "fixed" | "var", "type": "int64" | "string" |
"float32", "shape": [...] (fixed) / "partial_shape": [...] (var, may be empty), "default": value or None}.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from headrace.schema import MAX_SAMPLE_ELEMENTS, short_repr

int64 = 0
"""The element type of an Int64List feature (DALI's number for it; the output is int64)."""
string = 1
"""The element type of a BytesList feature (the output is the bytes, uint8)."""
float32 = 2
"""The element type of a FloatList feature (the output is float32)."""

TYPE_NAMES = {int64: "int64", string: "string", float32: "float32"}


class Feature(dict):
    """One feature to extract: a dict in the canonical form of the module docstring (so that it is stored as is)."""


def _type_name(dtype: Any) -> str:
    if isinstance(dtype, str) and dtype in TYPE_NAMES.values():
        return dtype
    if isinstance(dtype, bool) or not isinstance(dtype, int) or dtype not in TYPE_NAMES:
        raise TypeError(f"expected tfrecord.int64, tfrecord.string or tfrecord.float32, got {short_repr(dtype)}")
    return TYPE_NAMES[dtype]


def _shape(shape: Any, what: str) -> list[int]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = [shape]
    if isinstance(shape, str | bytes) or not hasattr(shape, "__iter__"):
        raise TypeError(f"{what} must be a list of ints, got {short_repr(shape)}")
    values = list(shape)
    if len(values) > 64 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError(f"{what} must be a list of at most 64 non-negative ints, got {short_repr(values)}")
    if math.prod(values) > MAX_SAMPLE_ELEMENTS:
        raise ValueError(f"{what} {short_repr(values)} describes more than {MAX_SAMPLE_ELEMENTS} elements")
    return values


def _default(type_name: str, value: Any) -> Any:
    """A default value in JSON form: an int, a float (finite, or its repr for NaN/inf), a str; None for none."""
    if value is None:
        return None
    if type_name == "string":
        if isinstance(value, bytes):
            value = value.decode("utf-8", "surrogateescape")
        if not isinstance(value, str):
            raise TypeError(f"a string feature's default must be a str, got {short_repr(value)}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a {type_name} feature's default must be a number, got {short_repr(value)}")
    if type_name == "int64":
        if not float(value).is_integer() or not -(2**63) <= int(value) < 2**63:
            raise ValueError(f"an int64 feature's default must be a 64-bit integer, got {short_repr(value)}")
        return int(value)
    return float(value) if math.isfinite(value) else repr(float(value))


def FixedLenFeature(shape: Any, dtype: int, default_value: Any = None) -> Feature:  # noqa: N802 - DALI's name
    """A feature of a fixed shape (DALI's and TensorFlow's FixedLenFeature); `default_value` fills a record that
    lacks it."""
    name = _type_name(dtype)
    return Feature(kind="fixed", type=name, shape=_shape(shape, "shape"), default=_default(name, default_value))


def VarLenFeature(*args: Any) -> Feature:  # noqa: N802 - DALI's name
    """A feature of any length: `VarLenFeature(dtype, default_value)` (1-D) or `VarLenFeature(partial_shape, dtype,
    default_value)` (shaped [rows, *partial_shape], as DALI: the number of rows follows from the data)."""
    if len(args) == 2:
        partial, (dtype, default_value) = [], args
    elif len(args) == 3:
        partial, dtype, default_value = args
        partial = _shape(partial, "partial_shape")
    else:
        raise TypeError("VarLenFeature(dtype, default_value) or VarLenFeature(partial_shape, dtype, default_value)")
    name = _type_name(dtype)
    return Feature(kind="var", type=name, partial_shape=list(partial), default=_default(name, default_value))


def canonical_feature(value: Any) -> Feature:
    """A feature given by the user or read from a pipeline file, checked, in canonical form; ValueError/TypeError
    says what is wrong."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a tfrecord.FixedLenFeature or tfrecord.VarLenFeature, got {type(value).__name__}")
    kind = value.get("kind")
    name = _type_name(value.get("type"))
    if kind == "fixed":
        return FixedLenFeature(value.get("shape", []), name, _stored_default(value.get("default")))
    if kind == "var":
        return VarLenFeature(value.get("partial_shape", []), name, _stored_default(value.get("default")))
    raise ValueError(f"a feature's kind is 'fixed' or 'var', got {short_repr(kind)}")


def _stored_default(value: Any) -> Any:
    return float(value) if value in ("nan", "inf", "-inf") else value


def default_value(feature: Feature) -> Any:
    """The feature's default as a Python value (NaN and infinities restored), None for none."""
    return _stored_default(feature["default"])


@functools.cache
def example_class() -> type:
    """`tensorflow.Example` (with Features, Feature, BytesList, FloatList, Int64List) as a protobuf message class,
    declared in a pool of its own so that it never clashes with TensorFlow's."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="headrace/tf_example.proto", package="tensorflow",
                                               syntax="proto3")

    def message(name: str, *fields: tuple) -> descriptor_pb2.DescriptorProto:
        msg = proto.message_type.add(name=name)
        for field_name, number, label, ftype, type_name, oneof in fields:
            field = msg.field.add(name=field_name, number=number, label=label, type=ftype)
            if type_name:
                field.type_name = type_name
            if oneof is not None:
                field.oneof_index = oneof
        return msg

    repeated, optional = f.LABEL_REPEATED, f.LABEL_OPTIONAL
    message("BytesList", ("value", 1, repeated, f.TYPE_BYTES, "", None))
    message("FloatList", ("value", 1, repeated, f.TYPE_FLOAT, "", None))
    message("Int64List", ("value", 1, repeated, f.TYPE_INT64, "", None))
    feature = message("Feature", ("bytes_list", 1, optional, f.TYPE_MESSAGE, ".tensorflow.BytesList", 0),
                      ("float_list", 2, optional, f.TYPE_MESSAGE, ".tensorflow.FloatList", 0),
                      ("int64_list", 3, optional, f.TYPE_MESSAGE, ".tensorflow.Int64List", 0))
    feature.oneof_decl.add(name="kind")
    features = message("Features", ("feature", 1, repeated, f.TYPE_MESSAGE, ".tensorflow.Features.FeatureEntry",
                                    None))
    entry = features.nested_type.add(name="FeatureEntry")
    entry.field.add(name="key", number=1, label=optional, type=f.TYPE_STRING)
    entry.field.add(name="value", number=2, label=optional, type=f.TYPE_MESSAGE, type_name=".tensorflow.Feature")
    entry.options.map_entry = True
    message("Example", ("features", 1, optional, f.TYPE_MESSAGE, ".tensorflow.Features", None))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's checksum: crc32c rotated right by 15 bits plus a constant (so that a CRC of CRCs is not trivial)."""
    import crc32c

    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def encode_record(data: bytes) -> bytes:
    """One TFRecord: length (uint64 LE), its masked CRC, the data, the data's masked CRC."""
    import struct

    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


__all__ = ["Feature", "FixedLenFeature", "VarLenFeature", "canonical_feature", "default_value", "encode_record",
           "example_class", "float32", "int64", "masked_crc32c", "string"]
