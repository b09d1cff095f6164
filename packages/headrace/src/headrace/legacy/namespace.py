"""The `headrace.ops` namespace of DALI's legacy API: CamelCase classes over the op schemas, found by name."""

from __future__ import annotations

import difflib
import types
from typing import Any

from headrace.graph import DataNode, op_function
from headrace.schema import SCHEMAS, OpSchema

DEPRECATED_NAMES = {
    "file_reader": "readers.file", "image_decoder": "decoders.image", "image_decoder_crop": "decoders.image_crop",
    "image_decoder_random_crop": "decoders.image_random_crop", "image_decoder_slice": "decoders.image_slice",
    "audio_decoder": "decoders.audio", "coin_flip": "random.coin_flip", "uniform": "random.uniform",
    "normal_distribution": "random.normal", "nemo_asr_reader": "readers.nemo_asr", "numpy_reader": "readers.numpy",
    "tfrecord_reader": "readers.tfrecord", "coco_reader": "readers.coco", "caffe_reader": "readers.caffe",
    "caffe2_reader": "readers.caffe2", "mxnet_reader": "readers.mxnet", "sequence_reader": "readers.sequence",
    "video_reader": "readers.video", "video_reader_resize": "readers.video_resize",
    "transform_translation": "transforms.translation",
}
"""DALI's older top-level names of ops that now live in a namespace, as `fn.file_reader` / `ops.FileReader` (the
same op as fn.readers.file / ops.readers.File), which DALI still takes and older examples call."""


def deprecated_target(name: str) -> str | None:
    """The op a DALI deprecated top-level name (snake_case or CamelCase) stands for, if headrace has it."""
    target = _DEPRECATED_BY_KEY.get(_key(name))
    return target if target in SCHEMAS else None


def camel_case(snake: str) -> str:
    """The legacy class name of an op's last name part, as DALI spells most: 'coin_flip' -> 'CoinFlip'."""
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_"))


def _key(name: str) -> str:
    """What a CamelCase and a snake_case name of the same op share (DALI's 'MFCC' is 'mfcc', 'BbFlip' 'bb_flip')."""
    return name.replace("_", "").lower()


_DEPRECATED_BY_KEY = {_key(name): target for name, target in DEPRECATED_NAMES.items()}


class Operator:
    """A legacy op object: made with its arguments (`ops.Resize(device="gpu", resize_x=224)`), then called with
    its inputs and per-call arguments, once per node it adds (DALI's `__call__`)."""

    def __init__(self, **kwargs: Any):
        self._kwargs = kwargs

    schema: OpSchema  # set on each generated class

    @property
    def spec(self) -> OpSchema:
        return self.schema

    @property
    def device(self) -> str:
        return self._kwargs.get("device") or self.schema.devices[0]

    def __call__(self, *inputs: Any, **kwargs: Any) -> DataNode | tuple[DataNode, ...]:
        return op_function(self.schema)(*inputs, **{**self._kwargs, **kwargs})


def _operator_class(schema: OpSchema, class_name: str) -> type[Operator]:
    cls = type(class_name, (Operator,), {"schema": schema, "__doc__": schema.docstring(),
                                         "__module__": "headrace.ops"})
    cls.__qualname__ = class_name
    return cls


class OpsNamespace(types.ModuleType):
    """A level of the legacy namespace (`ops`, `ops.readers`, `ops.random`): CamelCase op classes and sub-levels.
    Other names fall through to `fallback`, the module this namespace stands in for (headrace.ops's families)."""

    def __init__(self, prefix: str = "", fallback: types.ModuleType | None = None):
        super().__init__(f"headrace.ops{'.' + prefix if prefix else ''}", "DALI's legacy op classes.")
        self._prefix, self._fallback = prefix, fallback
        self._classes: dict[str, type[Operator]] = {}

    def _full(self, snake: str) -> str:
        return f"{self._prefix}.{snake}" if self._prefix else snake

    def _members(self) -> tuple[dict[str, str], set[str]]:
        """The op schemas at this level by their lookup key, and the names of the sub-levels."""
        ops: dict[str, str] = {}
        levels: set[str] = set()
        start = len(self._prefix) + 1 if self._prefix else 0
        for name in SCHEMAS:
            if self._prefix and not name.startswith(self._prefix + "."):
                continue
            rest = name[start:]
            if rest.startswith("_"):
                continue
            if "." in rest:
                levels.add(rest.split(".")[0])
            else:
                ops[_key(rest)] = name
        return ops, levels

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # a module's own dunders (__path__, __file__) are the stood-in module's
            if self._fallback is not None and hasattr(self._fallback, attr):
                return getattr(self._fallback, attr)
            raise AttributeError(attr)
        ops, levels = self._members()
        if attr[:1].isupper():
            target = (deprecated_target(attr) if not self._prefix else None) or ops.get(_key(attr))
            if target is not None:
                if attr not in self._classes:
                    self._classes[attr] = _operator_class(SCHEMAS[target], attr)
                return self._classes[attr]
        if attr in levels:
            fallback = getattr(self._fallback, attr, None) if self._fallback is not None else None
            level = OpsNamespace(self._full(attr), fallback if isinstance(fallback, types.ModuleType) else None)
            object.__setattr__(self, attr, level)
            return level
        if self._fallback is not None and hasattr(self._fallback, attr):
            return getattr(self._fallback, attr)
        names = [*(camel_case(SCHEMAS[n].name.rsplit(".", 1)[-1]) for n in ops.values()), *levels]
        close = difflib.get_close_matches(attr, names, n=3) if len(attr) < 100 else []
        hint = f" Did you mean {' or '.join(close)}?" if close else ""
        raise AttributeError(f"{self.__name__} has no op class '{attr}'.{hint}")

    def __dir__(self) -> list[str]:
        ops, levels = self._members()
        return sorted({camel_case(SCHEMAS[n].name.rsplit(".", 1)[-1]) for n in ops.values()} | levels)
