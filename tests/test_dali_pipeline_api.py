"""DALI's Pipeline methods and properties that ported code calls, in headrace and in DALI's CPU build (marker dali) with
the same script: the constructor's positional order, `Pipeline.current()` while a pipeline is defined, the executor
options reported back, the queue sizes of a split prefetch depth, `num_outputs`, the declared `output_dtype` /
`output_ndim` / `output_layout` and the check of every run against them, `feed_input(data_node=...)`,
`checkpoint(filename=...)`, `start_py_workers()`, `save_graph_to_dot_file()` (the same op-to-op edges), the type
conversions `types.to_numpy_type` / `types.to_dali_type`, and the numba plugin's paths (`plugin.numba.fn` as an
attribute, the legacy `NumbaFunction` with DALI's positional arguments). Exact."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
from ops_support import HAS_DALI, needs_dali

import headrace

APIS = ["headrace", pytest.param("dali", marks=needs_dali)]


def api(name: str) -> SimpleNamespace:
    if name == "headrace":
        return SimpleNamespace(fn=headrace.fn, types=headrace.types, Pipeline=headrace.Pipeline,
                               pipeline_def=headrace.pipeline_def, errors=(headrace.errors.SchemaError,))
    dali = importlib.import_module("nvidia.dali")
    return SimpleNamespace(fn=dali.fn, types=dali.types, Pipeline=dali.Pipeline, pipeline_def=dali.pipeline_def,
                           errors=(RuntimeError,))


@pytest.mark.parametrize("name", APIS)
def test_current_is_the_pipeline_being_defined(name):
    a, seen = api(name), {}

    @a.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def pipe():
        seen["current"] = a.Pipeline.current()
        seen["batch_size"] = a.Pipeline.current().max_batch_size
        return a.fn.random.uniform(range=[0, 1])

    built = pipe()
    assert seen["current"] is built and seen["batch_size"] == 3
    assert a.Pipeline.current() is None
    other = a.Pipeline(batch_size=2, num_threads=1, device_id=None)
    a.Pipeline.push_current(other)
    assert a.Pipeline.current() is other
    a.Pipeline.pop_current()
    assert a.Pipeline.current() is None


@pytest.mark.parametrize("name", APIS)
def test_options_queue_sizes_and_outputs_are_reported_as_dali(name):
    a = api(name)

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1,
                    prefetch_queue_depth={"cpu_size": 3, "gpu_size": 2})
    def pipe():
        return a.fn.random.uniform(range=[0, 1]), a.fn.random.uniform(range=[0, 1], shape=[2])

    built = pipe()
    built.build()
    assert (built.exec_async, built.exec_pipelined, built.set_affinity, built.enable_memory_stats) == \
        (True, True, False, False)
    assert (built.exec_separated, built.cpu_queue_size, built.gpu_queue_size) == (True, 3, 2)
    assert built.num_outputs == 2
    assert built.output_dtype() == [None, None] and built.output_ndim() == [None, None]
    assert [o.as_array().shape for o in built.run()] == [(2,), (2, 2)]


@pytest.mark.parametrize("name", APIS)
@pytest.mark.parametrize("declared, fails", [({"output_dtype": "INT32"}, True), ({"output_ndim": 2}, True),
                                             ({"output_dtype": "FLOAT", "output_ndim": 0}, True),
                                             ({"output_dtype": "FLOAT"}, False),
                                             ({"output_dtype": ["FLOAT", None], "output_ndim": [0, 1]}, False),
                                             ({"output_ndim": [None, 2]}, True)])
def test_declared_output_types_are_checked_on_every_run(name, declared, fails):
    a = api(name)

    def dali_type(value):
        if isinstance(value, list):
            return [dali_type(v) for v in value]
        return getattr(a.types, value) if isinstance(value, str) else value

    options = {k: dali_type(v) for k, v in declared.items()}

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1, **options)
    def pipe():
        return a.fn.random.uniform(range=[0, 1]), a.fn.random.uniform(range=[0, 1], shape=[2])

    built = pipe()
    built.build()
    if fails:
        with pytest.raises(a.errors, match="output"):
            built.run()
    else:
        built.run()
        expected = options.get("output_dtype")
        assert built.output_dtype() == (expected if isinstance(expected, list) else [expected] * 2)


@pytest.mark.parametrize("name", APIS)
def test_feed_input_takes_dali_keyword_data_node(name):
    a = api(name)
    pipe = a.Pipeline(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1, exec_async=False,
                      exec_pipelined=False)
    with pipe:
        source = a.fn.external_source(name="x")
        pipe.set_outputs(source + 1)
    pipe.build()
    pipe.feed_input(data_node="x", data=np.array([[1], [2]], np.int32))
    np.testing.assert_array_equal(pipe.run()[0].as_array(), [[2], [3]])


@pytest.mark.parametrize("name", APIS)
def test_checkpoint_takes_dali_keyword_filename_and_resumes(name, tmp_path):
    a = api(name)

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=5, enable_checkpointing=True)
    def pipe():
        return a.fn.random.uniform(range=[0, 1])

    first = pipe()
    first.build()
    first.run()
    path = tmp_path / "checkpoint"
    first.checkpoint(filename=str(path))
    assert path.exists()
    expected = first.run()[0].as_array()
    resumed = pipe(checkpoint=path.read_bytes() if name == "dali" else str(path))
    resumed.build()
    np.testing.assert_array_equal(resumed.run()[0].as_array(), expected)


def test_start_py_workers_builds_the_pipeline():
    calls = []

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None, py_num_workers=1, py_start_method="spawn")
    def pipe():
        return headrace.fn.external_source(source=_sample, batch=False, parallel=True)

    built = pipe()
    built.start_py_workers()
    calls.append([int(v) for v in built.run()[0].as_array().ravel()])
    built.close()
    assert calls == [[0, 1]]


def _sample(info) -> np.ndarray:
    return np.array([info.idx_in_epoch], np.int32)


@pytest.mark.dali
@pytest.mark.skipif(not HAS_DALI, reason="nvidia-dali-cuda130 is not installed")
@pytest.mark.parametrize("type_name", ["UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
                                       "FLOAT16", "FLOAT", "FLOAT64", "BOOL"])
def test_type_conversions_as_dali(type_name):
    ours, theirs = api("headrace").types, api("dali").types
    assert ours.to_numpy_type(getattr(ours, type_name)) is theirs.to_numpy_type(getattr(theirs, type_name))
    numpy_type = theirs.to_numpy_type(getattr(theirs, type_name))
    assert int(ours.to_dali_type(numpy_type)) == int(theirs.to_dali_type(numpy_type))
    with pytest.raises(TypeError, match="could not be converted"):
        ours.to_dali_type(np.complex64)


@pytest.mark.parametrize("name", APIS)
def test_positional_arguments_in_dali_order(name):
    a = api(name)
    pipe = a.Pipeline(4, 1, None, 7, True, 3, True, 0, False)  # batch_size .. set_affinity, as DALI's signature
    assert (pipe.max_batch_size, pipe.num_threads, pipe.seed, pipe.prefetch_queue_depth) == (4, 1, 7, 3)
    assert (pipe.exec_pipelined, pipe.exec_async, pipe.set_affinity) == (True, True, False)


@pytest.mark.parametrize("name", APIS)
@pytest.mark.parametrize("layout, fails", [("HWC", False), (["HWC"], False), ("XYZ", True), (None, False)])
def test_declared_output_layouts_are_checked_on_every_run(name, layout, fails):
    a = api(name)

    @a.pipeline_def(batch_size=1, num_threads=1, device_id=None, output_layout=layout, py_callback_pickler=None,
                    stream_policy=None, concurrency=None)
    def pipe():
        return a.fn.external_source(source=lambda: [np.zeros((2, 2, 3), np.uint8)], layout="HWC")

    built = pipe()
    built.build()
    if fails:
        with pytest.raises(a.errors, match="ayout"):
            built.run()
    else:
        assert built.run()[0].layout() == "HWC"


def _dot_edges(text: str, names: set[str]) -> set[tuple[str, str]]:
    """The op-to-op edges of DOT text between the nodes `names` (DALI adds nodes of its own)."""
    edges = set()
    for line in text.splitlines():
        if "->" in line and "[label" not in line:
            left, right = (part.strip().strip(";").split("[")[0].strip('"') for part in line.split("->"))
            if left in names and right in names:
                edges.add((left, right))
    return edges


@pytest.mark.parametrize("name", APIS)
def test_save_graph_to_dot_file(name, tmp_path):
    a = api(name)

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        images = a.fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, layout="HWC", name="src")
        angle = a.fn.random.uniform(range=[-10, 10], name="angle")
        return a.fn.rotate(a.fn.flip(images, name="flipper"), angle=angle, name="rotator"), \
            a.fn.cast(images, dtype=a.types.FLOAT, name="caster")

    built = pipe()
    built.build()
    path = tmp_path / "graph.dot"
    built.save_graph_to_dot_file(str(path))
    text = path.read_text()
    assert text.startswith("digraph") and text.rstrip().endswith("}")
    names = {"src", "angle", "flipper", "rotator", "caster"}
    assert _dot_edges(text, names) == {("src", "flipper"), ("flipper", "rotator"), ("angle", "rotator"),
                                       ("src", "caster")}
    built.save_graph_to_dot_file(str(path), show_tensors=True, use_colors=True)
    assert "shape=box" in path.read_text() and "color=" in path.read_text()


def _double(out0, in0):
    out0[:] = in0 * 2


@pytest.mark.parametrize("name", APIS)
def test_numba_plugin_paths_as_dali(name):
    plugin = importlib.import_module("headrace.plugin.numba" if name == "headrace" else "nvidia.dali.plugin.numba")
    a = api(name)
    data = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 4), np.float32)]
    types = [a.types.FLOAT], [a.types.FLOAT], [2], [2]

    @a.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = a.fn.external_source(source=lambda: data)
        by_function = plugin.fn.experimental.numba_function(x, run_fn=_double, out_types=types[0], in_types=types[1],
                                                            outs_ndim=types[2], ins_ndim=types[3])
        by_class = plugin.NumbaFunction(_double, *types)(x)  # the legacy class, DALI's positional order
        return by_function, by_class

    built = pipe()
    built.build()
    for out in built.run():
        for i, sample in enumerate(data):
            np.testing.assert_array_equal(np.array(out.at(i)), sample * 2)
