"""The pipeline file: round trip, rejection of malformed files (naming the node), portability, and data-not-code."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headrace import Pipeline, PipelineFileError, SchemaError, fn, pipeline_def, pipeline_file, types
from headrace.data.synthetic import synthetic_image

IMAGES = [synthetic_image(np.random.default_rng(i), 30 + 7 * i, 40 + 3 * i) for i in range(3)]


def run_fed(pipe: Pipeline, iterations: int = 2) -> list[list[np.ndarray]]:
    """Run a pipeline whose only input is the external source 'x', fed the same images each iteration."""
    out = []
    for _ in range(iterations):
        batches = pipe.run(x=IMAGES) if pipe.fed_inputs else pipe.run()
        out.append([np.array(b.at(i)) for b in batches for i in range(len(b))])
    pipe.close()
    return out


def assert_same_batches(a, b):
    assert len(a) == len(b)
    for xs, ys in zip(a, b, strict=True):
        assert len(xs) == len(ys)
        for x, y in zip(xs, ys, strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(x, y)


# Random valid graphs -------------------------------------------------------------------------------------------------

_DTYPES = st.sampled_from([types.FLOAT, types.FLOAT16, types.UINT8])
_INTERPS = st.sampled_from([types.INTERP_NN, types.INTERP_LINEAR, types.INTERP_CUBIC, types.INTERP_LANCZOS3,
                            types.INTERP_TRIANGULAR])

# Each step maps an HWC uint8 image node to an HWC image node (some steps leave uint8 behind: they come last).
IMAGE_STEPS = {
    "resize": st.builds(lambda x, y, interp, aa: lambda n: fn.resize(n, resize_x=x, resize_y=y, interp_type=interp,
                                                                     antialias=aa),
                        st.integers(4, 40), st.integers(4, 40), _INTERPS, st.booleans()),
    "resize_shorter": st.builds(lambda s: lambda n: fn.resize(n, resize_shorter=s), st.integers(5, 30)),
    "crop": st.builds(lambda h, w, px, py: lambda n: fn.crop(n, crop=(h, w), crop_pos_x=px, crop_pos_y=py,
                                                             out_of_bounds_policy="pad", fill_values=[9.0]),
                      st.integers(1, 50), st.integers(1, 50), st.floats(0, 1), st.floats(0, 1)),
    "flip": st.builds(lambda h, v: lambda n: fn.flip(n, horizontal=h, vertical=v), st.integers(0, 1),
                      st.integers(0, 1)),
    "random_flip": st.just(lambda n: fn.flip(n, horizontal=fn.random.coin_flip(probability=0.5))),
    "random_resized_crop": st.builds(lambda s: lambda n: fn.random_resized_crop(n, size=[s, s]), st.integers(4, 20)),
}
FINAL_STEPS = {
    "cmn": st.builds(lambda dtype, layout, mirror, pad: lambda n: fn.crop_mirror_normalize(
        n, dtype=dtype, output_layout=layout, mean=[100.0, 110.0, 120.0], std=[50.0, 55.0, 60.0],
        mirror=fn.random.coin_flip() if mirror else 0, pad_output=pad),
        _DTYPES, st.sampled_from(["CHW", "HWC"]), st.booleans(), st.booleans()),
    "arith": st.builds(lambda k, c: lambda n: (n * k + c) / 2 - types.Constant(1.5), st.integers(-3, 3),
                       st.floats(-10, 10, allow_nan=False)),
    "cast": st.builds(lambda dtype: lambda n: fn.cast(n, dtype=dtype), _DTYPES),
    "compare": st.just(lambda n: (n > 100) & (n < 200)),
    "noise": st.just(lambda n: fn.cast(n, dtype=types.FLOAT) + fn.random.normal(stddev=2.0)
                     + fn.random.uniform(range=[0, 1])),
    "none": st.just(lambda n: n),
}


@st.composite
def graphs(draw):
    steps = draw(st.lists(st.sampled_from(sorted(IMAGE_STEPS)), min_size=0, max_size=4))
    chain = [draw(IMAGE_STEPS[s]) for s in steps]
    finals = [draw(FINAL_STEPS[s]) for s in draw(st.lists(st.sampled_from(sorted(FINAL_STEPS)), min_size=1,
                                                           max_size=2))]
    seed = draw(st.integers(0, 2**31 - 1))

    @pipeline_def(batch_size=len(IMAGES), num_threads=1, device_id=None, seed=seed, prefetch_queue_depth=1)
    def pipe():
        node = fn.external_source(name="x")
        for step in chain:
            node = step(node)
        return tuple(final(node) for final in finals)

    return pipe


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(factory=graphs())
def test_random_graphs_round_trip(factory):
    original = factory()
    text = original.serialize()
    loaded = Pipeline.load(text)
    assert loaded.serialize() == text
    assert json.loads(text)["format_version"] == 1
    assert_same_batches(run_fed(factory()), run_fed(loaded))


def test_round_trip_through_a_file_with_a_reader(image_folder, tmp_path):
    @pipeline_def(batch_size=5, num_threads=2, device_id=None, seed=7)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(image_folder), random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, random_area=[0.3, 1.0])
        images = fn.resize(images, resize_x=32, resize_y=32)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, mirror=fn.random.coin_flip())
        return images, labels

    path = tmp_path / "train.json"
    text = pipe().serialize(path)
    assert path.read_text() == text
    loaded = Pipeline.load(path)
    assert loaded.serialize() == text
    assert loaded.epoch_size("Reader") == 37
    assert_same_batches(run_fed(pipe(), 9), run_fed(loaded, 9))  # 9 batches of 5 cross the 37-image epoch


def test_overrides_on_load(image_folder):
    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(image_folder))
        return fn.decoders.image(jpegs), labels

    loaded = Pipeline.load(pipe().serialize(), batch_size=6, num_threads=2)
    images, labels = loaded.run()
    assert len(images) == 6 and loaded.num_threads == 2


# Malformed files ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def valid() -> dict:
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        x = fn.external_source(name="x")
        images = fn.resize(x, resize_x=8, name="Resize")
        images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(name="Coin"), mean=[1.0],
                                          name="Normalize")
        return images * 2, fn.cast(images, dtype=types.UINT8, name="Cast")

    return json.loads(pipe().serialize())


def node_of(content: dict, name: str) -> dict:
    return next(n for n in content["nodes"] if n["name"] == name)


def corrupt(content: dict, kind: str, target: str) -> tuple[str, str | None]:
    """A corrupted copy of `content` (as text) and the node name the error must mention (None: no node)."""
    c = copy.deepcopy(content)
    node = node_of(c, target)
    if kind == "unknown_op":
        node["op"] = "readers.everything"
    elif kind == "bad_argument_value":
        node.setdefault("args", {})["name"] = "x"  # a node key inside args
        if target == "Resize":
            node["args"] = {"resize_x": "eight"}
        elif target == "Normalize":
            node["args"] = {"dtype": "FLOAT128"}
        elif target == "Cast":
            node["args"] = {"dtype": 3.5}
    elif kind == "unknown_argument":
        node.setdefault("args", {})["shuffle"] = True
    elif kind == "cycle":
        node["inputs"] = [["Cast", 0]] if target != "Cast" else [["Cast", 0]]
        if target == "x":
            node["op"] = "copy"
    elif kind == "dangling_input":
        node["inputs"] = [["Nowhere", 0]]
    elif kind == "bad_output_index":
        node["inputs"] = [["x", 5]] if target != "x" else []
        if target == "x":
            c["outputs"] = [["x", 5]]
    elif kind == "duplicate_name":
        c["nodes"].append(copy.deepcopy(node))
    elif kind == "wrong_device":
        node["device"] = "tpu"
    elif kind == "unknown_node_key":
        node["python"] = "lambda: 0"
    elif kind == "bad_arg_input":
        node["arg_inputs"] = {"resize_x" if target == "Resize" else "nonsense": ["Coin", 0]}
    return json.dumps(c), target


NODE_CORRUPTIONS = ["unknown_op", "bad_argument_value", "unknown_argument", "cycle", "dangling_input",
                    "bad_output_index", "duplicate_name", "wrong_device", "unknown_node_key", "bad_arg_input"]


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(NODE_CORRUPTIONS), target=st.sampled_from(["Resize", "Normalize", "Cast", "x", "Coin"]))
def test_node_corruptions_are_rejected_naming_the_node(valid, kind, target):
    text, name = corrupt(valid, kind, target)
    with pytest.raises(PipelineFileError) as info:
        Pipeline.load(text)
    assert f"'{name}'" in str(info.value), (kind, target, str(info.value))


@pytest.mark.parametrize("mutate, fragment", [
    (lambda c: c.update(format_version=2), "format_version 2"),
    (lambda c: c.update(format_version="1"), "format_version '1'"),
    (lambda c: c.pop("format_version"), "format_version None"),
    (lambda c: c.update(format="dali-pipeline"), "'format'"),
    (lambda c: c.update(outputs=[]), "'outputs'"),
    (lambda c: c.update(outputs=[["Ghost", 0]]), "'Ghost'"),
    (lambda c: c.update(outputs=[["Cast"]]), "output #0"),
    (lambda c: c.update(nodes=[]), "'nodes'"),
    (lambda c: c.update(extra={"x": 1}), "unknown top-level keys"),
    (lambda c: c["pipeline"].update(batch_size="8"), "'batch_size'"),
    (lambda c: c["pipeline"].update(workers=8), "'workers'"),
    (lambda c: c["pipeline"].update(batch_size=0), "'batch_size' must be positive"),
    (lambda c: c["pipeline"].update(prefetch_queue_depth=-2), "'prefetch_queue_depth' must be positive"),
])
def test_file_level_corruptions(valid, mutate, fragment):
    content = copy.deepcopy(valid)
    mutate(content)
    with pytest.raises(PipelineFileError, match=re.escape(fragment)):
        Pipeline.load(json.dumps(content))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_non_json_and_truncated_text_is_rejected(valid, data):
    text = json.dumps(valid)
    cut = data.draw(st.integers(1, len(text) - 1))
    with pytest.raises(PipelineFileError):
        Pipeline.load(text[:cut] if text[:cut].lstrip().startswith("{") else "{" + text[:cut])
    garbage = data.draw(st.text(min_size=1, max_size=30).filter(lambda s: not s.strip().startswith("{")))
    with pytest.raises((PipelineFileError, FileNotFoundError, OSError)):
        Pipeline.load("{" + garbage)


# Portability --------------------------------------------------------------------------------------------------------

def test_relative_file_root_stays_relative(image_folder, tmp_path, monkeypatch):
    monkeypatch.chdir(image_folder.parent)
    relative = image_folder.name

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=relative, name="Reader")
        return fn.decoders.image(jpegs), labels

    text = pipe().serialize()
    assert json.loads(text)["nodes"][0]["args"]["file_root"] == relative
    assert str(image_folder.parent) not in text and str(Path.home()) not in text
    # resolved against the working directory when run, wherever the file was written
    first = Pipeline.load(text).run()[1].as_array()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match=relative):
        Pipeline.load(text).run()
    monkeypatch.chdir(image_folder.parent)
    np.testing.assert_array_equal(Pipeline.load(text).run()[1].as_array(), first)


def test_no_source_lines_or_callables_in_the_file():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=2)
    def pipe():
        return fn.external_source(name="x", source=lambda: [np.zeros(3)] * 2)

    text = pipe().serialize()
    assert "lambda" not in text
    assert '"source"' not in text
    assert "test_pipeline_file" not in text


# Data, never code ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("node", [
    {"name": "x", "op": "external_source", "device": "cpu", "args": {"source": "os.system"}},
    {"name": "x", "op": "external_source", "device": "cpu", "args": {"source": {"py/function": "os.system"}}},
    {"name": "x", "op": "external_source", "device": "cpu", "args": {"cuda_stream": "ctypes.CDLL"}},
    {"name": "x", "op": "os.system", "device": "cpu"},
    {"name": "x", "op": "builtins.eval", "device": "cpu", "args": {"expression": "__import__('os')"}},
    {"name": "x", "op": "python_function", "device": "cpu", "args": {"function": "subprocess.run"}},
    {"name": "x", "op": "external_source", "device": "cpu", "python": "import os"},
])
def test_loading_refuses_code_references(node, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setenv("HEADRACE_TEST_MARKER", str(marker))
    content = {"format": "headrace-pipeline", "format_version": 1, "pipeline": {"batch_size": 1},
               "nodes": [node], "outputs": [["x", 0]]}
    with pytest.raises(PipelineFileError, match="'x'"):
        Pipeline.load(json.dumps(content))
    assert not marker.exists()


def test_graph_package_has_no_code_loading():
    """No pickle, eval, exec or dynamic import in the modules that read a pipeline file (the modules pickle and
    marshal as whole words: DALI's argument name `py_callback_pickler` is accepted by name only)."""
    package = Path(__import__("headrace").__file__).parent
    for module in ("pipeline_file.py", "schema.py", "graph.py", "pipeline.py", "types.py", "fn.py"):
        source = (package / module).read_text()
        for forbidden in ("eval(", "exec(", "__import__", "importlib", "compile("):
            assert forbidden not in source, (module, forbidden)
        for word in ("pickle", "marshal"):
            assert not re.search(rf"\b{word}\b", source), (module, word)


# Hostile files (issue 24; the fuzzing is in test_pipeline_file_fuzz.py) ---------------------------------------------

def test_data_values_may_be_non_finite_and_round_trip():
    """NaN and infinities are legitimate data (a NaN fill), so they pass where an argument is a value, not a size."""
    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=3)
    def pipe():
        x = fn.external_source(name="x")
        return fn.pad(fn.cast(x, dtype=types.FLOAT), fill_value=float("nan"), shape=[60, 70, 3])

    text = pipe().serialize()
    assert "NaN" in text
    assert_same_batches(run_fed(pipe()), run_fed(Pipeline.load(text)))


@pytest.mark.parametrize("call, argument, fragment", [
    (lambda x: fn.resize(x, resize_shorter=float("nan")), "resize_shorter", "finite"),
    (lambda x: fn.resize(x, resize_x=float("inf")), "resize_x", "finite"),
    (lambda x: fn.resize(x, resize_shorter=-5), "resize_shorter", ">= 0"),
    (lambda x: fn.resize(x, resize_x=1e9), "resize_x", "<= 65536"),
    (lambda x: fn.crop_mirror_normalize(x, scale=1e39), "scale", "32-bit float"),
    (lambda x: fn.flip(x, horizontal=2**63), "horizontal", "64-bit integer"),
    (lambda x: fn.random.normal(shape=[100_000, 100_000]), "shape", "limit"),
])
def test_the_same_limits_hold_when_the_graph_is_defined(call, argument, fragment):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return call(fn.external_source(name="x"))

    with pytest.raises(SchemaError, match=f"argument '{argument}'.*{re.escape(fragment)}"):
        pipe()


def test_a_bool_is_an_int_argument_as_in_dali(valid):
    """DALI converts an int argument with int(), so True is 1 (a bool argument still refuses 1, as before)."""
    content = copy.deepcopy(valid)
    node_of(content, "Resize")["args"]["minibatch_size"] = True
    loaded = Pipeline.load(json.dumps(content))
    assert next(n for n in loaded.graph.nodes if n.name == "Resize").args["minibatch_size"] == 1


@pytest.mark.parametrize("text, fragment", [
    ('{"format": "headrace-pipeline", "format": "headrace-pipeline"}', "appears twice"),
    ('{"format": "headrace-pipeline", "format_version": true}', "format_version True"),
    ('{"format": "headrace-pipeline", "format_version": 1, "pipeline": {"device_id": true}}', "'device_id'"),
])
def test_ambiguous_json_is_refused(text, fragment):
    with pytest.raises(PipelineFileError, match=re.escape(fragment)):
        Pipeline.load(text)


@pytest.mark.parametrize("text", ["5", '"text"', "null", "[[[]]]", "[" * 50 + "]" * 50, "{}" * 3])
def test_any_json_text_is_parsed_or_refused(text):
    with pytest.raises(PipelineFileError):
        pipeline_file.parse(text)


def test_a_long_chain_of_nodes_loads_without_recursion():
    nodes = [{"name": "x", "op": "external_source"}]
    nodes += [{"name": f"c{i}", "op": "copy", "inputs": [[nodes[-1]["name"] if i == 0 else f"c{i - 1}", 0]]}
              for i in range(3000)]
    content = {"format": "headrace-pipeline", "format_version": 1, "pipeline": {"batch_size": 2},
               "nodes": nodes[::-1], "outputs": [["c2999", 0]]}
    pipe = Pipeline.load(json.dumps(content), device_id=None)
    assert [n.name for n in pipe.graph.nodes][:2] == ["x", "c0"]
    pipe.close()
