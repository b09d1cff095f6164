"""Kernels write collected outputs into the batch buffer (SampleContext.output), and a CPU pipeline computes the next
batch while this one finishes (engine.read_ahead with overlap): the outputs are those of the plain path, and user
functions still see one batch at a time."""

from __future__ import annotations

import custom_functions as user
import numpy as np

from headrace import fn, pipeline_def, types
from headrace.batch import BufferPool
from headrace.engine.context import Collector


def _normalized(root, crop: bool, copy_after: bool, threads: int = 2):
    @pipeline_def(batch_size=6, num_threads=threads, device_id=None, seed=9)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW",
                                          crop=(24, 20) if crop else None, out_of_bounds_policy="pad",
                                          mirror=fn.random.coin_flip(),
                                          mean=[120.0, 110.0, 100.0], std=[60.0, 50.0, 40.0])
        return (fn.copy(images) if copy_after else images), labels

    return pipe()


def _batches(pipe, count: int) -> list[list[np.ndarray]]:
    out = []
    for _ in range(count):
        images, labels = pipe.run()
        out.append([[np.array(images.at(i)) for i in range(len(images))], np.array(labels.as_array())])
    pipe.close()
    return out


def _assert_same(got, want) -> None:
    for (images, labels), (images_want, labels_want) in zip(got, want, strict=True):
        np.testing.assert_array_equal(labels, labels_want)
        for a, b in zip(images, images_want, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def test_rows_written_in_place_equal_the_copied_samples(image_folder):
    """crop_mirror_normalize writes the collected batch itself; the same op feeding fn.copy (its output not
    collected) gives the same bits, over an epoch end and for one and two threads."""
    want = _batches(_normalized(image_folder, crop=True, copy_after=True, threads=1), 8)
    for threads in (1, 2):
        _assert_same(_batches(_normalized(image_folder, crop=True, copy_after=False, threads=threads), 8), want)


def test_samples_of_other_shapes_after_rows_were_given(image_folder):
    """Without a crop every sample has its own shape: the rows handed out for the first shape stay valid when the
    batch turns ragged."""
    pipe = _normalized(image_folder, crop=False, copy_after=False)
    images, _ = pipe.run()
    assert len({images.at(i).shape for i in range(len(images))}) > 1
    pipe.close()
    want = _batches(_normalized(image_folder, crop=False, copy_after=True), 4)
    _assert_same(_batches(_normalized(image_folder, crop=False, copy_after=False), 4), want)


def test_a_row_is_given_only_where_the_sample_fits():
    collector = Collector(BufferPool(per_key=2), size=3, capacity=4)
    row = collector.row(0, (2, 5), np.float32)
    row[...] = 7.0
    collector.put(0, row)
    assert collector.row(1, (2, 6), np.float32) is None  # another shape: the kernel gets a new array
    assert collector.row(1, (2, 5), np.float64) is None
    collector.put(1, np.full((2, 5), 3.0, np.float32))  # copied
    assert not collector.ragged
    np.testing.assert_array_equal(collector.buffer[:2], np.stack([np.full((2, 5), 7.0), np.full((2, 5), 3.0)]))
    collector.put(2, np.zeros((2, 6), np.float32))
    assert collector.ragged
    assert collector.row(2, (2, 5), np.float32) is None


def test_user_functions_see_one_batch_at_a_time():
    """A python_function may keep state from sample to sample: its pipeline's batches are not computed two at a
    time, so it sees every sample of batch i before any of batch i+1."""
    def source(info):
        return [np.array([info.iteration, i], np.int32) for i in range(4)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1)
    def pipe():
        samples = fn.external_source(source=source, batch=True, batch_info=True)
        return fn.python_function(samples, function=user.records_batch)

    user.CALLS.clear()
    p = pipe()
    for _ in range(5):
        p.run()
    p.close()
    assert user.CALLS[:20] == sorted(user.CALLS[:20])
