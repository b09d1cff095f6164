"""The executor: determinism regardless of threads and prefetch depth, safe buffer reuse, and external_source."""

from __future__ import annotations

import time

import numpy as np
import pytest

from headrace import Pipeline, SampleError, fn, pipeline_def, types


def augmenting_pipeline(root, **params):
    @pipeline_def(batch_size=6, device_id=None, seed=21, **params)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs)
        images = fn.resize(images, resize_x=24, resize_y=20)
        images = fn.flip(images, vertical=fn.random.coin_flip(probability=0.3))
        noise = fn.random.normal(stddev=3.0, shape=[1])
        images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(), crop=(16, 16),
                                          crop_pos_x=fn.random.uniform(range=[0, 1]), mean=[128.0], std=[64.0])
        return images + noise, labels

    return pipe()


def stream(pipe: Pipeline, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    out = [tuple(b.as_array().copy() for b in pipe.run()) for _ in range(n)]
    pipe.close()
    return out


def assert_same_stream(a, b):
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            np.testing.assert_array_equal(u, v)


def test_same_stream_for_any_thread_count(image_folder):
    reference = stream(augmenting_pipeline(image_folder, num_threads=1), 8)  # 48 samples: past the 37-image epoch
    for threads in (2, 4):
        assert_same_stream(reference, stream(augmenting_pipeline(image_folder, num_threads=threads), 8))


def test_same_stream_for_any_prefetch_depth(image_folder):
    one = stream(augmenting_pipeline(image_folder, num_threads=2, prefetch_queue_depth=1), 7)
    three = stream(augmenting_pipeline(image_folder, num_threads=2, prefetch_queue_depth=3), 7)
    assert_same_stream(one, three)


@pytest.mark.parametrize("beyond", [True, False])
def test_batches_computed_ahead_of_the_consumer(image_folder, beyond):
    """prefetch_queue_depth batches wait in the queue, and one more is computed beside them unless the executor
    option prefetch_beyond_queue is False; the batches are the same either way."""
    pipe = augmenting_pipeline(image_folder, num_threads=2, prefetch_queue_depth=2,
                               executor_options={"prefetch_beyond_queue": beyond})
    pipe.build()
    computed = []
    run = pipe._executor.run
    pipe._executor.run = lambda iteration: (computed.append(iteration), run(iteration))[1]
    got = [tuple(b.as_array().copy() for b in pipe.run()) for _ in range(3)]
    deadline = time.monotonic() + 10
    while len(computed) < 3 + 2 + beyond and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # what it would compute beyond that, it would have begun by now
    assert len(computed) == 3 + 2 + beyond
    got += [tuple(b.as_array().copy() for b in pipe.run()) for _ in range(4)]
    pipe.close()
    assert_same_stream(stream(augmenting_pipeline(image_folder, num_threads=2), 7), got)


def test_held_batches_are_never_overwritten(image_folder):
    """Hold batches (the batch objects, arrays taken from them, DLPack views), run on well past the buffer pool's
    size, then check every held batch still has the values it had when it was returned."""
    pipe = augmenting_pipeline(image_folder, num_threads=2, prefetch_queue_depth=2)
    held, snapshots, samples = [], [], []
    for i in range(12):
        images, labels = pipe.run()
        if i % 3 == 1:  # only one sample of the batch is kept: the batch object itself is dropped
            samples.append((images.at(2), images.at(2).copy()))
        if i % 3 == 0:
            view = images.as_array() if i % 2 else np.from_dlpack(images)
            held.append((images, view, labels))
            snapshots.append((images.as_array().copy(), labels.as_array().copy()))
    for _ in range(10):
        pipe.run()
    for (images, view, labels), (image_copy, label_copy) in zip(held, snapshots, strict=True):
        np.testing.assert_array_equal(images.as_array(), image_copy)
        np.testing.assert_array_equal(view, image_copy)
        np.testing.assert_array_equal(labels.as_array(), label_copy)
    for sample, sample_copy in samples:
        np.testing.assert_array_equal(sample, sample_copy)
    pipe.close()


def test_dropped_batches_let_buffers_be_reused(image_folder):
    """Memory stays flat when the user drops each batch: the pool does not grow past its bound."""
    depth = 2
    pipe = augmenting_pipeline(image_folder, num_threads=1, prefetch_queue_depth=depth)
    batch_bytes = sum(out.as_array().nbytes for out in pipe.run())
    peak = 0
    for _ in range(16):
        pipe.run()
        peak = max(peak, pipe._executor.buffers.nbytes)
    # in use at once, at most: the batches queued, the one being made, the one handed out and the one before it
    # (dropped, its buffers not yet back): a bound that does not grow with the number of batches run
    assert 0 < peak <= (depth + 3) * batch_bytes
    pipe.close()


# external_source ----------------------------------------------------------------------------------------------------

def batch_of(value: int, size: int = 3) -> list[np.ndarray]:
    return [np.full((2, 2), value + i, np.int32) for i in range(size)]


def source_pipeline(**source_args):
    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def pipe():
        return fn.external_source(name="src", **source_args) * 2

    return pipe()


def values(batch) -> list[int]:
    return [int(batch.at(i)[0, 0]) for i in range(len(batch))]


def test_callable_source():
    calls = []

    def source():
        calls.append(len(calls))
        return batch_of(10 * len(calls))

    pipe = source_pipeline(source=source)
    assert values(pipe.run()[0]) == [20, 22, 24]
    assert values(pipe.run()[0]) == [40, 42, 44]
    pipe.close()


def test_callable_source_with_batch_info():
    pipe = source_pipeline(source=lambda info: batch_of(100 * info), batch_info=True)
    assert [values(pipe.run()[0])[0] for _ in range(3)] == [0, 200, 400]
    pipe.close()


def test_iterable_source_without_cycle_ends_the_epoch_and_resets():
    data = [batch_of(0), batch_of(10)]
    pipe = source_pipeline(source=data, cycle=False)
    assert values(pipe.run()[0]) == [0, 2, 4]
    assert values(pipe.run()[0]) == [20, 22, 24]
    with pytest.raises(StopIteration):
        pipe.run()
    pipe.reset()
    assert values(pipe.run()[0]) == [0, 2, 4]  # a new epoch starts from the beginning
    assert values(pipe.run()[0]) == [20, 22, 24]
    with pytest.raises(StopIteration):
        pipe.run()
    pipe.close()


@pytest.mark.parametrize("cycle", [True, "quiet"])
def test_iterable_source_with_cycle_restarts_by_itself(cycle):
    pipe = source_pipeline(source=[batch_of(0), batch_of(10)], cycle=cycle)
    assert [values(pipe.run()[0])[0] for _ in range(5)] == [0, 20, 0, 20, 0]
    pipe.close()


def test_generator_function_source():
    def generate():
        for i in range(2):
            yield batch_of(i)

    pipe = source_pipeline(source=generate(), cycle=False)
    assert [values(pipe.run()[0])[0] for _ in range(2)] == [0, 2]
    with pytest.raises(StopIteration):
        pipe.run()
    pipe.close()


def test_per_sample_source():
    seen = []

    def sample(info):
        seen.append((info.idx_in_epoch, info.idx_in_batch, info.iteration))
        return np.array([info.idx_in_epoch], np.int64)

    pipe = source_pipeline(source=sample, batch=False)
    assert [int(v[0]) for v in pipe.run()[0]] == [0, 2, 4]
    assert [int(v[0]) for v in pipe.run()[0]] == [6, 8, 10]
    pipe.close()
    assert sorted(seen)[:4] == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 0, 1)]


def test_source_dtype_and_ndim_are_checked():
    pipe = source_pipeline(source=lambda: [np.zeros((2, 2), np.float32)] * 3, dtype=types.INT32)
    with pytest.raises(Exception, match="src.*float32.*int32"):
        pipe.run()
    pipe.close()
    pipe = source_pipeline(source=lambda: [np.zeros(2, np.int32)] * 3, ndim=2)
    with pytest.raises(Exception, match="src.*1 dims.*expected 2"):
        pipe.run()
    pipe.close()


def test_fed_by_name_on_a_loaded_pipeline_file(tmp_path):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        images = fn.external_source(name="images", source=lambda: [np.zeros((8, 8, 3), np.uint8)] * 2)
        scale = fn.external_source(name="scale", source=lambda: [np.float32(1)] * 2)
        return fn.resize(images, resize_x=4, resize_y=4) * scale

    path = tmp_path / "serve.json"
    pipe().serialize(path)
    loaded = Pipeline.load(path)
    assert sorted(loaded.fed_inputs) == ["images", "scale"]
    images = [np.full((8, 8, 3), 10, np.uint8), np.full((6, 10, 3), 200, np.uint8)]
    (out,) = loaded.run(images=images, scale=[np.float32(0.5), np.float32(2.0)])
    np.testing.assert_allclose(out.at(0), np.full((4, 4, 3), 5.0))
    np.testing.assert_allclose(out.at(1), np.full((4, 4, 3), 400.0))
    loaded.feed_input("images", np.stack([images[0], images[0]]))  # an (N, ...) array is a batch too
    loaded.feed_input("scale", [np.float32(1.0)] * 2)
    np.testing.assert_allclose(loaded.run()[0].as_array(), np.full((2, 4, 4, 3), 10.0))
    with pytest.raises(Exception, match="no external_source named 'imgs'"):
        loaded.run(imgs=images)
    with pytest.raises(Exception, match="'scale'.*was fed no data"):
        loaded.run(images=images)
    loaded.close()


def test_sample_error_names_the_external_source_sample():
    pipe = source_pipeline(source=lambda: [np.zeros(3, np.int32), np.zeros(3, np.int32), np.zeros(3, np.int32)])
    pipe.close()

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def bad():
        return fn.decoders.image(fn.external_source(name="blobs", source=lambda: [np.zeros(4, np.uint8)] * 2))

    p = bad()
    with pytest.raises(SampleError, match=r"decoders\.image.*blobs\[0\]\[0\]"):
        p.run()
    p.close()


def test_batched_argument_values_equal_per_sample_ones():
    """arg_values (one conversion for a batch of numeric scalars) gives arg_value's values, types included, and
    falls back to it (and its errors) for anything else."""
    from headrace.engine.context import arg_value, arg_values
    from headrace.schema import Arg
    from headrace_kernels.columns import Column

    cases = [(Arg("mirror", "int"), [np.array([v], np.int32) for v in (0, 1, 1, 0)]),
             (Arg("angle", "float"), [np.array(v, np.float32) for v in (0.5, -3.25, 7.0)]),
             (Arg("angle", "float"), [np.array([v], np.int64) for v in (2, 3)]),
             (Arg("flag", "bool"), [np.array([v]) for v in (True, False)]),
             (Arg("mirror", "int"), [np.array([1], np.int32), np.array([2], np.int64)]),  # mixed: per sample
             (Arg("mirror", "int"), [np.array([1], np.int64), np.array([2], np.int32)]),  # narrower: same values
             (Arg("angle", "float"), [np.array(0.1, np.float32), np.array(0.1, np.float64)]),  # wider: per sample
             (Arg("angle", "float"), [np.array(0.5, np.float64), 0.25, np.float32(0.1)]),  # not all arrays
             (Arg("angle", "float"), [np.array([0.5]), np.array(0.25)]),  # shapes (1,) and (): per sample
             (Arg("anchor", "float", list_of=True), [np.array([1.0, 2.0], np.float32)] * 2)]
    for values in (np.array([0, 1, 1], np.int32), np.array([[0.5], [-3.25]], np.float32), np.array([True, False])):
        arg = Arg("x", {"i": "int", "f": "float", "b": "bool"}[values.dtype.kind])
        cases.append((arg, Column.of_dense(values)))  # a batch kernel's column: read as its array
    for arg, samples in cases:
        expected = [arg_value(s, arg) for s in samples]
        got = arg_values(samples, arg, len(samples))
        assert got == expected and [type(v) for v in got] == [type(v) for v in expected]
    with pytest.raises(ValueError, match="one value per sample"):
        arg_values([np.array([1, 2], np.int32)] * 2, Arg("mirror", "int"), 2)


def test_a_closed_pipeline_leaves_no_cycles_of_failed_batches():
    """Batches that failed in the prefetcher (their errors queued, one still being put when the pipeline closes)
    leave no reference cycle: the errors' tracebacks hold the prefetcher's frames, which must not hold them back."""
    import gc
    import time

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1)
    def pipe():
        return fn.external_source(source=lambda info: np.arange(1, dtype=np.int32), batch=False)[2]

    gc.collect()
    gc.disable()
    try:
        p = pipe()
        with pytest.raises(SampleError):
            p.run()
        time.sleep(0.3)  # the prefetcher fills its queue with more failed batches
        p.close()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = sorted({f"{o.f_code.co_filename.rsplit('/', 1)[-1]}:{o.f_lineno}" for o in gc.garbage
                       if type(o).__name__ == "frame" and "headrace" in o.f_code.co_filename})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left, left
