"""BatchRunner, the request logic of the Triton backend, run directly (no server): merged runs split back per
request, per-request errors that leave the other requests of the same batch answered, smaller-than-batch runs."""

from __future__ import annotations

import numpy as np
import pytest
from triton_helpers import PREPROCESS_FILE, jpegs, offline_outputs, padded

from headrace.pipeline import Pipeline
from headrace.serving.batching import BatchRunner, InputSpec, RequestError

IMAGES = InputSpec("images", np.dtype(np.uint8), (-1,))


@pytest.fixture(scope="module")
def runner():
    pipe = Pipeline.load(PREPROCESS_FILE, batch_size=6, num_threads=2)
    yield BatchRunner(pipe, [IMAGES], ["normalized"])
    pipe.close()


@pytest.fixture(scope="module")
def reference():
    """Each test image's output, computed one image per run by a separate pipeline."""
    return offline_outputs()


def test_merged_requests_are_split_back(runner, reference):
    images = jpegs()
    # 1 + 3 + 2 = 6 samples in one run, then 2 more in a second run (batch_size 6)
    requests = [{"images": padded(images[0:1])}, {"images": padded(images[1:4])}, {"images": padded(images[4:6])},
                {"images": padded(images[6:8])}]
    results = runner.run(requests)
    expected = [reference[0:1], reference[1:4], reference[4:6], reference[6:8]]
    for result, want in zip(results, expected, strict=True):
        assert not isinstance(result, RequestError), result
        (normalized,) = result
        assert normalized.dtype == np.float32 and normalized.shape == (len(want), 3, 224, 224)
        np.testing.assert_array_equal(normalized, np.stack(want))


def test_corrupt_image_fails_only_its_request(runner, reference):
    images = jpegs()
    corrupt = np.frombuffer(b"\xff\xd8 this is not really a JPEG " * 4, np.uint8)
    requests = [{"images": padded(images[0:2])}, {"images": padded([images[2], corrupt])},
                {"images": padded(images[3:5])}]
    results = runner.run(requests)
    assert isinstance(results[1], RequestError)
    assert "sample 1 of this request" in str(results[1]) and "decoders.image" in str(results[1])
    np.testing.assert_array_equal(results[0][0], np.stack(reference[0:2]))
    np.testing.assert_array_equal(results[2][0], np.stack(reference[3:5]))
    # and the runner keeps working
    np.testing.assert_array_equal(runner.run([{"images": padded(images[5:6])}])[0][0], reference[5][None])


@pytest.mark.parametrize(("request_", "message"), [
    ({}, "lacks input(s) ['images']"),
    ({"images": np.zeros((1, 10), np.float32)}, "element type float32, the model expects uint8"),
    ({"images": np.zeros((1, 2, 10), np.uint8)}, "has shape [1, 2, 10]"),
    ({"images": np.zeros((7, 10), np.uint8)}, "7 samples, more than the pipeline's batch_size (6)"),
    ({"images": np.zeros((1, 10), np.uint8), "extra": np.zeros((1, 1), np.uint8)}, "unknown input(s) ['extra']"),
])
def test_bad_requests_get_their_own_error(runner, reference, request_, message):
    good = {"images": padded(jpegs(1))}
    results = runner.run([good, request_, good])
    assert isinstance(results[1], RequestError) and message in str(results[1])
    for result in (results[0], results[2]):
        np.testing.assert_array_equal(result[0], reference[0][None])


def test_fed_batch_above_batch_size_is_refused():
    pipe = Pipeline.load(PREPROCESS_FILE, batch_size=2)
    with pytest.raises(ValueError, match="more than the pipeline's batch_size"):
        pipe.run(images=jpegs(3))
    pipe.close()


def test_smaller_batches_reuse_the_full_size_buffers():
    """A server feeds batches of any size up to batch_size: they share the pooled full-size output buffers
    instead of pooling one set per size."""
    pipe = Pipeline.load(PREPROCESS_FILE, batch_size=6, num_threads=1)
    images = jpegs(6)
    for size in (1, 6, 2, 5, 3, 4, 1):
        (normalized,) = pipe.run(images=images[:size])
        assert normalized.as_array().shape == (size, 3, 224, 224)
        del normalized
    assert pipe._executor.buffers.nbytes == 6 * 3 * 224 * 224 * 4
    pipe.close()
