"""Op schemas: the one declaration of an op that drives `fn.*`, validation, docs, the pipeline file and checkpoints."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import reprlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from headrace import enums
from headrace.errors import SchemaError

REQUIRED = object()
"""Default of an argument the user must give."""

_ENUMS = {"dtype": enums.DALIDataType, "image_type": enums.DALIImageType, "interp_type": enums.DALIInterpType}


FLOAT32_MAX = float(np.finfo(np.float32).max)
INT64_RANGE = (-(2**63), 2**63 - 1)
MAX_EXTENT = 1 << 16
"""The largest image extent (pixels) an argument may ask for: above JPEG's limit of 65,535 per side, so that a
real size always fits, and far below what would exhaust memory before a kernel could say so."""
MAX_SAMPLE_ELEMENTS = 1 << 28
"""The most elements an argument may ask one sample to have (a `shape`, `num_classes`): 1 GiB of float32. A batch
holds batch_size such samples: this bounds a typo, not a budget."""

NON_FINITE_ARGS = frozenset({"fill_value", "fill_values", "fdata", "scalar", "on_value", "off_value", "values"})
"""Float arguments that are data values, not sizes, positions or factors: NaN and +-inf are legitimate there (a NaN
fill), and their magnitude is not limited to float32's. Every other float argument must be finite."""

EXTENT_ARGS = frozenset({"size", "crop", "output_size", "max_size", "min_size", "window_size", "mask_size"})
"""List arguments that give one extent per spatial axis: where their length is fixed (2 or 3), one value stands for
all, as DALI's `size=256` does. Other lists (an interval's two ends, a matrix, an axis) take no such shortcut."""


def plain_value(value: Any) -> Any:
    """A `types.Constant` scalar (or anything carrying `scalar_value`) as its Python value; anything else as is."""
    return value.scalar_value if hasattr(value, "scalar_value") else value


@dataclasses.dataclass(frozen=True)
class Limits:
    """The range of a numeric argument's values (of its magnitude where a negative value means a flip, as DALI's
    resize sizes) and, for a shape, the most elements it may describe."""

    low: float
    high: float
    magnitude: bool = False
    max_product: int | None = None
    kind: str | None = None
    """The argument kind these limits are for (an int `shape` is an output shape, a float one a region)."""

    def check(self, values: list) -> None:
        for value in values:
            checked = abs(value) if self.magnitude else value
            if not self.low <= checked <= self.high:
                where = f"|value| <= {self.high:g}" if self.magnitude else f">= {self.low:g} and <= {self.high:g}"
                raise ValueError(f"expected values {where}, got {value!r}")
        if self.max_product is not None:
            product = 1
            for value in values:
                product *= max(int(value), 1)
            if product > self.max_product:
                raise ValueError(f"a shape of {product} elements is more than the limit of {self.max_product}")


ARG_LIMITS = {
    **dict.fromkeys(("resize_x", "resize_y", "size"), Limits(-MAX_EXTENT, MAX_EXTENT, magnitude=True)),
    **dict.fromkeys(("resize_shorter", "resize_longer", "max_size", "crop", "crop_h", "crop_w", "min_canvas_size",
                     "window_size", "sigma"), Limits(0, MAX_EXTENT)),
    "align": Limits(1, MAX_EXTENT),
    "ratio": Limits(0, MAX_EXTENT),  # below 1 is the kernel's error, per sample
    "shape": Limits(-1, MAX_SAMPLE_ELEMENTS, max_product=MAX_SAMPLE_ELEMENTS, kind="int"),
    "num_classes": Limits(1, MAX_SAMPLE_ELEMENTS),
    "num_attempts": Limits(1, 1 << 16),
    "n_channels": Limits(1, 1 << 10),
    "ndim": Limits(0, 64),  # numpy's most dimensions
}
"""Ranges of the arguments that size an output or a loop, by name (a name means the same quantity in every op that
has it, as in DALI); an Arg may declare its own `limits` instead. Values outside are refused when the graph is
defined or a pipeline file is loaded, instead of failing in a kernel or exhausting memory."""


class _ShortRepr(reprlib.Repr):
    """reprlib's shortened repr, also for ints of thousands of digits (which repr itself refuses)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxdict, self.maxstring, self.maxother = 3, 6, 4, 60, 60

    def repr_int(self, x: int, level: int) -> str:
        return f"<an int of {x.bit_length()} bits>" if x.bit_length() > 128 else repr(x)


def short_repr(value: Any) -> str:
    """A value for an error message, shortened: a hostile file's value may be megabytes long or deeply nested."""
    return _ShortRepr().repr(value)


def _coerce_scalar(kind: str, value: Any, non_finite: bool = False) -> Any:
    """Check one value against an argument kind and return its canonical Python form. Ints must fit 64 bits (a
    bool is an int, as DALI converts it); floats must be finite and fit a float32 (DALI's float arguments) unless
    `non_finite` (a data value)."""
    if kind == "any":
        return value
    if kind == "bool":
        if isinstance(value, bool) or (hasattr(value, "dtype") and value.dtype == bool):
            return bool(value)
        raise TypeError(f"expected bool, got {type(value).__name__} {short_repr(value)}")
    if kind == "int":
        if not _is_integral(value):
            raise TypeError(f"expected int, got {type(value).__name__} {short_repr(value)}")
        number = int(value)
        if not INT64_RANGE[0] <= number <= INT64_RANGE[1]:
            raise ValueError(f"{short_repr(number)} does not fit a 64-bit integer")
        return number
    if kind == "float":
        if isinstance(value, bool) or not _is_real(value):
            raise TypeError(f"expected float, got {type(value).__name__} {short_repr(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise ValueError(f"{short_repr(value)} is too large for a float") from None
        if not non_finite:
            if not math.isfinite(number):
                raise ValueError(f"expected a finite float, got {number}")
            if abs(number) > FLOAT32_MAX:
                raise ValueError(f"{number:g} is too large for a 32-bit float (DALI's float arguments)")
        return number
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {type(value).__name__} {short_repr(value)}")
        return value
    if kind in _ENUMS:
        enum = _ENUMS[kind]
        if enum is enums.DALIDataType and _is_numpy_type(value):  # np.float32, np.dtype("uint8")
            value = enums.from_numpy_dtype(np.dtype(value))
        if isinstance(value, str):
            try:
                member = enum[value]
            except KeyError:
                raise TypeError(f"expected one of {[m.name for m in enum]}, got {short_repr(value)}") from None
        elif isinstance(value, bool) or not _is_integral(value):
            raise TypeError(f"expected a types.{enum.__name__}, got {type(value).__name__} {short_repr(value)}")
        else:
            try:
                member = enum(int(value))
            except ValueError:
                raise TypeError(f"{short_repr(value)} is not a types.{enum.__name__}") from None
        if member is enums.DALIDataType.NO_TYPE:
            raise TypeError("types.NO_TYPE is not an element type")
        return member
    if kind == "function":  # user code: a pipeline file stores it by reference (headrace.function_refs)
        if not callable(value):
            raise TypeError(f"expected a function, got {type(value).__name__}")
        return value
    if kind == "callable":
        if not callable(value) and not hasattr(value, "__iter__"):
            raise TypeError(f"expected a callable or an iterable, got {type(value).__name__}")
        return value
    raise AssertionError(f"unknown argument kind {kind}")


def _is_numpy_type(value: Any) -> bool:
    """Whether `value` names a numpy element type (np.float32, np.dtype("uint8")), which a dtype argument takes."""
    return isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic))


def _is_integral(value: Any) -> bool:
    if isinstance(value, str | bytes):
        return False
    try:
        return int(value) == value
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        return False


def _is_real(value: Any) -> bool:
    if isinstance(value, str | bytes):
        return False
    try:
        float(value)
        return True
    except OverflowError:  # an int too large for a float: real, refused by the caller with its own message
        return True
    except (TypeError, ValueError):
        return False


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument of an op: its kind, default, whether it may be a per-sample DataNode, and what it means."""

    name: str
    kind: str
    default: Any = None
    doc: str = ""
    tensor_input: bool = False
    choices: tuple | None = None
    list_of: bool = False
    list_len: tuple[int, int] | None = None
    serializable: bool = True
    limits: Limits | None = None
    """The range of the values; default ARG_LIMITS's entry for the argument's name and kind, if any."""

    def coerce(self, value: Any) -> Any:
        """Validate `value` for this argument, returning its canonical form; raise TypeError/ValueError otherwise.
        The forms DALI's argument parsing takes are accepted: numpy arrays and scalars, tuples, `types.Constant`
        scalars, a bool where an int is taken, an int where a float is, and one value where a fixed number of
        extents is (`size=256` for (256, 256); see `broadcasts`). A bool for a float or a number for a bool, which
        DALI also takes, is refused as the likely slip it is."""
        non_finite = self.name in NON_FINITE_ARGS
        value = plain_value(value)
        if self.list_of:
            if hasattr(value, "tolist"):  # numpy arrays and scalars
                value = value.tolist()
            if isinstance(value, str | bytes) or not isinstance(value, Sequence):
                value = [value]
            values = [_coerce_scalar(self.kind, plain_value(v), non_finite) for v in value]
            if len(values) == 1 and self.broadcasts:
                values = values * self.list_len[0]
            if self.list_len and not self.list_len[0] <= len(values) <= self.list_len[1]:
                lo, hi = self.list_len
                want = f"{lo}" if lo == hi else f"{lo} to {hi}"
                raise ValueError(f"expected {want} values, got {len(values)}")
            self._check_limits(values)
            return values
        coerced = _coerce_scalar(self.kind, value, non_finite)
        if self.choices is not None and coerced not in self.choices:
            raise ValueError(f"expected one of {list(self.choices)}, got {short_repr(coerced)}")
        self._check_limits([coerced])
        return coerced

    @property
    def broadcasts(self) -> bool:
        """Whether one value stands for all of a fixed number of extents, as DALI's `size=256` does for
        (256, 256): an EXTENT_ARGS list of a fixed length of 2 or 3."""
        return (self.list_len is not None and self.list_len[0] == self.list_len[1] and 2 <= self.list_len[0] <= 3
                and self.kind in ("int", "float") and self.name in EXTENT_ARGS)

    def _check_limits(self, values: list) -> None:
        limits = self.limits or ARG_LIMITS.get(self.name)
        if limits is not None and limits.kind in (None, self.kind) and self.kind in ("int", "float"):
            limits.check(values)

    def to_json(self, value: Any) -> Any:
        """The JSON form of a canonical value: enums by name, everything else as is."""
        if self.kind in _ENUMS:
            return [v.name for v in value] if self.list_of else value.name
        return value

    @property
    def type_name(self) -> str:
        base = f"types.{_ENUMS[self.kind].__name__}" if self.kind in _ENUMS else self.kind
        return f"list of {base}" if self.list_of else base


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """What one output of a node carries per sample, known while the graph is built: element type, layout and dims
    (-1 where an extent varies from sample to sample); None where it cannot be known. `note` says what the data is
    where type and layout do not ("encoded file", "RGB")."""

    dtype: np.dtype | None = None
    layout: str | None = None
    dims: tuple[int, ...] | None = None
    note: str = ""

    def __post_init__(self) -> None:
        dtype = self.dtype
        if dtype is not None:
            dtype = enums.to_numpy_dtype(dtype) if isinstance(dtype, enums.DALIDataType) else np.dtype(dtype)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "layout", self.layout or None)
        object.__setattr__(self, "dims", None if self.dims is None else tuple(int(d) for d in self.dims))

    @property
    def ndim(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def label(self) -> str:
        """The short form `headrace inspect` puts on an edge: 'float16 CHW', 'uint8 HWC (RGB)', '?' if unknown."""
        parts = [self.dtype.name if self.dtype is not None else "", self.layout or "",
                 f"({self.note})" if self.note else ""]
        return " ".join(p for p in parts if p) or "?"


UNKNOWN_OUTPUT = OutputSpec()
"""The spec of an output nothing is known about."""


def frame_spec(spec: OutputSpec) -> OutputSpec:
    """The spec of one frame of a sequence (layout 'F...'): its outer axis dropped; other specs as they are."""
    if not spec.layout or spec.layout[0] != "F":
        return spec
    return dataclasses.replace(spec, layout=spec.layout[1:], dims=None if spec.dims is None else spec.dims[1:])


def frame_arguments(args: dict) -> dict:
    """A sequence node's arguments as each frame's kernel takes them: an `output_layout` given for the sequence
    ('FCHW', as DALI's) without its frame axis."""
    layout = args.get("output_layout")
    if isinstance(layout, str) and layout.startswith("F"):
        return {**args, "output_layout": layout[1:]}
    return args


def sequence_spec(spec: OutputSpec, frames: int = -1) -> OutputSpec:
    """The spec of a sequence of `frames` frames of `spec` (-1: varying): an outer 'F' axis."""
    layout = "F" + spec.layout if spec.layout else None
    return dataclasses.replace(spec, layout=layout, dims=None if spec.dims is None else (frames, *spec.dims))


@dataclasses.dataclass(frozen=True)
class SpecArgs:
    """What an op's output spec is computed from: every argument's value (given or default), the arguments that come
    per sample from a DataNode (their literal is unknown), and the specs of the op's inputs."""

    args: Mapping[str, Any]
    per_sample: frozenset[str] = frozenset()
    inputs: tuple[OutputSpec, ...] = ()

    def literal(self, name: str) -> Any:
        """The value of argument `name`, or None when it comes per sample."""
        return None if name in self.per_sample else self.args[name]

    @property
    def first(self) -> OutputSpec:
        """The spec of the first input (unknown when there is none)."""
        return self.inputs[0] if self.inputs else UNKNOWN_OUTPUT


CHECKPOINT_RULES = ("none", "rng", "reader", "source")

DALI_HINT = "Accepted for DALI compatibility; no effect in headrace."
COMMON_ARGS = (
    Arg("device", "str", None, "Where the op runs: 'cpu', 'gpu' or 'mixed' (CPU in, GPU out)."),
    Arg("name", "str", None, "A unique name for the node; readers are looked up by it (`epoch_size('Reader')`)."),
    Arg("preserve", "bool", False, "Keep the op even if its outputs are unused."),
    Arg("bytes_per_sample_hint", "int", [0], "Output buffer size hint per sample, in bytes (DALI sizes its buffers "
        "by it); accepted for DALI compatibility, no effect in headrace (its buffers are sized from the data).",
        list_of=True),
)
SEED_ARG = Arg("seed", "int", -1, "Seed of this op's random stream; -1 derives it from the pipeline seed and the node.")

_IGNORED = "Accepted for DALI compatibility; headrace reads its files directly and ignores it."
READER_COMPAT_ARGS = (
    Arg("read_ahead", "bool", False, _IGNORED),
    Arg("dont_use_mmap", "bool", False, _IGNORED),
    Arg("lazy_init", "bool", False, _IGNORED),
    Arg("prefetch_queue_depth", "int", 1, _IGNORED),
    Arg("skip_cached_images", "bool", False, _IGNORED),
)
"""Arguments every DALI reader takes that change nothing in headrace's readers (they are declared so ported code
runs)."""
READER_BUFFER_ARGS = (Arg("tensor_init_bytes", "int", 1048576, DALI_HINT),)
"""DALI readers' buffer-size hint (headrace sizes its buffers from the data)."""
MAPPING_READER_ARGS = (
    *(arg for arg in READER_COMPAT_ARGS if arg.name != "dont_use_mmap"),
    Arg("dont_use_mmap", "bool", False, "Read each sample as a copy instead of handing out a view of its file mapped "
        "into memory (DALI's default, False, maps): for files that may be truncated while they are read, which a "
        "mapping meets with a SIGBUS once the sample is touched."),
)
"""READER_COMPAT_ARGS for the readers that map their files (readers.file, readers.coco and the record readers), where
dont_use_mmap does what DALI's does."""
SHARD_ARGS = (
    Arg("shard_id", "int", 0, "Which shard this pipeline reads."),
    Arg("num_shards", "int", 1, "Into how many shards the data set is split."),
    Arg("stick_to_shard", "bool", False, "Keep reading the same shard every epoch instead of moving on."),
    Arg("pad_last_batch", "bool", False, "Fill the last batch of a shard by repeating its last sample, so "
        "batches never span epochs."),
)
"""The sharding arguments of the readers that split a data set across pipelines (DALI's names and defaults)."""


def shuffle_args(order: str) -> tuple[Arg, ...]:
    """random_shuffle, initial_fill and shuffle_mode of a reader, as DALI's (headrace.readers.shuffling); `order`
    says what the buffer draws from (files permuted once before sharding, or records in their stored order)."""
    return (
        Arg("random_shuffle", "bool", False, "Shuffle as DALI does: each epoch of the shard is given out through a "
            f"buffer of `initial_fill` samples, every next one drawn at random from it ({order}); sample i comes "
            "from the first i + initial_fill of the shard, and an epoch holds exactly its shard. See shuffle_mode "
            "for a full permutation per epoch."),
        Arg("initial_fill", "int", 1024, "Size of random_shuffle's buffer, in samples.", limits=Limits(1, 2**40)),
        Arg("shuffle_mode", "str", "buffer", "How random_shuffle shuffles: 'buffer' (DALI's, above) or "
            "'permutation': each epoch's shard in a full random permutation. headrace's own: DALI has no such "
            "argument.", choices=("buffer", "permutation")),
    )


FILES_PERMUTED = "the files are first permuted once, before sharding, with DALI's fixed permutation"
RECORDS_IN_ORDER = "records read ahead in their stored order, so reads stay sequential"


@dataclasses.dataclass(frozen=True)
class OpSchema:
    """Everything headrace knows about an op, declared once."""

    name: str
    doc: str
    args: tuple[Arg, ...] = ()
    min_inputs: int = 0
    max_inputs: int = 0
    num_outputs: int | Callable[[dict], int] = 1
    devices: tuple[str, ...] = ("cpu",)
    random: bool = False
    stateful: bool = False
    batch_op: bool = False
    whole_batch: bool = False
    """The kernel sees all samples of a batch at once (e.g. pad to the largest); it is not a reader."""
    state: str | None = None
    """The op's checkpoint rule, which every op must declare: 'none' (stateless), 'rng' (random streams keyed by
    (node seed, sample number): restored by the iteration counter), 'reader' (a reader's position) or 'source'
    (external_source counters). tests/test_checkpoint.py fails for an op that declares none."""
    rule: Callable[[frozenset[str]], str | None] | None = None
    """A rule across arguments (e.g. mutually exclusive ones): given the names of the arguments given, literal or
    per-sample, it returns what is wrong, or None."""
    output_spec: Callable[[SpecArgs], list[OutputSpec]] | None = None
    """What each output carries (element type, layout, dims), from the node's arguments and its inputs' specs
    (helpers in headrace.output_specs); its docstring says in words what the output is. Every op declares one:
    tests/test_output_specs.py fails for an op that does not."""
    input_layouts: tuple[str, ...] | None = None
    """The layouts the op reads (an image op: ("HW", "HWC")); an input of another known layout is refused."""
    sequences: bool = False
    """The op also takes sequences, as DALI's ops that allow them: an input laid out 'F' + one of `input_layouts`
    is processed frame by frame (headrace.engine.frames), and an argument input marked by `fn.per_frame` gives one
    value per frame."""
    default_axis_names: str | None = None
    """The `axis_names` meant when neither `axes` nor `axis_names` is given, resolved once the input's layout is
    known (erase: "HW")."""
    family: str = ""
    """The op's family: the module that declares it (headrace.ops.<family>), filled by `register`."""
    renamed_args: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """DALI's deprecated argument names still accepted, mapped to today's (crop's `output_dtype` -> `dtype`)."""
    plugin_module: str = ""
    """For a user op (headrace.plugin.register_op): the module that declares it, which a pipeline file names so
    that loading imports it, when trusted."""

    def __post_init__(self) -> None:
        if self.state not in (None, *CHECKPOINT_RULES):
            raise AssertionError(f"{self.name}: unknown checkpoint rule {self.state!r}")
        if self.random and self.state != "rng":
            raise AssertionError(f"{self.name}: a random op must declare state='rng'")
        if self.sequences and (self.whole_batch or self.random):  # frames would change their batches or streams
            raise AssertionError(f"{self.name}: only a per-sample, non-random op runs frame by frame")

    @property
    def all_args(self) -> dict[str, Arg]:
        extra = (SEED_ARG,) if self.random else ()
        return {a.name: a for a in (*COMMON_ARGS, *extra, *self.args)}

    def present(self, kwargs: dict, outputs: Any) -> Any:
        """What the `fn.*` call returns for a node's outputs: them as they are (one DataNode or a tuple); a schema
        class may name them (readers.tfrecord: a dict by feature name, as DALI's)."""
        return outputs

    def outputs_for(self, args: dict, num_inputs: int | None = None) -> int:
        """How many outputs a node with `args` (and `num_inputs` inputs, where known) has: `num_outputs` itself, or
        its value for the arguments (a function of two parameters also gets the number of inputs: DALI's box ops
        have one more output when labels are given)."""
        if not callable(self.num_outputs):
            return self.num_outputs
        if num_inputs is not None and self.num_outputs.__code__.co_argcount > 1:
            return self.num_outputs(args, num_inputs)
        return self.num_outputs(args)

    def output_specs(self, args: dict, per_sample: Collection[str] = (),
                     inputs: Sequence[OutputSpec] = ()) -> list[OutputSpec]:
        """The spec of each output of a node with literal `args`, per-sample arguments `per_sample` and inputs of
        specs `inputs`; all unknown when the op declares no output spec."""
        count = self.outputs_for(args, len(inputs) if inputs else None)
        if self.output_spec is None:
            return [UNKNOWN_OUTPUT] * count
        frames = self.sequence_input(inputs[0].layout if inputs else None)
        if frames:  # per frame: the frame's spec, under an outer 'F' axis of the sequence's length
            length = inputs[0].dims[0] if inputs[0].dims else -1
            inputs = [frame_spec(spec) for spec in inputs]
            args = frame_arguments(args)
        specs = list(self.output_spec(SpecArgs(self.resolve(args), frozenset(per_sample), tuple(inputs))))
        if frames:
            specs = [sequence_spec(spec, length) for spec in specs]
        if len(specs) != count:
            raise AssertionError(f"{self.name}: its output spec gives {len(specs)} outputs, the op has {count}")
        return specs

    def sequence_input(self, layout: str | None) -> bool:
        """Whether an input of `layout` is a sequence this op processes frame by frame: it allows sequences, and
        the layout is 'F' followed by one it reads (any, where it declares none)."""
        if not self.sequences or not layout or layout[0] != "F":
            return False
        return self.input_layouts is None or layout[1:] in self.input_layouts

    def validate_args(self, node: str, kwargs: dict, per_sample: Collection[str] = ()) -> dict:
        """Canonical values of `kwargs`, or a SchemaError that names the node, the op and the argument.
        `per_sample` names the arguments given as DataNodes (a required one is then present)."""
        known = self.all_args
        out = {}
        for key, value in kwargs.items():
            if key in self.renamed_args and key not in known:
                if self.renamed_args[key] in kwargs:
                    raise SchemaError(f"{self.name} (node '{node}'): give '{self.renamed_args[key]}' or its old name "
                                      f"'{key}', not both")
                key = self.renamed_args[key]
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1) if len(key) < 100 else []
                hint = f" Did you mean '{close[0]}'?" if close else ""
                raise SchemaError(
                    f"{self.name} (node '{node}'): unknown argument {short_repr(key)}.{hint} "
                    f"Valid arguments: {', '.join(sorted(known))}."
                )
            if value is None and (key in ("device", "name") or known[key].default is None):
                continue  # None for an argument whose default is None: not given, as DALI reads it
            try:
                out[key] = known[key].coerce(value)
            except (TypeError, ValueError) as exc:
                raise SchemaError(f"{self.name} (node '{node}'): argument '{key}': {exc}") from None
        for arg in self.args:
            if arg.default is REQUIRED and arg.name not in out and arg.name not in per_sample:
                raise SchemaError(f"{self.name} (node '{node}'): missing required argument '{arg.name}'")
        return out

    def check_rule(self, node: str, given: set[str] | frozenset[str]) -> None:
        """Apply the schema's cross-argument rule to the names of the given arguments; SchemaError if broken."""
        problem = self.rule(frozenset(given)) if self.rule is not None else None
        if problem:
            raise SchemaError(f"{self.name} (node '{node}'): {problem}")

    def arg(self, args: dict, name: str) -> Any:
        """The value of argument `name`: the given one or its default."""
        if name in args:
            return args[name]
        default = self.all_args[name].default
        return None if default is REQUIRED else default

    def resolve(self, args: dict) -> dict:
        """Every argument's value (`arg`), by name: what a kernel is handed."""
        return {name: self.arg(args, name) for name in self.all_args}

    def docstring(self) -> str:
        """The `fn.*` docstring, generated from the declaration."""
        lines = [self.doc, "", f"Devices: {', '.join(self.devices)}."]
        if self.max_inputs:
            lines.append(f"Inputs: {self.min_inputs} to {self.max_inputs}.")
        lines += ["", "Args:"]
        for arg in self.all_args.values():
            default = "required" if arg.default is REQUIRED else f"default {arg.default!r}"
            per_sample = ", per-sample DataNode allowed" if arg.tensor_input else ""
            lines.append(f"    {arg.name} ({arg.type_name}, {default}{per_sample}): {arg.doc}")
        return "\n".join(lines)


SCHEMAS: dict[str, OpSchema] = {}


def register(schema: OpSchema, module: str = "") -> OpSchema:
    """Add a schema to the registry (names are unique), its family taken from `module`, the declaring module's
    `__name__` (headrace.ops.color -> "color"); returns the registered schema."""
    if schema.name in SCHEMAS:
        raise AssertionError(f"op {schema.name} declared twice")
    if module:
        schema = dataclasses.replace(schema, family=module.rsplit(".", 1)[-1])
    SCHEMAS[schema.name] = schema
    return schema


def registrar(module: str) -> Callable[[OpSchema], OpSchema]:
    """The `register` of one ops module: `register = registrar(__name__)` files its schemas under its family."""
    return functools.partial(register, module=module)


def get_schema(name: str, node: str | None = None) -> OpSchema:
    """The schema of op `name`, or a SchemaError that lists the closest known ops."""
    try:
        return SCHEMAS[name]
    except KeyError:
        close = difflib.get_close_matches(name, SCHEMAS, n=3)
        where = f" (node '{node}')" if node else ""
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise SchemaError(f"unknown op '{name}'{where}.{hint}") from None
