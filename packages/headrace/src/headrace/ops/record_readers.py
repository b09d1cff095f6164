"""Schemas of the readers of record and archive formats: readers.tfrecord (TFRecord + DALI's index files),
readers.webdataset (tar shards) and readers.mxnet (MXNet RecordIO), with DALI's names, arguments and outputs."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from headrace import tfrecord
from headrace.enums import DALIDataType
from headrace.output_specs import numpy_dtype
from headrace.schema import (
    DALI_HINT,
    MAPPING_READER_ARGS,
    READER_BUFFER_ARGS,
    RECORDS_IN_ORDER,
    REQUIRED,
    SHARD_ARGS,
    Arg,
    OpSchema,
    OutputSpec,
    SpecArgs,
    registrar,
    short_repr,
    shuffle_args,
)

register = registrar(__name__)

WDS_TYPES = (DALIDataType.UINT8, DALIDataType.UINT16, DALIDataType.UINT32, DALIDataType.UINT64, DALIDataType.INT8,
             DALIDataType.INT16, DALIDataType.INT32, DALIDataType.INT64, DALIDataType.FLOAT16, DALIDataType.FLOAT,
             DALIDataType.FLOAT64)
"""The element types readers.webdataset may give its outputs (DALI's)."""
_TF_DTYPES = {"int64": np.int64, "float32": np.float32, "string": np.uint8}


@dataclasses.dataclass(frozen=True)
class FeaturesArg(Arg):
    """readers.tfrecord's `features`: a dict {name: tfrecord.FixedLenFeature / VarLenFeature}, held as a list of
    [name, feature dict] pairs so that its order (the order of the outputs) survives any JSON writer."""

    def coerce(self, value: Any) -> list[list]:
        pairs = list(value.items()) if isinstance(value, dict) else value
        if isinstance(pairs, str | bytes) or not isinstance(pairs, list | tuple):
            raise TypeError(f"expected a dict of tfrecord features, got {type(value).__name__}")
        out, seen = [], set()
        for pair in pairs:
            if not isinstance(pair, list | tuple) or len(pair) != 2 or not isinstance(pair[0], str):
                raise TypeError(f"expected (feature name, feature) pairs, got {short_repr(pair)}")
            if pair[0] in seen:
                raise ValueError(f"feature {short_repr(pair[0])} is given twice")
            seen.add(pair[0])
            try:
                feature = tfrecord.canonical_feature(pair[1])
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"feature {short_repr(pair[0])}: {exc}") from None
            if feature["type"] == "string" and (feature["kind"] == "var" or int(np.prod(feature["shape"])) > 1):
                raise ValueError(f"feature {short_repr(pair[0])}: a string feature is one value (FixedLenFeature "
                                 "of shape [] or [1]); tensors of strings are not supported, as in DALI")
            out.append([pair[0], dict(feature)])
        if not out:
            raise ValueError("no features given")
        return out

    @property
    def type_name(self) -> str:
        return "dict of str to tfrecord.FixedLenFeature / VarLenFeature"


@dataclasses.dataclass(frozen=True)
class NamedOutputsSchema(OpSchema):
    """The schema of an op whose `fn.*` call returns its outputs as a dict by feature name, as DALI's
    fn.readers.tfrecord does (the outputs themselves are numbered, in the order of `features`)."""

    def present(self, kwargs: dict, outputs: Any) -> dict:
        """{feature name: output} of a call with arguments `kwargs` that returned `outputs` (one or a tuple)."""
        names = [name for name, _ in FeaturesArg("features", "any").coerce(kwargs["features"])]
        return dict(zip(names, outputs if isinstance(outputs, tuple) else (outputs,), strict=True))


def feature_dims(feature: dict) -> tuple[int, ...]:
    """The dims of a feature's output: a fixed feature's shape (() for a scalar, as DALI 2.x), a string's bytes, or
    (-1, *partial_shape) for a variable one."""
    if feature["type"] == "string":
        return (-1,)
    if feature["kind"] == "fixed":
        return tuple(feature["shape"])
    return (-1, *feature["partial_shape"])


def _features(a: SpecArgs) -> list[OutputSpec]:
    """One output per feature, in the order of `features`: int64, float32, or a string's bytes (uint8)."""
    return [OutputSpec(_TF_DTYPES[f["type"]], None, feature_dims(f), name) for name, f in a.args["features"]]


def _wds(a: SpecArgs) -> list[OutputSpec]:
    """One output per extension set of `ext`: the bytes of the sample's component, as `dtypes` says (uint8)."""
    exts = a.args["ext"]
    dtypes = a.args["dtypes"] or [DALIDataType.UINT8] * len(exts)
    if len(dtypes) != len(exts):  # refused when the reader is made
        return [OutputSpec(None, None, (-1,), ext) for ext in exts]
    return [OutputSpec(numpy_dtype(d), None, (-1,), ext) for ext, d in zip(exts, dtypes, strict=True)]


def _mxnet(a: SpecArgs) -> list[OutputSpec]:
    """The record's data (uint8 bytes, an encoded image) and its label (float32: one, or the header's `flag` many)."""
    return [OutputSpec(np.uint8, None, (-1,), "encoded data"), OutputSpec(np.float32, None, (-1,), "label")]


def _shuffle_args(unit: str) -> tuple[Arg, ...]:
    return (
        *shuffle_args(RECORDS_IN_ORDER + "; initial_fill >= the shard's size gives a full permutation"),
        Arg("shuffle_after_epoch", "bool", False, f"Visit the {unit} in a new order every epoch, each one's records "
            "still in their stored order; every shard draws the same order (seed: shuffle_after_epoch_seed, else a "
            "fixed one), so an epoch's shards still partition the data set. Excludes stick_to_shard=True."),
        Arg("shuffle_after_epoch_seed", "int", None, f"Seed of shuffle_after_epoch's orders of the {unit}."),
        Arg("seed", "int", -1, "Seed of random_shuffle; -1 derives it from the pipeline seed."),
    )


_COMMON = (
    *SHARD_ARGS,
    *MAPPING_READER_ARGS,
    *READER_BUFFER_ARGS,
    Arg("use_o_direct", "bool", False, DALI_HINT),
)


register(NamedOutputsSchema(
    name="readers.tfrecord",
    doc="Reads tf.train.Example records from TFRecord files, with DALI's index files (`headrace tfrecord2idx`); "
        "returns a dict {feature name: output}. Each record's length and data CRCs (masked crc32c) are checked. A "
        "fixed feature of shape [] is a scalar, one of fewer values than its shape is filled up with its "
        "default_value (DALI leaves the rest unset), one of more is an error, as in DALI. A feature a record lacks "
        "is its default_value in its shape (fixed; a string: the default's bytes) or empty (variable): DALI 2.4 "
        "gives a 0-d zero there, which its own batches then refuse beside records that have the feature. Sharding "
        "and epochs as readers.file.",
    args=(
        Arg("path", "str", REQUIRED, "The TFRecord files.", list_of=True),
        Arg("index_path", "str", REQUIRED, "One index file per TFRecord file ('offset size' lines).", list_of=True),
        FeaturesArg("features", "any", REQUIRED, "The features to extract: {name: tfrecord.FixedLenFeature(shape, "
                    "dtype, default_value) or tfrecord.VarLenFeature([partial_shape,] dtype, default_value)}."),
        *_shuffle_args("files"),
        *_COMMON,
    ),
    num_outputs=lambda args: len(args["features"]),
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_features,
))

register(OpSchema(
    name="readers.webdataset",
    doc="Reads samples from webdataset tar archives: a sample is the run of consecutive files sharing a name up to "
        "the first dot of their base name, a component is one of them, keyed by the rest (its extension); files whose "
        "base name starts with a dot and entries that are not regular files are left out. One output per `ext` set. "
        "The index files (`headrace wds2idx`, DALI's format v1.1/v1.2) are optional: without them the archives are "
        "scanned. Sharding and epochs as readers.file.",
    args=(
        Arg("paths", "str", REQUIRED, "The webdataset tar archives.", list_of=True),
        Arg("index_paths", "str", [], "One index file per archive, or none (the archives are then scanned).",
            list_of=True),
        Arg("ext", "str", REQUIRED, "One set of extensions per output, separated by ';' (e.g. 'jpg;png').",
            list_of=True),
        Arg("missing_component_behavior", "str", "", "A sample without a component for some output: '' or 'empty' "
            "gives an empty tensor, 'skip' leaves the sample out, 'error' is an error naming the archive and sample."),
        Arg("dtypes", "dtype", None, "The element type of each output (default UINT8); a component's size must be "
            "a multiple of its type's size.", list_of=True, choices=WDS_TYPES),
        Arg("case_sensitive_extensions", "bool", True, "Match `ext` case-sensitively."),
        *_shuffle_args("archives"),
        *_COMMON,
    ),
    num_outputs=lambda args: len(args["ext"]),
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_wds,
))

register(OpSchema(
    name="readers.mxnet",
    doc="Reads MXNet RecordIO files (.rec) through their index (.idx, 'key<TAB>offset' lines, as im2rec writes); "
        "outputs (data, label): the record's bytes after its image header and labels, and the label(s) as float32. "
        "Records split into several parts are joined. Sharding and epochs as readers.file.",
    args=(
        Arg("path", "str", REQUIRED, "The RecordIO files, read as one stream.", list_of=True),
        Arg("index_path", "str", REQUIRED, "The one index file (offsets into the stream of `path`).", list_of=True,
            list_len=(1, 1)),
        *_shuffle_args("files"),
        *_COMMON,
    ),
    num_outputs=2,
    stateful=True,
    batch_op=True,
    state="reader", output_spec=_mxnet,
))
