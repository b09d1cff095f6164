"""GPU data through `if` on data (`enable_conditionals=True`): per-sample branches over GPU tensors (a GPU step in a
branch runs on the sub-batch that takes it; merge picks per sample on the GPU), predicates computed on the GPU
and brought back with `.cpu()`, max-length unrolling, the pipeline file. Every result is compared with the same
pipeline run on the CPU and with numpy; all of these ops are bit-exact on the GPU, so the comparisons are exact
(random_resized_crop: within 1 level, as its GPU-vs-CPU test)."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import Pipeline, fn, pipeline_def, types
from headrace.errors import SchemaError

pytestmark = pytest.mark.gpu

BATCH = 8
VALUES = [np.array(v, dtype=np.int32) for v in range(BATCH)]


def _images() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 200, (6 + v, 10, 3)).astype(np.uint8) for v in range(BATCH)]


IMAGES = _images()


def _outputs(pipe, **feeds) -> list[list[np.ndarray]]:
    outs = pipe.run(**feeds)
    return [[np.asarray(o.at(i)) for i in range(len(o))] for o in (x.as_cpu() if x.device == "gpu" else x
                                                                       for x in outs)]


def branches(device: str):
    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, enable_conditionals=True, seed=5)
    def pipe():
        x = fn.external_source(name="x")
        image = fn.external_source(name="images")
        if device == "gpu":
            image = image.gpu()
        if x > 5:
            out = fn.flip(image, horizontal=1) * 2
        elif x > 2 and not (x == 4):
            out = fn.transpose(image, perm=[1, 0, 2])
        else:
            out = fn.cast(image, dtype=types.INT32) - 100
        total = fn.reductions.sum(out, axes=(0, 1))
        return out, total

    return pipe()


FEEDS = dict(x=list(VALUES), images=list(IMAGES))


def _expected_branch(v: int, image: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if v > 5:
        return image[:, ::-1].astype(dtype) * 2
    if v > 2 and v != 4:
        return image.transpose(1, 0, 2)
    return image.astype(np.int32) - 100


def test_each_sample_takes_its_own_branch_with_gpu_tensors():
    gpu_pipe, cpu_pipe = branches("gpu"), branches("cpu")
    gpu_out, gpu_total = _outputs(gpu_pipe, **FEEDS)
    cpu_out, cpu_total = _outputs(cpu_pipe, **FEEDS)
    for v in range(BATCH):
        expected = _expected_branch(v, IMAGES[v], cpu_out[v].dtype)
        np.testing.assert_array_equal(cpu_out[v], expected)
        np.testing.assert_array_equal(gpu_out[v], cpu_out[v])
        assert gpu_out[v].dtype == cpu_out[v].dtype
        np.testing.assert_array_equal(gpu_total[v], cpu_total[v])
        assert gpu_total[v].dtype == cpu_total[v].dtype


def test_gpu_branches_round_trip_through_the_pipeline_file():
    pipe = branches("gpu")
    loaded = Pipeline.load(pipe.serialize())
    for a, b in zip(_outputs(pipe, **FEEDS)[0], _outputs(loaded, **FEEDS)[0], strict=True):
        np.testing.assert_array_equal(a, b)


def predicate_from_gpu(device: str):
    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, enable_conditionals=True, seed=6)
    def pipe():
        image = fn.external_source(source=lambda: list(IMAGES), batch=True)
        if device == "gpu":
            image = image.gpu()
        brightness = fn.reductions.mean(image)
        if (brightness.cpu() if device == "gpu" else brightness) > 99.5:
            image = fn.cast(image, dtype=types.FLOAT) * 0.5
            peak = fn.reductions.max(image)
            if (peak.cpu() if device == "gpu" else peak) > 99:
                image = image - 1
        else:
            image = fn.cast(image, dtype=types.FLOAT) + 0.25
        return image, brightness

    return pipe()


def test_predicate_computed_on_the_gpu_and_brought_back_with_cpu():
    gpu_image, gpu_brightness = _outputs(predicate_from_gpu("gpu"))
    cpu_image, cpu_brightness = _outputs(predicate_from_gpu("cpu"))
    means = [float(im.mean()) for im in IMAGES]
    assert any(m > 99.5 for m in means) and any(m <= 99.5 for m in means), means
    for v, image in enumerate(IMAGES):
        expected = image.astype(np.float32) * np.float32(0.5) if means[v] > 99.5 else \
            image.astype(np.float32) + np.float32(0.25)
        if means[v] > 99.5 and expected.max() > 99:
            expected = expected - np.float32(1)
        np.testing.assert_array_equal(cpu_image[v], expected)
        np.testing.assert_array_equal(gpu_image[v], cpu_image[v])
        np.testing.assert_array_equal(gpu_brightness[v], cpu_brightness[v])


def test_a_condition_on_the_gpu_without_cpu_is_a_clear_error():
    @pipeline_def(batch_size=2, num_threads=1, device_id=0, enable_conditionals=True)
    def pipe():
        image = fn.external_source(source=lambda: IMAGES[:2], batch=True).gpu()
        if fn.reductions.mean(image) > 100:
            image = image + 1
        return image

    with pytest.raises(SchemaError, match=r"condition .* is on the GPU.*\.cpu\(\)"):
        pipe()


def test_branches_no_sample_takes_and_branches_every_sample_takes():
    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: list(VALUES), batch=True)
        image = fn.external_source(source=lambda: list(IMAGES), batch=True).gpu()
        if x > 100:
            image = fn.flip(image, vertical=1)
        if x >= 0:
            image = image + 1
        return image

    (out,) = _outputs(pipe())
    for v in range(BATCH):
        np.testing.assert_array_equal(out[v], IMAGES[v] + 1)


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, enable_conditionals=True, seed=9)
def random_crop_in_a_branch():
    x = fn.external_source(source=lambda: list(VALUES), batch=True)
    image = fn.external_source(source=lambda: [np.tile(IMAGES[v][:6, :10], (10, 8, 1)) for v in range(BATCH)],
                               batch=True).gpu()
    everywhere = fn.random_resized_crop(image, size=[16, 16], seed=21), fn.resize(image, size=[16, 16])
    if x % 3 == 1:
        out = fn.random_resized_crop(image, size=[16, 16], seed=21)
    else:
        out = fn.resize(image, size=[16, 16])
    return (out, *everywhere)


def test_random_ops_in_a_branch_keep_each_samples_random_stream():
    """A random op run on a branch's sub-batch draws, for each sample, what it draws when run on the whole batch
    (its stream is keyed by the sample's place in the batch), so the two agree exactly."""
    out, cropped, resized = _outputs(random_crop_in_a_branch())
    for v in range(BATCH):
        np.testing.assert_array_equal(out[v], cropped[v] if v % 3 == 1 else resized[v])


MAX_REPEATS = 5


def unrolled(device: str):
    """Max-length unrolling: `for _ in range(repeats)` with a per-sample `repeats`, written as a bounded loop over
    the maximum with a per-sample condition; the steps run on GPU data."""

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, enable_conditionals=True, seed=11)
    def pipe():
        image = fn.external_source(source=lambda: [np.full((2, 3), v, np.float32) for v in range(BATCH)],
                                   batch=True)
        if device == "gpu":
            image = image.gpu()
        repeats = fn.random.uniform(values=list(range(MAX_REPEATS + 1)), dtype=types.INT32)
        for i in range(MAX_REPEATS):
            if repeats > i:
                image = image * 2 + 1
        return image, repeats

    return pipe()


def test_max_length_unrolling_on_gpu_data():
    pipe = unrolled("gpu")
    image, repeats = pipe.run()
    assert image.device == "gpu"
    reps = repeats.as_array()
    assert len(set(reps.tolist())) > 1, "the seed should give different counts"
    cpu_images, cpu_repeats = unrolled("cpu").run()
    for images, counts in ((image.as_cpu(), reps), (cpu_images, cpu_repeats.as_array())):
        for v in range(BATCH):
            expected = float(v)
            for _ in range(counts[v]):
                expected = expected * 2 + 1
            np.testing.assert_array_equal(images.at(v), np.full((2, 3), expected, np.float32))
