"""benchmarks/triton_dali, the DALI peer of triton_preprocess.py, on a real tritonserver with DALI's CPU build: the
requests of an execute (one or several images each) come back as DALI's own pipeline computes them in this process,
and close to headrace's served model on the same images."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from triton_helpers import NO_SERVER, dali_peer, have_server, jpegs

pytestmark = [pytest.mark.triton, pytest.mark.dali, pytest.mark.skipif(not have_server(), reason=NO_SERVER)]
grpc = pytest.importorskip("tritonclient.grpc")
pytest.importorskip("nvidia.dali")
pytest.importorskip("torch")  # the peer hands its answers to Triton as torch tensors

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from triton_preprocess import make_input, write_dali_model, write_headrace_model  # noqa: E402

from headrace.serving import start_server  # noqa: E402

HEADRACE_TOLERANCE = 0.05
"""Normalized units, about 3 pixel levels (a level is 1/57-1/58 of one): the two libraries' resizes round a few values
differently by a level on these images (their CPU decodes are the same pixels)."""
GATHER_US = 200_000
"""The peer's dynamic-batching delay here: long enough that requests sent together are run in one execute."""


def test_dali_peer_serves_what_dali_computes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_dali_model(repo / "dali_preprocess", "KIND_CPU", 1, GATHER_US, "TYPE_FP32", None, None)
    write_headrace_model(repo / "preprocess", "KIND_CPU", 1, None, 500, None)
    images = jpegs(3, seed=2)
    pipe = dali_peer().build(32, 2, None, "TYPE_FP32", 1.0)
    pipe.feed_input("images", images)
    (want,) = pipe.run()
    want = want.as_array()
    with start_server(repo) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        got = client.infer("dali_preprocess", [make_input(images, 0, as_bytes=False)]).as_numpy("normalized")
        assert got.shape == (1, 3, 224, 224) and got.dtype == np.float32
        np.testing.assert_array_equal(got[0], want[0])
        ours = client.infer("preprocess", [make_input(images, 0, as_bytes=False)]).as_numpy("normalized")
        assert np.abs(ours.astype(np.float64) - got).max() <= HEADRACE_TOLERANCE

        # requests sent together, one of two images: one execute, each answer its own rows of the batch
        counts = [1, 2, 1, 1]

        def send(i: int) -> np.ndarray:
            tensor = make_input(images, i, as_bytes=False, count=counts[i])
            return grpc.InferenceServerClient(server.grpc_url).infer("dali_preprocess", [tensor]).as_numpy(
                "normalized")

        before = _executions(client)
        with ThreadPoolExecutor(len(counts)) as pool:
            answers = list(pool.map(send, range(len(counts))))
        for i, answer in enumerate(answers):
            np.testing.assert_array_equal(answer, want[[i % len(images)] * counts[i]])
        inferences, executions = np.subtract(_executions(client), before)
        assert inferences == sum(counts) and executions < len(counts)  # some requests shared an execute


def _executions(client) -> tuple[int, int]:
    """The peer's (images served, executes run) so far, from Triton's statistics."""
    stats = client.get_inference_statistics("dali_preprocess", as_json=True)["model_stats"][0]
    return int(stats["inference_count"]), int(stats["execution_count"])
