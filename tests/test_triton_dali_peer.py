"""benchmarks/triton_dali, the DALI peer of triton_preprocess.py, on a real tritonserver with DALI's CPU build: an
execute's requests (one or several images each) come back as DALI's own pipeline computes them in this process, and
close to headrace's served model on the same images."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from triton_helpers import NO_SERVER, dali_peer, have_server, jpegs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from triton_preprocess import make_input, write_dali_model, write_headrace_model  # noqa: E402

from headrace.serving import start_server  # noqa: E402

pytestmark = [pytest.mark.triton, pytest.mark.dali, pytest.mark.skipif(not have_server(), reason=NO_SERVER)]
dali = pytest.importorskip("nvidia.dali")

HEADRACE_TOLERANCE = 0.05
"""Normalized units, about 3 pixel levels (a level is 1/58 of one): the two libraries' resizes round a few values
differently by a level on these images (their CPU decodes are the same pixels)."""


def test_dali_peer_serves_what_dali_computes(tmp_path: Path) -> None:
    import tritonclient.grpc as grpc

    repo = tmp_path / "repo"
    write_dali_model(repo / "dali_preprocess", "KIND_CPU", 1, 500, "TYPE_FP32", None, None)
    write_headrace_model(repo / "preprocess", "KIND_CPU", 1, None, 500, None)
    images = jpegs(3, seed=2)
    pipe = dali_peer().build(32, 2, None, "TYPE_FP32", 1.0)
    pipe.feed_input("images", images)
    (want,) = pipe.run()
    want = want.as_array()
    with start_server(repo) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        for i, image in enumerate(images):
            got = client.infer("dali_preprocess", [make_input([image], 0, as_bytes=False)]).as_numpy("normalized")
            assert got.shape == (1, 3, 224, 224) and got.dtype == np.float32
            np.testing.assert_array_equal(got[0], want[i])
            ours = client.infer("preprocess", [make_input([image], 0, as_bytes=False)]).as_numpy("normalized")
            assert np.abs(ours.astype(np.float64) - got).max() <= HEADRACE_TOLERANCE
        two = client.infer("dali_preprocess", [make_input(images, 1, as_bytes=False, count=2)]).as_numpy("normalized")
        np.testing.assert_array_equal(two, want[[1, 1]])
