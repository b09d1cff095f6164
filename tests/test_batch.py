"""The batch object: numpy conversion, DLPack, ragged batches, layouts and where each sample came from."""

from __future__ import annotations

import numpy as np
import pytest
from oprun import run_headrace

from headrace import TensorListCPU, fn, pipeline_def


def test_dense_batch_views_and_dlpack():
    samples = [np.full((2, 3), i, np.float32) for i in range(4)]
    batch = TensorListCPU(np.stack(samples), layout="HW", source_info=[f"s{i}" for i in range(4)])
    assert len(batch) == 4 and batch.is_dense_tensor() and batch.layout() == "HW"
    assert batch.shape() == [(2, 3)] * 4 and batch.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(batch), np.stack(samples))
    assert np.shares_memory(batch.as_array(), batch.at(2))  # no copies
    via_dlpack = np.from_dlpack(batch)
    assert np.shares_memory(via_dlpack, batch.as_array())
    assert batch.__dlpack_device__()[0] == 1  # kDLCPU
    assert np.asarray(batch, dtype=np.float64).dtype == np.float64
    assert batch.source_info(3) == "s3" and [int(s[0, 0]) for s in batch] == [0, 1, 2, 3]


def test_ragged_batch():
    batch = TensorListCPU([np.zeros((2, 2)), np.zeros((3, 1))])
    assert not batch.is_dense_tensor()
    assert batch.shape() == [(2, 2), (3, 1)]
    with pytest.raises(ValueError, match="different shapes"):
        batch.as_array()
    stacked = TensorListCPU([np.ones((2, 2)), np.ones((2, 2))])
    assert stacked.as_tensor().as_array().shape == (2, 2, 2)


def test_pipeline_outputs_carry_layout_and_source(image_folder):
    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(image_folder))
        images = fn.decoders.image(jpegs)
        return images, fn.crop_mirror_normalize(fn.resize(images, size=[8, 8]), output_layout="CHW"), labels

    images, normalized, labels = pipe().run()
    assert not images.is_dense_tensor() or len({s.shape for s in images}) == 1
    assert normalized.layout() == "CHW" and normalized.as_array().shape == (3, 3, 8, 8)
    assert labels.as_array().dtype == np.int32
    source = images.source_info(0)  # as DALI gives it: the path relative to file_root
    assert (image_folder / source).is_file() and not source.startswith("/") and source.endswith(".jpg")


def test_decoded_images_of_different_sizes_stay_separate(rgb_image):
    import cv2

    blobs = [cv2.imencode(".png", rgb_image[:h, :w])[1].ravel() for h, w in [(30, 40), (50, 20)]]
    out = run_headrace(lambda x: fn.decoders.image(x), blobs)[0]
    assert [o.shape for o in out] == [(30, 40, 3), (50, 20, 3)]


def test_the_buffer_pool_keeps_the_shapes_used_last():
    """Outputs whose shape changes every batch (audio padded to the batch's longest sample) do not make the pool
    keep a buffer of every shape they ever had; a shape in use keeps being reused."""
    from headrace.batch import BufferPool

    pool = BufferPool(per_key=2, max_shapes=4)
    steady = pool.get((8, 3), np.float32).ctypes.data  # its address; the buffer itself is let go
    for length in range(100):
        pool.get((8, 10 + length), np.float32)
        assert pool.get((8, 3), np.float32).ctypes.data == steady  # free again: the same buffer
    assert len(pool._buffers) == 4
    assert pool.nbytes <= 4 * 2 * 8 * 110 * 4
    held = pool.get((8, 3), np.float32)
    assert pool.get((8, 3), np.float32).ctypes.data != held.ctypes.data  # held by a user: not handed out twice


def test_padded_audio_batches_keep_the_pool_bounded():
    """Each batch's pad output has its own length; the executor's pool stays within its bound of shapes."""
    lengths = iter(range(5, 500, 7))

    def source():
        n = next(lengths)
        return [np.ones(n + i, np.float32) for i in range(4)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1)
    def pipe():
        return fn.pad(fn.external_source(source=source, batch=True), fill_value=0)

    p = pipe()
    for _ in range(40):
        (out,) = p.run()
        assert out.as_array().shape[1] == len(out.at(3)) and out.at(0)[-1] == 0
    pool = p._executor.buffers
    assert len(pool._buffers) <= pool.max_shapes
    p.close()
