"""BackgroundRunner, the Triton backend's `respond_in_background` mode, run directly (no server): every request is
answered once, in order, with the same values as a run in the calling thread; requests queued during a run share
the next one; one bad request, one failing answer or a failing run leaves the worker serving."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from triton_helpers import PREPROCESS_FILE, jpegs, offline_outputs, padded

from headrace.pipeline import Pipeline
from headrace.serving.background import BackgroundRunner, Pending
from headrace.serving.batching import BatchRunner, InputSpec, RequestError
from headrace.serving.triton_backend import background_options

IMAGES = InputSpec("images", np.dtype(np.uint8), (-1,))


class RecordingRunner(BatchRunner):
    """A BatchRunner that records how many requests each of its runs took."""

    def __init__(self, *args):
        super().__init__(*args)
        self.runs: list[int] = []

    def run(self, requests):
        self.runs.append(len(requests))
        return super().run(requests)


@pytest.fixture(scope="module")
def pipe():
    pipe = Pipeline.load(PREPROCESS_FILE, batch_size=8, num_threads=2)
    yield pipe
    pipe.close()


@pytest.fixture(scope="module")
def reference():
    """Each test image's output, one image per run of the preprocess pipeline."""
    return offline_outputs()


class Answers:
    """Where the requests' answers go: one slot per request, and an event once all have come."""

    def __init__(self, count: int):
        self.results: list = [None] * count
        self.order: list[int] = []
        self.came = threading.Condition()
        self.release = threading.Event()

    def to(self, slot: int):
        def answer(result):
            with self.came:
                self.results[slot] = result
                self.order.append(slot)
                self.came.notify_all()
        return answer

    def holding(self, slot: int):
        """An answer for `slot` that then holds the worker until `release` is set: requests handed over meanwhile
        queue up behind the run."""
        def answer(result):
            self.to(slot)(result)
            self.release.wait(10)
        return answer

    def wait_for(self, count: int | None = None, timeout: float = 30) -> bool:
        """Whether `count` answers (default: all) came within `timeout` seconds."""
        with self.came:
            return self.came.wait_for(lambda: len(self.order) >= (count or len(self.results)), timeout)


def _serve(pipe, errors: list[str] | None = None, waiting: int = 8) -> tuple[RecordingRunner, BackgroundRunner]:
    runner = RecordingRunner(pipe, [IMAGES], ["normalized"])
    return runner, BackgroundRunner(runner, (errors if errors is not None else []).append, waiting=waiting)


def test_requests_queued_during_a_run_share_the_next(pipe, reference):
    images = jpegs()
    runner, background = _serve(pipe)
    answers = Answers(5)
    background.submit([Pending({"images": padded(images[0:1])}, answers.holding(0))])
    assert answers.wait_for(1)  # the worker is in its first run
    background.submit([Pending({"images": padded(images[1:3])}, answers.to(1)),
                       Pending({"images": padded(images[3:4])}, answers.to(2))])
    background.submit([Pending({"images": padded(images[4:5])}, answers.to(3))])
    background.submit([Pending({"images": padded(images[5:8])}, answers.to(4))])
    answers.release.set()
    assert answers.wait_for()
    background.close()
    assert runner.runs == [1, 4]  # the first alone, the four queued behind it in one run
    assert answers.order == [0, 1, 2, 3, 4]
    for result, (lo, hi) in zip(answers.results, [(0, 1), (1, 3), (3, 4), (4, 5), (5, 8)], strict=True):
        assert not isinstance(result, RequestError), result
        np.testing.assert_array_equal(result[0], np.stack(reference[lo:hi]))


def test_a_hand_over_waits_while_one_waits_already(pipe, reference):
    """With one hand-over allowed to wait (the default), a third submit blocks until the worker takes the second."""
    images = jpegs()
    _, background = _serve(pipe, waiting=1)
    answers = Answers(3)
    background.submit([Pending({"images": padded(images[0:1])}, answers.holding(0))])
    assert answers.wait_for(1)
    background.submit([Pending({"images": padded(images[1:2])}, answers.to(1))])
    third = threading.Thread(target=background.submit, args=([Pending({"images": padded(images[2:3])},
                                                                      answers.to(2))],))
    third.start()
    third.join(0.5)
    assert third.is_alive()  # blocked: the second hand-over still waits
    answers.release.set()
    third.join(10)
    assert not third.is_alive() and answers.wait_for()
    background.close()
    assert answers.order == [0, 1, 2]
    for i, result in enumerate(answers.results):
        np.testing.assert_array_equal(result[0], reference[i][None])


def test_with_no_queue_a_hand_over_waits_until_taken(pipe, reference):
    """`waiting=0`: a submit returns only once the worker has taken its requests, so a second one blocks while the
    worker is still in its first run."""
    images = jpegs()
    _, background = _serve(pipe, waiting=0)
    answers = Answers(2)
    lone = threading.Thread(target=background.submit,
                            args=([Pending({"images": padded(images[0:1])}, answers.holding(0))],))
    lone.start()
    lone.join(10)
    assert not lone.is_alive()  # returned once the idle worker took it
    assert answers.wait_for(1)
    second = threading.Thread(target=background.submit, args=([Pending({"images": padded(images[1:2])},
                                                                       answers.to(1))],))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # the worker has not taken it: it is still in its first run
    answers.release.set()
    second.join(10)
    assert not second.is_alive() and answers.wait_for()
    background.close()
    for i, result in enumerate(answers.results):
        np.testing.assert_array_equal(result[0], reference[i][None])


def test_a_bad_request_a_failing_answer_and_a_failing_run_stop_nothing(pipe, reference):
    images = jpegs()
    corrupt = np.frombuffer(b"\xff\xd8 this is not really a JPEG " * 4, np.uint8)
    errors: list[str] = []
    _, background = _serve(pipe, errors)
    answers = Answers(5)

    def refused(result):
        raise ConnectionError("the client has gone")

    background.submit([Pending({"images": padded(images[0:2])}, answers.holding(0)),
                       Pending({"images": padded([images[2], corrupt])}, answers.to(1)),
                       Pending({"images": padded(images[3:4])}, refused)])
    assert answers.wait_for(1)
    background.submit([Pending(None, answers.to(2))])  # not a mapping: BatchRunner.run itself raises
    background.submit([Pending({"images": padded(images[4:5])}, answers.to(3))])
    answers.release.set()
    assert answers.wait_for(4)
    background.submit([Pending({"images": padded(images[5:6])}, answers.to(4))])
    background.close()
    np.testing.assert_array_equal(answers.results[0][0], np.stack(reference[0:2]))
    assert isinstance(answers.results[1], RequestError) and "sample 1 of this request" in str(answers.results[1])
    assert errors[0] == "headrace: a response could not be sent: ConnectionError: the client has gone"
    assert len(errors) == 2 and errors[1].startswith("headrace: a pipeline run failed: AttributeError")
    # the run of requests 2 and 3 failed as a whole: each got the error, and the worker went on
    for result in answers.results[2:4]:
        assert isinstance(result, RequestError) and "the pipeline failed: AttributeError" in str(result)
    np.testing.assert_array_equal(answers.results[4][0], reference[5][None])


def test_close_answers_everything_queued(pipe, reference):
    images = jpegs()
    _, background = _serve(pipe)
    answers = Answers(6)
    for i in range(6):
        background.submit([Pending({"images": padded(images[i:i + 1])}, answers.to(i))])
    background.close()
    assert answers.wait_for(timeout=0) and answers.order == list(range(6))
    for i, result in enumerate(answers.results):
        np.testing.assert_array_equal(result[0], reference[i][None])
    with pytest.raises(RuntimeError, match="closed"):
        background.submit([Pending({"images": padded(images[0:1])}, answers.to(0))])


class ShortRunner(RecordingRunner):
    """A BatchRunner whose first run returns one result too few (a bug anywhere below the worker)."""

    def run(self, requests):
        results = super().run(requests)
        return results[:-1] if len(self.runs) == 1 else results


def test_the_worker_outlives_its_own_failures(pipe, reference):
    """A run that returns too few results, and a timing callback that raises: each request is still answered
    once (the unanswered with an error), both are reported, and the worker serves the next hand-over."""
    images = jpegs()
    errors: list[str] = []
    background = BackgroundRunner(ShortRunner(pipe, [IMAGES], ["normalized"]), errors.append,
                                  on_done=lambda *_: 1 / 0, waiting=8)
    answers = Answers(3)
    background.submit([Pending({"images": padded(images[0:1])}, answers.to(0)),
                       Pending({"images": padded(images[1:2])}, answers.to(1))])
    assert answers.wait_for(2)
    background.submit([Pending({"images": padded(images[2:3])}, answers.to(2))])
    assert answers.wait_for()
    assert background.close()
    for result in answers.results[:2]:
        assert isinstance(result, RequestError) and "the server failed to answer: RuntimeError: 1 results for 2" \
            in str(result)
    np.testing.assert_array_equal(answers.results[2][0], reference[2][None])
    assert errors == ["headrace: the background worker failed: RuntimeError: 1 results for 2 requests",
                      "headrace: the background worker failed: ZeroDivisionError: division by zero"]


def test_an_answer_that_fails_is_followed_by_an_error(pipe):
    """Outputs the server cannot take: the request then gets an error rather than no answer at all."""
    images = jpegs()
    errors: list[str] = []
    got: list = []

    def picky(result):
        if not isinstance(result, RequestError):
            raise MemoryError("no room for the output")
        got.append(result)

    background = BackgroundRunner(RecordingRunner(pipe, [IMAGES], ["normalized"]), errors.append)
    background.submit([Pending({"images": padded(images[0:1])}, picky)])
    assert background.close()
    assert len(got) == 1 and "its response could not be sent: MemoryError: no room for the output" in str(got[0])
    assert errors == ["headrace: a response could not be sent: MemoryError: no room for the output"]


def test_answers_on_response_threads(pipe, reference):
    """With response threads, a run's answers but the last go out on them: each request is still answered once,
    with its own outputs, and an answer that blocks holds up neither the run's other answers nor the next run."""
    images = jpegs()
    runner = RecordingRunner(pipe, [IMAGES], ["normalized"])
    background = BackgroundRunner(runner, [].append, senders=2, waiting=8)
    answers = Answers(5)
    def stuck(result):  # a response sender waiting on a slow server
        answers.release.wait(10)
        answers.to(0)(result)

    background.submit([Pending({"images": padded(images[0:1])}, stuck),
                       Pending({"images": padded(images[1:3])}, answers.to(1))])
    assert answers.wait_for(1)  # answered while the first answer is still stuck
    background.submit([Pending({"images": padded(images[3:4])}, answers.to(2)),
                       Pending({"images": padded(images[4:6])}, answers.to(3)),
                       Pending({"images": padded(images[6:7])}, answers.to(4))])
    assert answers.wait_for(4)  # the next run is answered too
    assert 0 not in answers.order
    answers.release.set()
    assert background.close()
    assert sorted(answers.order) == [0, 1, 2, 3, 4]
    for result, (lo, hi) in zip(answers.results, [(0, 1), (1, 3), (3, 4), (4, 6), (6, 7)], strict=True):
        np.testing.assert_array_equal(result[0], np.stack(reference[lo:hi]))


def test_background_options_from_model_parameters():
    assert background_options({}) is None
    assert background_options({"respond_in_background": "false", "response_threads": "4"}) is None
    assert background_options({"respond_in_background": "true"}) == {"senders": 2, "waiting": 1}
    assert background_options({"respond_in_background": "On", "response_threads": "0",
                               "background_queue_depth": "3"}) == {"senders": 0, "waiting": 3}
    with pytest.raises(ValueError, match="'respond_in_background': 'yes please' is not true or false"):
        background_options({"respond_in_background": "yes please"})
    with pytest.raises(ValueError, match="'response_threads': '-1' is not a whole number of at least 0"):
        background_options({"respond_in_background": "1", "response_threads": "-1"})
    with pytest.raises(ValueError, match="'background_queue_depth': 'x' is not a whole number of at least 0"):
        background_options({"respond_in_background": "1", "background_queue_depth": "x"})


def test_each_run_answers_its_last_request_itself(pipe):
    """With response threads, a run's last answer is the worker's own (a lone request meets no hand-over), the
    others go to the threads; close waits for all of them."""
    images = jpegs()
    background = BackgroundRunner(RecordingRunner(pipe, [IMAGES], ["normalized"]), [].append, senders=2)
    threads: dict[int, str] = {}
    first_run_done = threading.Event()

    def to(slot: int):
        def answer(result):
            if slot == 2:
                first_run_done.set()
            time.sleep(0.05)  # still sending when close is called
            threads[slot] = threading.current_thread().name
        return answer

    background.submit([Pending({"images": padded(images[i:i + 1])}, to(i)) for i in range(3)])
    assert first_run_done.wait(30)  # so that the next hand-over is a run of its own
    background.submit([Pending({"images": padded(images[3:4])}, to(3))])
    assert background.close()
    assert sorted(threads) == [0, 1, 2, 3]
    assert threads[2] == threads[3] == "headrace-background"
    assert threads[0].startswith("headrace-answer") and threads[1].startswith("headrace-answer")
