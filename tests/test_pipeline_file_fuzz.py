"""A pipeline file is hostile data (issue 24): any mutation of a valid file loads and builds, or is refused with a
headrace error; never another exception, never a hang, never unbounded memory.

The mutations (other JSON types, huge / NaN / infinite numbers, deep nesting, wrong node references, duplicate names,
unknown ops and arguments, removed keys, paths to devices, FIFOs, directories and oversized files) are generated
here; scripts/fuzz_pipeline_files.py runs the same generators over 10,000 cases and prints the figures.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headrace import HeadraceError, Pipeline, PipelineFileError, fn, pipeline_def, types
from headrace.data.synthetic import make_image_folder
from headrace.demo import resnet50_train, resnet50_val
from headrace.schema import SCHEMAS

CASE_TIMEOUT_S = 120
"""A guard, not a measure: a case that runs this long is reported as a hang instead of blocking the run forever."""


# The valid files --------------------------------------------------------------------------------------------------

@pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=0, prefetch_queue_depth=1)
def served_preprocess():
    """The served model's preprocessing (scripts/make_model_repository.py): fed JPEGs in, normalized CHW out."""
    jpegs = fn.external_source(name="images", dtype=types.UINT8, ndim=1)
    images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
    images = fn.resize(images, resize_shorter=256)
    return fn.crop_mirror_normalize(images, crop=(224, 224), dtype=types.FLOAT, output_layout="CHW",
                                    mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], name="normalized")


@pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=5, enable_conditionals=True)
def conditional():
    """Per-sample if / elif / else on fed values."""
    x = fn.external_source(name="x", batch=True)
    if x > 5:
        y = x * 10
    elif x > 2 and not (x == 4):
        y = x + 100
    else:
        y = x - 1
    return y


@pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=11)
def many_ops(file_root: str, file_list: str):
    """One node of most op families, so that mutations reach most argument kinds."""
    jpegs, labels = fn.readers.file(file_root=file_root, file_list=file_list, random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, name="Decode")
    images = fn.resize(images, size=[24, 32], name="Resize")
    images = fn.rotate(images, angle=fn.random.uniform(range=[-10, 10], name="Angle"), fill_value=0.0, name="Rotate")
    images = fn.warp_affine(images, matrix=[1.0, 0.1, 0.0, 0.0, 1.0, 0.0], size=[24, 32], fill_value=0.0,
                            name="Warp")
    images = fn.crop(images, crop=(20, 20), name="Crop")
    images = fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5, name="Coin"), name="Flip")
    images = fn.hsv(images, hue=5.0, name="Hsv")
    images = fn.color_twist(images, brightness=1.1, name="Twist")
    images = fn.brightness_contrast(images, contrast=0.9, name="Contrast")
    images = fn.gaussian_blur(images, sigma=1.0, window_size=3, name="Blur")
    images = fn.erase(images, anchor=[2, 2], shape=[4, 4], axis_names="HW", name="Erase")
    images = fn.paste(images, ratio=1.5, fill_value=[0.0], name="Paste")
    images = fn.pad(images, shape=[40, 40, 3], name="Pad")
    gray = fn.color_space_conversion(images, image_type=types.RGB, output_type=types.GRAY, name="Gray")
    out = fn.crop_mirror_normalize(images, dtype=types.FLOAT, mean=[1.0], std=[2.0], name="Normalize")
    out = fn.transpose(out, perm=[1, 2, 0], name="Transpose") + fn.random.normal(shape=[40, 40, 3], name="Noise")
    flat = fn.reshape(out, shape=[-1], name="Reshape")
    const = fn.constant(fdata=[1.0, 2.0], shape=[2], name="Const")
    return (out, gray, fn.cat(const, const, name="Cat"), fn.stack(const, const, name="Stack"),
            fn.reductions.sum(flat, name="Sum"), fn.one_hot(labels, num_classes=3, name="OneHot"),
            fn.cast(labels, dtype=types.INT64, name="Label"))


class Workspace:
    """The files the valid pipelines read and the hostile paths a mutation may name, in one folder."""

    def __init__(self, root: Path):
        self.root = root
        self.images = root / "images"
        if not self.images.exists():
            make_image_folder(self.images, num_images=6, num_classes=2, size=(40, 50), seed=1)
        files = sorted(p.relative_to(self.images) for p in self.images.rglob("*.jpg"))
        self.file_list = root / "list.txt"
        self.file_list.write_text("".join(f"{p} {i % 2}\n" for i, p in enumerate(files)))
        self.paths = {"dir": str(root), "missing": str(root / "missing.txt"), "fifo": str(root / "fifo"),
                      "huge": str(root / "huge.txt"), "binary": str(root / "binary.txt"),
                      "empty": str(root / "empty.txt"), "list": str(self.file_list)}
        if not os.path.exists(self.paths["fifo"]):
            os.mkfifo(self.paths["fifo"])
        with open(self.paths["huge"], "wb") as handle:  # sparse: larger than any file-list limit, no disk used
            handle.truncate(3 << 30)
        Path(self.paths["binary"]).write_bytes(bytes(range(256)) * 16)
        Path(self.paths["empty"]).write_bytes(b"")

    def valid_files(self) -> dict[str, dict]:
        """The valid pipeline files mutations start from, as parsed JSON."""
        pipes = {"resnet50_train": resnet50_train(data_dir=str(self.images)),
                 "resnet50_val": resnet50_val(data_dir=str(self.images)),
                 "served_preprocess": served_preprocess(), "conditional": conditional(),
                 "many_ops": many_ops(str(self.images), str(self.file_list))}
        return {name: json.loads(pipe.serialize()) for name, pipe in pipes.items()}

    def render(self, content: dict) -> str:
        """The file's text: placeholders become what JSON values cannot hold here (deep nesting, numbers of
        thousands of digits, 1e400) or the workspace's paths."""
        text = json.dumps(content)

        def expand(match: re.Match) -> str:
            kind, value = match.group(1), match.group(2)
            if kind == "DEEP":
                return "[" * int(value) + "]" * int(value)
            if kind == "DIGITS":
                return "7" * int(value)
            if kind == "LITERAL":
                return value
            return json.dumps(self.paths[value])

        return re.sub(r'"@@(DEEP|DIGITS|LITERAL|PATH):([^@"]*)@@"', expand, text)


# The mutations ----------------------------------------------------------------------------------------------------

SPECIAL_VALUES = [
    None, True, False, 0, -1, 1, 2, 1.5, -0.5, 1e-320, 1e308, -1e308, float("nan"), float("inf"), float("-inf"),
    2**31, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 10**400, 1e20, -1e9, 10**9,
    "", " ", "x", "0", "NaN", "/dev/zero", "/dev/urandom", "/dev/stdin", "~", "/dev", "/proc/self", "a" * 300,
    "a/" * 3000, "\x00", "..", "UINT8", "FLOAT128", "INTERP_LINEAR", "RGB", "HWC", "CHW",
    [], {}, [1.5], [[1, 2]], [None], [-1, -1], [0, 0], [10**9, 10**9], [2**63], [float("nan")], [1e308, 1e308],
    list(range(100)), {"a": 1}, ["Reader", 0], ["nowhere", 0], ["Reader", 5], ["Reader", -1], ["Reader", 1.5],
    ["Reader", 2**64], ["Reader"], [0, "Reader"],
    *(f"@@DEEP:{n}@@" for n in (40, 1000, 100_000)), "@@DIGITS:400@@", "@@DIGITS:5000@@", "@@LITERAL:1e400@@",
    "@@LITERAL:-1e400@@", *(f"@@PATH:{p}@@" for p in ("dir", "missing", "fifo", "huge", "binary", "empty", "list")),
]
"""Values that break naive loaders: other JSON types, extreme and non-finite numbers, device and FIFO paths."""

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12))
hostile_values = st.one_of(
    st.sampled_from(SPECIAL_VALUES), _scalars, st.integers(-(2**70), 2**70), st.lists(_scalars, max_size=5),
    st.dictionaries(st.text(max_size=6), _scalars, max_size=3),
    st.builds(lambda exp, sign: sign * 10.0 ** exp, st.integers(-30, 308), st.sampled_from([1, -1]))
).map(copy.deepcopy)  # a later mutation may change the value in place: never SPECIAL_VALUES' own lists


def _locations(value: object, path: tuple = ()) -> Iterator[tuple]:
    """Every path (keys and indices) inside a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _locations(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from _locations(item, (*path, index))


def _parent(content: dict, path: tuple) -> object:
    for key in path[:-1]:
        content = content[key]
    return content


def replace_anywhere(draw: Callable, content: dict) -> None:
    """A value anywhere in the file becomes a hostile one."""
    path = draw(st.sampled_from(list(_locations(content))))
    _parent(content, path)[path[-1]] = draw(hostile_values)


def remove_anywhere(draw: Callable, content: dict) -> None:
    """A key or list item anywhere in the file is removed."""
    path = draw(st.sampled_from(list(_locations(content))))
    del _parent(content, path)[path[-1]]


def add_key_anywhere(draw: Callable, content: dict) -> None:
    """An object anywhere gets a key, known elsewhere in the format or made up."""
    objects = [content, *(value for path in _locations(content)
                          if isinstance(value := _parent(content, (*path, None)), dict))]
    key = draw(st.sampled_from(["name", "op", "device", "inputs", "args", "guard", "arg_inputs", "outputs", "nodes",
                                "pipeline", "batch_size", "python", "__class__"]) | st.text(max_size=8))
    draw(st.sampled_from(objects))[key] = draw(hostile_values)


def _node(draw: Callable, content: dict) -> dict:
    return draw(st.sampled_from(content["nodes"]))


def set_argument(draw: Callable, content: dict) -> None:
    """An argument of a node's op (any the schema knows, given or not, or an unknown one) gets a hostile value."""
    node = _node(draw, content)
    schema = SCHEMAS.get(node.get("op"))
    names = sorted(schema.all_args) if schema else []
    key = draw(st.sampled_from(names) | st.text(min_size=1, max_size=8)) if names else draw(st.text(max_size=8))
    node.setdefault("args", {})[key] = draw(hostile_values)


_EXTREME_INTS = st.sampled_from([0, -1, 1, 2, 3, -2, 255, 2**31 - 1, 2**31, 2**53, 2**63 - 1, -(2**63), 10**9,
                                 -(10**9)]) | st.integers(-5, 50)
_EXTREME_FLOATS = st.sampled_from([0.0, -0.0, -1.0, 0.5, 1.0, 1e-30, 1e9, 1e30, 3.5e38, -1e30, 1e300, float("nan"),
                                   float("inf"), float("-inf"), 65536.0, 1e5]) | st.floats(-100, 1000)
_KIND_VALUES = {"int": _EXTREME_INTS, "float": _EXTREME_FLOATS, "bool": st.booleans() | st.sampled_from([0, 1]),
                "str": st.sampled_from(SPECIAL_VALUES).filter(lambda v: isinstance(v, str)) | st.text(max_size=8)}


def set_argument_in_kind(draw: Callable, content: dict) -> None:
    """An argument gets a value of its own kind (so that it may pass the type check) but an extreme one: zero,
    negative, huge, non-finite, lists of any length."""
    node = _node(draw, content)
    schema = SCHEMAS.get(node.get("op"))
    if schema is None:
        return
    arg = schema.all_args[draw(st.sampled_from(sorted(schema.all_args)))]
    if arg.name in ("device", "name"):
        return
    values = _KIND_VALUES.get(arg.kind, hostile_values)
    value = draw(st.lists(values, max_size=8) if arg.list_of and draw(st.integers(0, 4)) else values)
    node.setdefault("args", {})[arg.name] = value


def set_argument_input(draw: Callable, content: dict) -> None:
    """A node reads an argument per sample from another node's output (existing or not)."""
    node = _node(draw, content)
    schema = SCHEMAS.get(node.get("op"))
    key = draw(st.sampled_from(sorted(schema.all_args)) if schema else st.text(max_size=8))
    source = _node(draw, content).get("name")
    node.setdefault("arg_inputs", {})[key] = [source, draw(st.integers(-1, 3))]


def rewire(draw: Callable, content: dict) -> None:
    """An input, guard or output reads another node (perhaps itself, a later one, or a missing output index)."""
    node = _node(draw, content)
    source = _node(draw, content).get("name")
    index = draw(st.integers(-1, 3) | st.sampled_from([2**63, 10**20]))
    where = draw(st.sampled_from(["inputs", "guard", "outputs"]))
    if where == "inputs":
        node["inputs"] = [[source, index]] * draw(st.integers(0, 3))
    elif where == "guard":
        node["guard"] = [source, index]
    else:
        content["outputs"] = [[source, index]]


def change_op(draw: Callable, content: dict) -> None:
    """A node's op becomes another one (its arguments stay) or an unknown one."""
    node = _node(draw, content)
    node["op"] = draw(st.sampled_from(sorted(SCHEMAS)) | st.sampled_from(["os.system", "", "readers.everything"]))
    if draw(st.booleans()):
        node["device"] = draw(st.sampled_from(["cpu", "gpu", "mixed", "tpu"]))


def duplicate_or_rename(draw: Callable, content: dict) -> None:
    """A node appears twice, or is renamed so that what reads it dangles."""
    node = _node(draw, content)
    if draw(st.booleans()):
        content["nodes"].insert(draw(st.integers(0, len(content["nodes"]))), copy.deepcopy(node))
    else:
        node["name"] = draw(st.sampled_from([n.get("name") for n in content["nodes"]]) | st.text(max_size=6))


def set_pipeline_parameter(draw: Callable, content: dict) -> None:
    """A pipeline parameter gets a hostile value."""
    params = content.setdefault("pipeline", {})
    key = draw(st.sampled_from(["batch_size", "num_threads", "device_id", "seed", "prefetch_queue_depth",
                                "enable_checkpointing", "enable_conditionals", "executor"]))
    params[key] = draw(hostile_values)


MUTATIONS = [replace_anywhere, remove_anywhere, add_key_anywhere, set_argument, set_argument, set_argument_in_kind,
             set_argument_in_kind, set_argument_in_kind, set_argument_in_kind, set_argument_input, rewire, change_op,
             duplicate_or_rename, set_pipeline_parameter]


@st.composite
def mutated_files(draw: Callable, valid: dict[str, dict], workspace: Workspace) -> str:
    """The text of a valid file after one to three mutations."""
    content = copy.deepcopy(valid[draw(st.sampled_from(sorted(valid)))])
    for _ in range(draw(st.integers(1, 3))):
        if not isinstance(content.get("nodes"), list) or not content["nodes"] or \
                not all(isinstance(n, dict) for n in content["nodes"]):
            break
        with contextlib.suppress(TypeError, KeyError, IndexError, AttributeError):  # an earlier mutation's shape
            draw(st.sampled_from(MUTATIONS))(draw, content)
    text = workspace.render(content)
    if draw(st.integers(0, 9)) == 0:  # now and then the text itself: cut, spliced, garbage inserted
        start = draw(st.integers(1, len(text)))
        end = draw(st.integers(start, min(len(text), start + 40)))
        text = text[:start] + draw(st.text(max_size=8)) + text[end:]
    return text


# Running one case -------------------------------------------------------------------------------------------------

class CaseTimeout(BaseException):
    """A case ran past CASE_TIMEOUT_S (a BaseException, so that no `except Exception` in the loader hides it)."""


@contextlib.contextmanager
def time_guard(seconds: float) -> Iterator[None]:
    """Raise CaseTimeout in this (main) thread after `seconds`."""
    def expire(signum, frame):
        raise CaseTimeout(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load_and_build(text: str) -> str:
    """Load and build a pipeline file on the CPU: 'ok', or the name of the headrace error it raised. Any other
    exception propagates."""
    try:
        pipe = Pipeline.load(text, device_id=None)
        try:
            pipe.build()
        finally:
            pipe.close()
    except HeadraceError as exc:
        return type(exc).__name__
    return "ok"


# The property test and the regressions ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def valid(workspace) -> dict[str, dict]:
    return workspace.valid_files()


def test_the_valid_files_load_and_build(valid, workspace):
    for content in valid.values():
        assert load_and_build(workspace.render(content)) == "ok"


@settings(max_examples=500, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(data=st.data())
def test_mutated_files_load_or_raise_a_headrace_error(valid, workspace, data):
    text = data.draw(mutated_files(valid, workspace))
    with time_guard(CASE_TIMEOUT_S):
        load_and_build(text)


def _file(content: dict, workspace: Workspace, mutate: Callable[[dict], None]) -> str:
    content = copy.deepcopy(content)
    mutate(content)
    return workspace.render(content)


def _node_of(content: dict, name: str) -> dict:
    """The node of that name, or the first of that op."""
    return next(n for n in content["nodes"] if name in (n["name"], n["op"]))


def _arg(node: str, key: str, value: object) -> Callable[[dict], None]:
    return lambda c: _node_of(c, node).setdefault("args", {}).__setitem__(key, value)


@pytest.mark.parametrize("base, mutate, fragments", [
    # the raw exceptions of issue 24, each now a validation error naming the node and the field
    ("many_ops", lambda c: _node_of(c, "Resize").__setitem__("inputs", 1.5), ["'Resize'", "inputs"]),
    ("many_ops", lambda c: c.__setitem__("outputs", 1.5), ["'outputs'", "wrong type"]),
    ("many_ops", _arg("OneHot", "num_classes", "@@LITERAL:Infinity@@"), ["'OneHot'", "'num_classes'", "int"]),
    ("many_ops", _arg("Reader", "seed", "@@DIGITS:30@@"), ["'Reader'", "'seed'", "64-bit"]),
    ("many_ops", _arg("Rotate", "angle", 10**400), ["'Rotate'", "'angle'", "too large"]),
    ("many_ops", _arg("Rotate", "angle", "@@LITERAL:1e400@@"), ["'Rotate'", "'angle'", "finite"]),
    ("many_ops", _arg("Normalize", "mean", [1.0, "@@DIGITS:400@@"]), ["'Normalize'", "'mean'"]),
    ("many_ops", _arg("Normalize", "mean", [[1.0, 2.0]]), ["'Normalize'", "'mean'", "expected float"]),
    ("many_ops", _arg("Resize", "size", "@@DEEP:100000@@"), ["nested"]),
    ("many_ops", _arg("Resize", "size", "@@DEEP:100@@"), ["nested"]),
    ("many_ops", _arg("Resize", "size", "@@DIGITS:5000@@"), ["digits"]),
    ("resnet50_val", _arg("resize", "resize_shorter", "@@LITERAL:NaN@@"), ["'__resize_1'", "'resize_shorter'"]),
    ("resnet50_val", _arg("resize", "resize_shorter", "@@LITERAL:-Infinity@@"), ["'resize_shorter'"]),
    ("resnet50_val", _arg("resize", "resize_shorter", -256.0), ["'__resize_1'", "'resize_shorter'", ">= 0"]),
    ("resnet50_val", _arg("resize", "resize_shorter", 1e9), ["'resize_shorter'", "<="]),
    ("many_ops", _arg("Const", "shape", [10**6, 10**6]), ["'Const'", "'shape'"]),
    ("many_ops", _arg("Noise", "shape", [-3]), ["'Noise'", "'shape'"]),
    ("served_preprocess", _arg("images", "ndim", 10**12), ["'images'", "'ndim'", "<= 64"]),
    ("many_ops", _arg("Reader", "labels", [1.5]), ["'Reader'", "'labels'", "expected int"]),
    ("many_ops", lambda c: c["pipeline"].__setitem__("batch_size", 2**40), ["'batch_size'"]),
    ("many_ops", lambda c: c["pipeline"].__setitem__("batch_size", -8), ["'batch_size'", "positive"]),
    ("many_ops", lambda c: c["pipeline"].__setitem__("seed", 2**64), ["'seed'"]),
    ("many_ops", lambda c: c["pipeline"].__setitem__("num_threads", 10**6), ["'num_threads'"]),
])
def test_issue_24_load_errors(valid, workspace, base, mutate, fragments):
    with pytest.raises(PipelineFileError) as info:
        Pipeline.load(_file(valid[base], workspace, mutate), device_id=None)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


@pytest.mark.parametrize("value, fragment", [
    ("/dev/zero", "not a regular file"), ("@@PATH:fifo@@", "not a regular file"),
    ("@@PATH:dir@@", "not a regular file"), ("~", "cannot read"), ("@@PATH:missing@@", "cannot read"),
    ("a" * 300, "cannot read"), ("@@PATH:huge@@", "GiB"), ("@@PATH:binary@@", "'path label'"),
])
def test_file_list_reads_are_bounded_and_name_the_node(valid, workspace, value, fragment):
    pipe = Pipeline.load(_file(valid["many_ops"], workspace, _arg("Reader", "file_list", value)), device_id=None)
    with time_guard(CASE_TIMEOUT_S), pytest.raises(HeadraceError) as info:
        pipe.build()
    assert "'Reader'" in str(info.value) and "file_list" in str(info.value) and fragment in str(info.value)


def _listing(**args: object) -> Callable[[dict], None]:
    """The reader lists what `args` say instead of its file list."""
    def mutate(content: dict) -> None:
        _node_of(content, "Reader")["args"].pop("file_list")
        _node_of(content, "Reader")["args"].update(args)

    return mutate


@pytest.mark.parametrize("mutate, fragment", [
    (_arg("Reader", "file_list", "with\x00nul"), "cannot read"),
    (lambda c: _node_of(c, "Reader")["args"].pop("file_list"), None),
    (_listing(file_root="@@PATH:list@@"), "not a directory"),
    (_listing(file_root="a" * 300), "not a directory"),
    (_listing(files=["a", "b"], labels=[1, 2**40]), "int32"),
    (_listing(files=["a\x00b"]), "NUL"),
])
def test_reader_listing_errors_name_the_node(valid, workspace, mutate, fragment):
    """Whatever the listing arguments name, building gives a headrace error naming the reader, or works."""
    pipe = Pipeline.load(_file(valid["many_ops"], workspace, mutate), device_id=None)
    if fragment is None:
        pipe.build()
        pipe.close()
        return
    with pytest.raises(HeadraceError) as info:
        pipe.build()
    assert "'Reader'" in str(info.value) and fragment in str(info.value), str(info.value)
