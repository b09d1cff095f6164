"""headrace_kernels.gpu.events against CuPy's own events on the device: a recorded event passes when the work
queued before it is done, a stream told to wait for it runs after it, and a fresh thread can record."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp():
    import cupy

    return cupy


def _busy(cp, stream, n: int = 1 << 24):
    """Queue a few milliseconds of work on `stream`; returns its output."""
    with stream:
        x = cp.arange(n, dtype=cp.float32)
        for _ in range(20):
            x = cp.sqrt(x * x + 1.0)
    return x


def test_a_recorded_event_passes_when_the_work_before_it_is_done(cp):
    from headrace_kernels.gpu import events

    stream = cp.cuda.Stream(non_blocking=True)
    out = _busy(cp, stream)
    event = events.record(stream)
    event.synchronize()
    assert event.done
    np.testing.assert_allclose(float(out[-1].get()), np.float32(1 << 24) - 1, rtol=1e-3)


def test_a_stream_waits_for_an_event_of_another(cp):
    from headrace_kernels.gpu import events

    producer, consumer = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    data = _busy(cp, producer)
    events.wait(consumer, events.record(producer))
    with consumer:
        copy = data + 0  # reads what the producer wrote, ordered by the wait alone
    consumer.synchronize()
    np.testing.assert_array_equal(copy[-8:].get(), data[-8:].get())
    cupy_event = producer.record()  # CuPy's events are waited for the same way
    events.wait(consumer, cupy_event)
    consumer.synchronize()
    assert cupy_event.done


def test_a_new_thread_records_without_a_runtime_call_first(cp):
    from headrace_kernels.gpu import events

    stream = cp.cuda.Stream(non_blocking=True)
    seen = []

    def record():
        event = events.record(stream)
        event.synchronize()
        seen.append(event.done)

    thread = threading.Thread(target=record)
    thread.start()
    thread.join()
    assert seen == [True]
