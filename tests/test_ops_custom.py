"""User functions in a pipeline: python_function, dl_tensor_python_function and experimental.numba_function
against DALI's CPU build and plain numpy (exact: the same arithmetic on the same arrays); a user op declared with
headrace.plugin; pipeline files that name user code by reference and load it only from trusted modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import custom_functions as user
import numpy as np
import pytest
from ops_support import needs_dali

from headrace import Pipeline, fn, pipeline_def, types
from headrace.errors import PipelineFileError, SampleError, SchemaError

TESTS = Path(__file__).parent
SAMPLES = [np.arange(6, dtype=np.float32).reshape(2, 3), np.full((4, 1), 0.5, np.float32),
           np.linspace(-1, 1, 10, dtype=np.float32).reshape(5, 2)]


def _samples():
    return [s.copy() for s in SAMPLES]


def _run(build, samples=None, device="cpu", **params):
    samples = SAMPLES if samples is None else samples

    @pipeline_def(batch_size=len(samples), num_threads=1, device_id=0 if device == "gpu" else None, **params)
    def pipe():
        x = fn.external_source(source=lambda: [s.copy() for s in samples])
        return build(x.gpu() if device == "gpu" else x)

    p = pipe()
    p.build()
    outputs = p.run()
    p.close()
    return [[np.asarray(o.as_cpu()[i] if device == "gpu" else o[i]) for i in range(len(o))] for o in outputs]


def _dali_run(build, samples=None):
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    samples = SAMPLES if samples is None else samples

    @dali_pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, exec_dynamic=True)
    def pipe():
        return build(dfn, dfn.external_source(source=lambda: [s.copy() for s in samples]))

    p = pipe()
    p.build()
    return [[np.asarray(o[i]) for i in range(len(o))] for o in p.run()]


def _equal(got, want):
    assert len(got) == len(want)
    for g_out, w_out in zip(got, want, strict=True):
        for g, w in zip(g_out, w_out, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def test_python_function_per_sample_matches_numpy():
    (got,) = _run(lambda x: fn.python_function(x, function=user.affine))
    _equal([got], [[user.affine(s) for s in SAMPLES]])


def test_python_function_per_batch_and_several_outputs():
    got = _run(lambda x: (fn.python_function(x, function=user.batch_plus_one, batch_processing=True),
                          *fn.python_function(x, x, function=user.sum_and_difference, num_outputs=2)))
    _equal(got, [[s + 1 for s in SAMPLES], [s + s for s in SAMPLES], [s - s for s in SAMPLES]])


def test_output_layouts_reach_the_output():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.zeros((2, 2, 3), np.uint8)])
        return fn.python_function(x, function=user.affine, output_layouts="HWC")

    p = pipe()
    p.build()
    assert p.outputs[0].op.output_specs[0].layout == "HWC"


@needs_dali[0]
@needs_dali[1]
def test_python_function_and_dl_tensor_match_dali():
    def build(api, x):
        return (api.python_function(x, function=user.affine),
                api.dl_tensor_python_function(x, function=user.tripled_through_torch))

    _equal(_run(lambda x: build(fn, x)), _dali_run(build))


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("batch", [False, True])
def test_numba_function_matches_dali(batch):
    from nvidia.dali import types as dali_types
    from nvidia.dali.plugin.numba.fn.experimental import numba_function as dali_numba

    from headrace.plugin.numba.fn.experimental import numba_function

    run_fn = user.transpose_batch if batch else user.transpose_plus_one

    def kwargs(t):
        return dict(run_fn=run_fn, setup_fn=user.swap_shape, out_types=[t.FLOAT], in_types=[t.FLOAT],
                    outs_ndim=[2], ins_ndim=[2], batch_processing=batch)

    got = _run(lambda x: numba_function(x, **kwargs(types)))
    want = _dali_run(lambda api, x: dali_numba(x, **kwargs(dali_types)))
    _equal(got, want)
    _equal(got, [[s.T + (0 if batch else 1) for s in SAMPLES]])


def test_numba_function_without_setup_keeps_the_input_shape():
    got = _run(lambda x: fn.experimental.numba_function(x, run_fn=user.transpose_plus_one, out_types=[types.FLOAT],
                                                        in_types=[types.FLOAT], outs_ndim=[2], ins_ndim=[2]),
               samples=[np.arange(9, dtype=np.float32).reshape(3, 3)])
    _equal(got, [[np.arange(9, dtype=np.float32).reshape(3, 3).T + 1]])


def test_numba_function_refuses_undeclared_input_types():
    with pytest.raises(SampleError, match=r"numba_function.*input 0 of sample 0 is float32.*declare int32"):
        _run(lambda x: fn.experimental.numba_function(x, run_fn=user.transpose_plus_one, out_types=[types.INT32],
                                                      in_types=[types.INT32], outs_ndim=[2], ins_ndim=[2]))


def test_a_raising_function_names_the_op_the_sample_and_the_users_line():
    samples = [np.ones(3, np.float32), -np.ones(3, np.float32)]
    with pytest.raises(SampleError) as caught:
        _run(lambda x: fn.python_function(x, function=user.fails_on_negative), samples=samples)
    message = str(caught.value)
    assert "python_function" in message and "sample 1" in message and "negative input" in message
    assert "custom_functions.py" in message and 'raise ValueError("negative input")' in message


def test_wrong_outputs_are_named():
    with pytest.raises(SampleError, match=r"output 0 of sample 0 has element type <U12"):
        _run(lambda x: fn.python_function(x, function=user.returns_text))
    with pytest.raises(SampleError, match=r"num_outputs is 3, and the function returned 2 values for sample 0"):
        _run(lambda x: fn.python_function(x, x, function=user.sum_and_difference, num_outputs=3))


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_worker_processes_give_the_serial_outputs(start_method):
    workers = dict(num_workers=2, worker_start_method=start_method)
    got = _run(lambda x: (fn.python_function(x, function=user.affine, **workers),
                          *fn.python_function(x, x, function=user.sum_and_difference, num_outputs=2, **workers)))
    _equal(got, [[user.affine(s) for s in SAMPLES], [s + s for s in SAMPLES], [s - s for s in SAMPLES]])


def test_a_function_failing_in_a_worker_names_the_op_and_the_error():
    samples = [np.ones(3, np.float32), -np.ones(3, np.float32)]
    with pytest.raises(SampleError, match=r"python_function .*worker process.*ValueError: negative input"):
        _run(lambda x: fn.python_function(x, function=user.fails_on_negative, num_workers=2), samples=samples)
    with pytest.raises(SchemaError, match="worker_start_method"):
        _run(lambda x: fn.python_function(x, function=user.affine, num_workers=2, worker_start_method="thread"))


def test_user_op_declared_with_the_plugin_api():
    (got,) = _run(lambda x: fn.custom_functions_test.scale_add(x, scale=3.0, offset=1.0))
    _equal([got], [[s * 3 + 1 for s in SAMPLES]])
    with pytest.raises(SchemaError, match="scale_add.*unknown argument 'sclae'.*Did you mean 'scale'"):
        _run(lambda x: fn.custom_functions_test.scale_add(x, sclae=3.0))


def test_a_stateful_user_reader_resumes_from_a_checkpoint():
    @pipeline_def(batch_size=3, num_threads=1, device_id=None, enable_checkpointing=True)
    def counting():
        return fn.custom_functions_test.counter(start=10)

    pipe = counting()
    pipe.build()
    for _ in range(2):
        pipe.run()
    state = pipe.checkpoint()
    (want,) = pipe.run()
    again = counting(checkpoint=state)
    again.build()
    (got,) = again.run()
    assert [int(np.asarray(got[i])[0]) for i in range(3)] == [int(np.asarray(want[i])[0]) for i in range(3)]
    assert [int(np.asarray(want[i])[0]) for i in range(3)] == [16, 17, 18]


# Pipeline files: user code by reference, loaded only from trusted modules
@pipeline_def(batch_size=3, num_threads=1, device_id=None)
def _with_user_code():
    x = fn.external_source(name="x")
    return fn.python_function(fn.custom_functions_test.scale_add(x, scale=2.0), function=user.affine)


def _feed(pipe):
    pipe.build()
    pipe.feed_input("x", _samples())
    return [np.asarray(t) for t in pipe.run()[0]]


def test_a_file_stores_functions_by_reference_and_loads_them_when_trusted():
    pipe = _with_user_code()
    text = pipe.serialize()
    content = json.loads(text)
    nodes = {n["op"]: n for n in content["nodes"]}
    reference = nodes["python_function"]["args"]["function"]
    assert reference["module"] == "custom_functions" and reference["qualname"] == "affine"
    assert len(reference["sha256"]) == 64
    assert nodes[user.USER_OP]["plugin"] == "custom_functions"
    for got, want in zip(_feed(Pipeline.load(text, allowed_modules=["custom_functions"])), _feed(pipe), strict=True):
        np.testing.assert_array_equal(got, want)


def test_an_untrusted_module_is_refused_naming_the_op_and_module():
    with pytest.raises(PipelineFileError, match=r"op 'custom_functions_test.scale_add' \(node .*\) is declared by "
                                                r"module 'custom_functions', which is not trusted"):
        Pipeline.load(_with_user_code().serialize())

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def function_only():
        return fn.python_function(fn.external_source(name="x"), function=user.affine)

    with pytest.raises(PipelineFileError, match=r"python_function \(node .*\) argument 'function' calls "
                                                r"custom_functions.affine.*not trusted"):
        Pipeline.load(function_only().serialize(), allowed_modules=["custom_functions_other", "custom"])


def test_a_changed_source_is_a_hash_error():
    content = json.loads(_with_user_code().serialize())
    for node in content["nodes"]:
        if node["op"] == "python_function":
            node["args"]["function"]["sha256"] = "0" * 64
    with pytest.raises(PipelineFileError, match=r"source of custom_functions.affine changed"):
        Pipeline.load(json.dumps(content), allowed_modules=["custom_functions"])


def test_a_lambda_cannot_be_stored():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return fn.python_function(fn.external_source(name="x"), function=lambda v: v)

    with pytest.raises(SchemaError, match=r"python_function \(node .*\) argument 'function'.*lambda"):
        pipe().serialize()


def test_loading_imports_nothing_untrusted(tmp_path):
    """In a fresh interpreter: a refused load leaves the user's module unimported; an allowed one imports it."""
    path = tmp_path / "user.json"
    _with_user_code().serialize(str(path))
    script = f"""
import sys
from headrace import Pipeline
from headrace.errors import PipelineFileError
try:
    Pipeline.load({str(path)!r})
except PipelineFileError:
    pass
print("imported" if "custom_functions" in sys.modules else "not imported")
Pipeline.load({str(path)!r}, allowed_modules=["custom_functions"])
print("imported" if "custom_functions" in sys.modules else "not imported")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["not", "imported", "imported"]


# GPU: the functions get CuPy arrays (python_function), DLPack capsules of GPU memory, or run as numba.cuda kernels
@pytest.mark.gpu
def test_python_function_on_the_gpu_gets_cupy_arrays():
    pytest.importorskip("cupy")
    _equal(_run(lambda x: fn.python_function(x, function=user.cupy_affine), device="gpu"),
           _run(lambda x: fn.python_function(x, function=user.affine)))


@pytest.mark.gpu
def test_dl_tensor_function_on_the_gpu_runs_torch_on_device():
    pytest.importorskip("cupy")
    _equal(_run(lambda x: fn.dl_tensor_python_function(x, function=user.tripled_through_torch), device="gpu"),
           _run(lambda x: fn.dl_tensor_python_function(x, function=user.tripled_through_torch)))


@pytest.mark.gpu
def test_user_op_on_the_gpu_matches_its_cpu_kernel():
    pytest.importorskip("cupy")
    _equal(_run(lambda x: fn.custom_functions_test.scale_add(x, scale=3.0, offset=1.0), device="gpu"),
           _run(lambda x: fn.custom_functions_test.scale_add(x, scale=3.0, offset=1.0)))


@pytest.mark.gpu
def test_numba_cuda_kernel_on_the_gpu():
    pytest.importorskip("cupy")
    if user.cuda is None or not user.cuda.is_available():
        pytest.skip("numba's CUDA target is not available")
    try:  # numba-cuda itself must launch here (some builds fail on numpy 2.4: np.row_stack is gone)
        probe = user.cuda.device_array(4, np.float32)
        user.cuda.jit(user.double_cuda)[1, 4](probe, user.cuda.to_device(np.ones(4, np.float32)))
    except AttributeError as exc:
        pytest.skip(f"numba-cuda cannot launch a kernel on this machine: {exc}")
    samples = [np.arange(100, dtype=np.float32), np.arange(7, dtype=np.float32)]
    got = _run(lambda x: fn.experimental.numba_function(x, run_fn=user.double_cuda, out_types=[types.FLOAT],
                                                        in_types=[types.FLOAT], outs_ndim=[1], ins_ndim=[1],
                                                        blocks=[4, 1, 1], threads_per_block=[32, 1, 1]),
               samples=samples, device="gpu")
    _equal(got, [[2 * s for s in samples]])
