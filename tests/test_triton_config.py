"""config.pbtxt generation from a pipeline file: inputs, outputs with inferred dtype/dims, batching, instance
group; the committed model repository is what the generator writes; pipelines that cannot be served are refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from triton_helpers import MODEL_REPOSITORY, PREPROCESS_FILE, REPO, write_model_repository

from headrace import fn, pipeline_def, types
from headrace.errors import SchemaError
from headrace.serving import triton_config
from headrace.serving.server import BACKEND_MODEL_PY, backend_model_py, stub_paths


def test_committed_repository_is_what_the_script_writes(tmp_path):
    write_model_repository(tmp_path)
    for relative in ("preprocess/config.pbtxt", "preprocess/1/pipeline.json", "classifier/config.pbtxt",
                     "classify/config.pbtxt", "classifier/labels.txt", "classifier/1/model.py"):
        assert (tmp_path / relative).read_text() == (MODEL_REPOSITORY / relative).read_text(), relative


def _preprocess_config(out: Path, *options: str) -> str:
    """The preprocess config.pbtxt that scripts/make_model_repository.py writes into `out` with `options`."""
    return (write_model_repository(out, *options) / "preprocess" / "config.pbtxt").read_text()


def test_gpu_repository_has_the_instances_and_delay_that_measured_best(tmp_path):
    """KIND_GPU (the Docker image's default): 8 preprocess instances, no batching delay; options set both."""
    text = _preprocess_config(tmp_path / "gpu", "--kind", "KIND_GPU")
    assert "count: 8\n    kind: KIND_GPU" in text and "max_queue_delay_microseconds: 0\n" in text
    text = _preprocess_config(tmp_path / "set", "--kind", "KIND_GPU", "--instances", "4", "--queue-delay-us", "500")
    assert "count: 4\n    kind: KIND_GPU" in text and "max_queue_delay_microseconds: 500\n" in text


def test_a_negative_batching_delay_is_refused():
    with pytest.raises(SchemaError, match="max_queue_delay_us must be at least 0, got -1"):
        triton_config(PREPROCESS_FILE, "pre", max_queue_delay_us=-1)


def test_backend_model_py_is_the_one_the_launcher_installs():
    """One source: backend/model.py links to the package's model.py, whose text the launcher installs."""
    import headrace.serving

    linked = REPO / "backend" / "model.py"
    assert linked.is_symlink()
    assert linked.resolve() == (Path(headrace.serving.__file__).parent / "model.py").resolve()
    assert linked.read_text() == BACKEND_MODEL_PY


def test_launcher_backend_sees_this_process_import_folders(tmp_path, monkeypatch):
    """The stub's embedded Python ignores PYTHONPATH: the launcher's model.py puts PYTHONPATH's folders and
    headrace's own folder first on sys.path, then imports the backend."""
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}/a:{tmp_path}/b")
    paths = stub_paths()
    assert paths[:2] == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert str(REPO / "packages" / "headrace" / "src") in paths
    source = backend_model_py(paths)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not p.startswith(str(tmp_path))])
    exec(compile(source.replace("from headrace.serving.triton_backend import", "# "), "model.py", "exec"), {})
    assert sys.path[:2] == [f"{tmp_path}/a", f"{tmp_path}/b"] and all(p in sys.path for p in paths)
    assert source.rstrip().endswith(BACKEND_MODEL_PY.rstrip().splitlines()[-1])
    assert backend_model_py(()) == BACKEND_MODEL_PY


def test_preprocess_config():
    text = triton_config(PREPROCESS_FILE, "pre", 16, "KIND_GPU", 2, gpus=[0, 1])
    for line in ('name: "pre"', 'backend: "headrace"', "max_batch_size: 16", 'name: "images"', "TYPE_UINT8",
                 "dims: [ -1 ]", "allow_ragged_batch: true", 'name: "normalized"', "TYPE_FP32",
                 "dims: [ 3, 224, 224 ]", "count: 2", "kind: KIND_GPU", "gpus: [ 0, 1 ]", "dynamic_batching",
                 'string_value: "normalized"'):
        assert line in text, line


def test_extra_backend_parameters():
    text = triton_config(PREPROCESS_FILE, "pre", parameters={"log_timing_every": 50})
    assert 'key: "log_timing_every"\n  value: { string_value: "50" }' in text


def test_execute_timing_logs_the_mean_of_each_part_every_n_calls():
    from headrace.serving.triton_backend import ExecuteTiming

    lines = []
    timing = ExecuteTiming(2, lines.append)
    timing.add(4, 0.001, 0.010, 0.002)
    assert lines == []
    timing.add(2, 0.003, 0.020, 0.004)
    assert lines == ["headrace: execute over 2 calls, 3.0 requests each: read 2.00 ms, pipeline 15.00 ms, "
                     "respond 3.00 ms"]
    timing.add(1, 0.5, 0.5, 0.5)  # counts start again after a line
    assert len(lines) == 1
    off = ExecuteTiming(0, lines.append)
    off.add(1, 1.0, 1.0, 1.0)
    assert off.calls == 0 and len(lines) == 1
    totals = {"decode": 1.0}
    detailed = ExecuteTiming(2, lines.append, lambda: totals)
    totals["decode"] += 0.004  # 4 ms over the two calls: 2 ms per call
    detailed.add(1, 0.0, 0.0, 0.0)
    detailed.add(1, 0.0, 0.0, 0.0)
    assert lines[-1].endswith("respond 0.00 ms, decode 2.00 ms")


@pipeline_def(batch_size=8, num_threads=1, device_id=None)
def _two_outputs():
    raw = fn.external_source(name="raw", dtype=types.UINT8, ndim=3, layout="HWC")
    small = fn.resize(raw, resize_x=64, resize_y=48)
    half = fn.crop_mirror_normalize(small, crop=(32, 40), dtype=types.FLOAT16, output_layout="HWC", name="half")
    flipped = fn.flip(fn.crop(raw, crop=(10, 12)), name="flipped")
    return half, flipped, fn.cast(small, dtype=types.INT16)


def test_inferred_outputs_and_names():
    text = triton_config(_two_outputs(), "m", instance_count=1)
    assert "max_batch_size: 8" in text  # the pipeline's batch_size by default
    assert 'name: "raw"' in text and "dims: [ -1, -1, -1 ]" in text
    assert 'name: "half"\n    data_type: TYPE_FP16\n    dims: [ 32, 40, -1 ]' in text
    assert 'name: "flipped"\n    data_type: TYPE_UINT8\n    dims: [ 10, 12, -1 ]' in text
    assert 'name: "OUTPUT2"\n    data_type: TYPE_INT16\n    dims: [ 48, 64, -1 ]' in text
    renamed = triton_config(_two_outputs(), "m", output_names=["a", "b", "c"], output_dims={"a": [32, 40, 3]})
    assert 'name: "a"\n    data_type: TYPE_FP16\n    dims: [ 32, 40, 3 ]' in renamed


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def _reads_files():
    jpegs, labels = fn.readers.file(file_root="nowhere")
    return fn.decoders.image(jpegs), labels


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def _untyped_input():
    return fn.decoders.image(fn.external_source(name="x"))


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def _unknown_output():
    data = fn.external_source(name="x", dtype=types.FLOAT, ndim=1)
    return data * 2


@pytest.mark.parametrize(("pipeline", "kwargs", "message"), [
    (_reads_files, {}, "readers.file (node '__readers_file_0') reads its own data"),
    (_untyped_input, {}, "external_source 'x': give it dtype= and ndim="),
    (_unknown_output, {}, "output 'OUTPUT0': its dtype or dims cannot be inferred"),
    (_two_outputs, {"max_batch_size": 9}, "max_batch_size must be between 1 and the pipeline's batch_size (8)"),
    (_two_outputs, {"instance_kind": "KIND_TPU"}, "instance_kind must be one of"),
    (_two_outputs, {"output_names": ["a"]}, "1 output names for 3 pipeline outputs"),
])
def test_unservable_pipelines_are_refused(pipeline, kwargs, message):
    with pytest.raises(SchemaError) as info:
        triton_config(pipeline(), "m", **kwargs)
    assert message in str(info.value)


def test_unknown_output_with_overrides():
    text = triton_config(_unknown_output(), "m", output_dtypes={"OUTPUT0": "float32"}, output_dims={"OUTPUT0": [-1]})
    assert 'name: "OUTPUT0"\n    data_type: TYPE_FP32\n    dims: [ -1 ]' in text
