"""A fed batch's decode starts in the GPU stage's CPU stage (MixedDecoder.start_here), before the stage gets to the
decode step: the outputs are the bits of a pipeline that decodes in the step, for small batches (decoded in this
thread) and large ones (handed to the lanes); a batch whose later steps fail, or that is dropped before its step
runs, leaves the pipeline serving."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from triton_helpers import served_preprocess

from headrace.data.synthetic import synthetic_image
from headrace.errors import SampleError
from headrace_kernels.gpu import decode
from tests.conftest import encode


def _images() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [encode(synthetic_image(rng, h, w)) for h, w in [(427, 640), (300, 200), (512, 384), (240, 320)]]


def _decoder(pipe) -> decode.MixedDecoder:
    return next(k.decoder for k in pipe._executor.gpu.kernels() if hasattr(k, "start_now"))


def _served(batches: list[list[np.ndarray]]) -> tuple[list[np.ndarray], int]:
    pipe = served_preprocess(device="gpu", batch_size=64, device_id=0)
    pipe.build()
    outputs = [pipe.run(images=batch)[0].as_cpu().as_array() for batch in batches]
    started = _decoder(pipe).decoded_ahead
    pipe.close()
    return outputs, started


@pytest.mark.gpu
def test_decodes_started_in_the_cpu_stage_give_the_same_bits(monkeypatch):
    images = _images()
    batches = [[images[0]], [images[1], images[2]], [images[3]] * 5, images * 16, [images[2]]]  # 64: two lanes
    started_outputs, started = _served(batches)
    monkeypatch.setattr(decode.MixedDecoder, "start_here", lambda self, prepared, stream: None)
    step_outputs, in_step = _served(batches)
    assert started == len(batches) and in_step == 0
    for a, b in zip(started_outputs, step_outputs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_a_started_decode_that_is_never_run_is_waited_for():
    """A decode started ahead and then dropped with its batch (a step before the decoder's run failed) is waited
    for before its code streams and memory go; the decoder then serves the next batches."""
    images = _images()
    pipe = served_preprocess(device="gpu", batch_size=8, device_id=0)
    pipe.build()
    expected = pipe.run(images=[images[0]])[0].as_cpu().as_array()
    decoder, stage = _decoder(pipe), pipe._executor.gpu
    for _ in range(3):
        with stage.ctx.active():
            prepared = decoder.prepare([images[1], images[2]], 0, 0)
            decoder.allocate(prepared, stage.ctx.stream)
            decoder.start_here(prepared, stage.ctx.stream)
        assert isinstance(prepared.ahead, decode.StartedHere)
        del prepared
        gc.collect()
    np.testing.assert_array_equal(pipe.run(images=[images[0]])[0].as_cpu().as_array(), expected)
    pipe.close()


@pytest.mark.gpu
def test_a_cut_image_in_a_started_decode_fails_alone():
    """A JPEG whose header parses and whose body is cut short, its decode started ahead: a GPU decoder that
    refuses it sends it to the CPU fallback, which fails it with an error naming the sample (libjpeg-turbo stops
    at the premature end); one that decodes what is there leaves its batch mate's output as it is alone. Either
    way the next batch is served."""
    images = _images()
    cut = images[0][: len(images[0]) // 3].copy()
    pipe = served_preprocess(device="gpu", batch_size=8, device_id=0)
    pipe.build()
    expected = pipe.run(images=[images[1]])[0].as_cpu().as_array()
    try:
        together = pipe.run(images=[images[1], cut])[0].as_cpu().as_array()
    except SampleError as exc:
        assert exc.sample == 1 and exc.op == "decoders.image", str(exc)
    else:
        np.testing.assert_array_equal(together[:1], expected)
    np.testing.assert_array_equal(pipe.run(images=[images[1]])[0].as_cpu().as_array(), expected)
    pipe.close()
