"""A python_function served by a real tritonserver: the function's module sits in the model's folder and the
config's allowed_modules parameter trusts it; answers equal `Pipeline.load(..., allowed_modules=...).run`. Without
that parameter the model does not load, and the server's log says which op and module."""

from __future__ import annotations

import contextlib
import importlib
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from triton_helpers import NO_SERVER, have_server

from headrace import Pipeline, fn, pipeline_def, types
from headrace.serving import triton_config

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not have_server(), reason=NO_SERVER)]

MODULE = "served_functions_for_test"
SOURCE = textwrap.dedent('''
    def affine(x):
        return x * 2 + 1
''')


@contextlib.contextmanager
def _importable(folder: Path):
    """MODULE importable from `folder` for the block, and forgotten after it."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(MODULE, None)


def _model(repo: Path, trusted: bool) -> str:
    """A model 'custom' whose pipeline calls MODULE.affine, MODULE trusted by its config or not; returns the
    pipeline file's text."""
    version = repo / "custom" / "1"
    version.mkdir(parents=True)
    (version / f"{MODULE}.py").write_text(SOURCE)
    with _importable(version):
        module = importlib.import_module(MODULE)

        @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=0, prefetch_queue_depth=1)
        def served():
            data = fn.external_source(name="data", dtype=types.FLOAT, ndim=1)
            return fn.python_function(data, function=module.affine, name="affine")

        text = served().serialize()
        text = text.decode() if isinstance(text, bytes) else text
        config = triton_config(Pipeline.load(text, allowed_modules=[MODULE]), "custom",
                               output_dims={"affine": [-1]}, output_dtypes={"affine": np.float32},
                               allowed_modules=[MODULE] if trusted else ())
    (version / "pipeline.json").write_text(text)
    (repo / "custom" / "config.pbtxt").write_text(config)
    return text


def test_served_python_function_matches_the_offline_run(tmp_path):
    import tritonclient.grpc as grpc

    from headrace.serving import start_server

    text = _model(tmp_path / "repo", trusted=True)
    values = np.linspace(-1, 1, 7, dtype=np.float32)
    with start_server(tmp_path / "repo", timeout=120) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        request = grpc.InferInput("data", [1, len(values)], "FP32")
        request.set_data_from_numpy(values[None])
        answer = client.infer("custom", [request]).as_numpy("affine")
    with _importable(tmp_path / "repo" / "custom" / "1"):
        offline = Pipeline.load(text, allowed_modules=[MODULE])
        offline.build()
        (want,) = offline.run(data=[values])
    np.testing.assert_array_equal(answer[0], np.asarray(want[0]))
    np.testing.assert_array_equal(answer[0], values * 2 + 1)


def test_an_untrusted_module_stops_the_model_loading(tmp_path):
    from headrace.serving import start_server
    from headrace.serving.server import ServerError

    _model(tmp_path / "repo", trusted=False)
    with pytest.raises(ServerError) as info:
        start_server(tmp_path / "repo", timeout=60)
    assert f"calls {MODULE}.affine" in str(info.value) and "not trusted" in str(info.value)


def test_config_carries_the_trusted_modules(tmp_path):
    text = _model(tmp_path / "repo", trusted=True)
    config = (tmp_path / "repo" / "custom" / "config.pbtxt").read_text()
    assert 'key: "allowed_modules"' in config and f'string_value: "{MODULE}"' in config
    assert '"function"' in text and f'"module": "{MODULE}"' in text
