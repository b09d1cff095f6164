"""A fed batch's decode starts in the GPU stage's CPU stage (MixedDecoder.start_here), before the stage gets to the
decode step: the outputs are the bits of a pipeline that decodes in the step, for small batches (submitted in the
calling thread) and a large one (handed to the two decode lanes); a decode started for a batch whose step never
runs is finished before the decoder decodes again or is released, and the pipeline keeps serving."""

from __future__ import annotations

import time

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
    return next(k.decoder for k in pipe._executor.gpu.kernels() if hasattr(k, "launch_ahead"))


def _served(batches: list[list[np.ndarray]], batch_size: int) -> tuple[list[np.ndarray], decode.MixedDecoder]:
    pipe = served_preprocess(device="gpu", batch_size=batch_size, device_id=0)
    pipe.build()
    decoder = _decoder(pipe)
    handed = []
    to_lanes = decoder._hand_to_lanes
    decoder._hand_to_lanes = lambda *args: handed.append(len(args[0].shapes)) or to_lanes(*args)
    if batch_size >= 2 * decode.SPLIT_FROM:  # the second lane's decoder is made on its thread after the build
        deadline = time.monotonic() + 60
        while decoder.ready_lanes() < decoder.lane_count() and time.monotonic() < deadline:
            pipe.run(images=batches[0])
            time.sleep(0.05)
        assert decoder.lane_count() == decoder.ready_lanes() == 2
    outputs = [pipe.run(images=batch)[0].as_cpu().as_array() for batch in batches]
    decoder.handed_to_lanes = handed
    pipe.close()
    return outputs, decoder


@pytest.mark.gpu
@pytest.mark.parametrize("batch_size", [64, 128])
def test_decodes_started_in_the_cpu_stage_give_the_same_bits(monkeypatch, batch_size):
    """At batch_size 64 every batch is submitted in the calling thread (one lane); at 128 the full batch is split
    over the two lanes as soon as it is prepared."""
    images = _images()
    batches = [[images[0]], [images[1], images[2]], [images[3]] * 5, images * (batch_size // 4), [images[2]]]
    started_outputs, started = _served(batches, batch_size)
    monkeypatch.setattr(decode.MixedDecoder, "start_here", lambda self, prepared, stream: None)
    step_outputs, in_step = _served(batches, batch_size)
    assert started.decoded_ahead >= len(batches) and in_step.decoded_ahead == 0
    # the full batch of 128 goes to the lanes (from the CPU stage, or from the step without the early start)
    lanes = [128] if batch_size == 128 else []
    assert started.handed_to_lanes == lanes and in_step.handed_to_lanes == lanes
    for a, b in zip(started_outputs, step_outputs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_a_started_decode_whose_step_never_runs_is_finished_first():
    """Decodes started for batches that never reach their step (a step before the decoder failed): each is waited
    for before the decoder starts the next, and before `release_memory` drops the decoder; the next batches are
    served with the right values."""
    images = _images()
    pipe = served_preprocess(device="gpu", batch_size=8, device_id=0)
    pipe.build()
    expected = pipe.run(images=[images[0]])[0].as_cpu().as_array()
    decoder, stage = _decoder(pipe), pipe._executor.gpu
    started = []
    for _ in range(3):
        with stage.ctx.active():
            prepared = decoder.prepare([images[1], images[2]], 0, 0)
            decoder.allocate(prepared, stage.ctx.stream)
            decoder.start_here(prepared, stage.ctx.stream)
        assert isinstance(prepared.ahead, decode.StartedHere) and prepared.ahead.started.submitted
        assert all(not s.submitted for s in started)  # the one before was finished by this start
        started.append(prepared.ahead.started)
    pipe.release_memory()
    assert not started[-1].submitted
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
    decoder = _decoder(pipe)
    expected = pipe.run(images=[images[1]])[0].as_cpu().as_array()
    before = decoder.decoded_ahead
    try:
        together = pipe.run(images=[images[1], cut])[0].as_cpu().as_array()
    except SampleError as exc:
        assert exc.sample == 1 and exc.op == "decoders.image", str(exc)
    else:
        np.testing.assert_array_equal(together[:1], expected)
    assert decoder.decoded_ahead == before + 1  # its decode was started in the CPU stage
    np.testing.assert_array_equal(pipe.run(images=[images[1]])[0].as_cpu().as_array(), expected)
    pipe.close()
