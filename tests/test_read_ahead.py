"""A CPU pipeline reads batch i+1 while batch i's ops run (engine.read_ahead): the outputs, the readers' checkpoint
states and where an error surfaces are those of the pipeline without it (executor option lookahead="off")."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import fn, pipeline_def, types


def _train(image_folder, lookahead: str):
    @pipeline_def(batch_size=8, num_threads=2, device_id=None, seed=5, enable_checkpointing=True,
                  executor_options={"lookahead": lookahead})
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(image_folder), random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB)
        images = fn.resize(images, resize_x=32, resize_y=24)
        flipped = fn.flip(images, horizontal=fn.random.coin_flip())
        return fn.normalize(flipped, batch=True), labels  # a whole-batch op after the per-sample ones

    return pipe()


def _batches(pipe, count: int) -> list[list[np.ndarray]]:
    return [[np.asarray(out.as_array()) for out in pipe.run()] for _ in range(count)]


def test_outputs_are_those_without_it(image_folder):
    """Across epoch ends (37 files, batches of 8), every batch equals the sequential pipeline's bit for bit."""
    ahead, plain = _train(image_folder, "before"), _train(image_folder, "off")
    got, want = _batches(ahead, 12), _batches(plain, 12)
    for a, b in zip(got, want, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    ahead.close()
    plain.close()


def test_a_checkpoint_resumes_bit_identically(image_folder):
    """The readers' state a checkpoint saves is the state after the batches consumed, not after the one read
    ahead: a pipeline restored from it continues with the same batches."""
    pipe = _train(image_folder, "before")
    _batches(pipe, 3)
    saved = pipe.checkpoint()
    want = _batches(pipe, 4)
    restored = _train(image_folder, "before")
    restored.restore(saved)
    got = _batches(restored, 4)
    for a, b in zip(got, want, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    pipe.close()
    restored.close()


def test_an_error_reading_a_later_batch_surfaces_at_that_batch():
    """A source failing at batch 2 fails the third run, not the second (whose ops ran while it was read)."""
    def source(info):
        if info.iteration == 2:
            raise ValueError("broken batch 2")
        return np.full((3,), info.iteration, np.int32)

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1)
    def pipe():
        return fn.external_source(source=source, batch=False) * 2

    p = pipe()
    for iteration in range(2):
        (out,) = p.run()
        assert np.asarray(out.as_array())[0, 0] == 2 * iteration
    with pytest.raises(Exception, match="broken batch 2"):
        p.run()
    p.close()
