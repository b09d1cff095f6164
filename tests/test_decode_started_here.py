"""The bookkeeping of decodes started ahead in the calling thread (MixedDecoder.start_here), without a GPU: the
decoder keeps its last started decode until the step waits for it, and finishes one nobody waited for (its batch
failed before its step) before it starts another, decodes in the step, or is released; a StartedHere dropped
unfinished waits for its decode. nvImageCodec's calls stand in as recording fakes; tests/test_gpu_start_now.py
runs the real ones."""

from __future__ import annotations

import gc
import threading
import types

import numpy as np
import pytest

from headrace.schema import get_schema
from headrace_kernels.gpu import decode


class _Started:
    """capi.StartedDecode's part that StartedHere uses: `finish()` once, recorded in `log`."""

    def __init__(self, log: list, name: str):
        self.log, self.name, self.submitted = log, name, True

    def finish(self) -> np.ndarray:
        if self.submitted:
            self.submitted = False
            self.log.append(self.name)
        return np.zeros(1, np.uint32)


@pytest.fixture
def decoder(monkeypatch):
    args = get_schema("decoders.image").resolve({"device": "mixed", "hw_decoder_load": 1.0})
    made = decode.MixedDecoder(args, 0, 2, False, capacity=8)
    lane = types.SimpleNamespace(lock=threading.Lock())
    made.log, made.names = [], iter(f"decode {i}" for i in range(100))
    monkeypatch.setattr(made, "_lane", lambda j: lane)
    monkeypatch.setattr(made, "_first_decoder", lambda stream: "decoder")
    monkeypatch.setattr(made, "_start", lambda *args: _Started(made.log, next(made.names)))
    monkeypatch.setattr(made, "_decode_calls", lambda *args, **kwargs: np.zeros(1, np.uint32))
    return made


def _prepared() -> decode.Prepared:
    return decode.Prepared(streams=object(), windows=[None], encoded=[np.zeros(4, np.uint8)],
                           shapes=np.array([[4, 4, 3]]), memory=object())


def test_the_step_waits_for_its_own_started_decode(decoder):
    prepared = _prepared()
    decoder.start_here(prepared, stream=None)
    assert isinstance(prepared.ahead, decode.StartedHere) and decoder.log == []
    decoder._decode_c(prepared, None, False, None)
    assert decoder.log == ["decode 0"] and decoder._here is None and prepared.ahead is None


def test_a_decode_nobody_waited_for_is_finished_before_the_next_one(decoder):
    dropped, next_batch = _prepared(), _prepared()
    decoder.start_here(dropped, stream=None)  # its batch fails before the decode step: nobody waits
    decoder.start_here(next_batch, stream=None)
    assert decoder.log == ["decode 0"]  # finished before the next was submitted
    decoder._decode_c(next_batch, None, False, None)
    assert decoder.log == ["decode 0", "decode 1"]


def test_a_decode_nobody_waited_for_is_finished_before_a_decode_in_the_step(decoder):
    dropped = _prepared()
    decoder.start_here(dropped, stream=None)
    decoder._decode_c(_prepared(), None, False, None)  # a batch decoded in its step (not started ahead)
    assert decoder.log == ["decode 0"] and decoder._here is None


def test_release_finishes_a_pending_started_decode(decoder):
    decoder.start_here(_prepared(), stream=None)
    decoder.release()
    assert decoder.log == ["decode 0"] and decoder._here is None


def test_a_started_decode_dropped_unfinished_waits_for_it():
    log = []
    prepared = _prepared()
    here = decode.StartedHere(threading.Lock(), _Started(log, "dropped"), 1, prepared, None)
    assert here.keep[2] is prepared.memory  # what the decode writes stays alive with it
    del here
    gc.collect()
    assert log == ["dropped"]
