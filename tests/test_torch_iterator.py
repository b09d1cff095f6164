"""headrace-torch's iterators on their own (always run): the last batch rules of headrace_torch.epoch, one by one,
with hand-worked expectations; zero-copy tensors; dtypes; reset(); state_dict()."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_harness import epochs, label_pipeline, numbered_files

import headrace
from headrace import fn
from headrace.data.synthetic import make_image_folder
from headrace.errors import SampleError
from headrace_torch import ClassificationIterator, GenericIterator, LastBatchPolicy, to_torch

FILL, DROP, PARTIAL = LastBatchPolicy.FILL, LastBatchPolicy.DROP, LastBatchPolicy.PARTIAL


@pytest.fixture
def seven(tmp_path):
    return numbered_files(tmp_path / "seven", 7)


def _iterator(files, batch, policy, shard=0, shards=1, pad=False, stick=False, **kwargs):
    pipe = label_pipeline(headrace, files, batch, shard, shards, pad, stick)
    return GenericIterator([pipe], ["label"], reader_name="Reader", last_batch_policy=policy, **kwargs)


def _flat(epoch):
    return [b[0] for b in epoch[1]]


# DALI's documented example: data set 0..6, batch 2 -> the last batch of the epoch, and what the next one starts with
@pytest.mark.parametrize(("policy", "pad", "last", "next_first"), [
    (PARTIAL, True, [6], [0, 1]),
    (PARTIAL, False, [6], [1, 2]),     # the next epoch's sample 0 filled the reader's batch and was cut off
    (FILL, True, [6, 6], [0, 1]),
    (FILL, False, [6, 0], [1, 2]),     # the next epoch continues after what FILL borrowed from it
    (DROP, True, [4, 5], [0, 1]),
    (DROP, False, [4, 5], [1, 2]),     # the dropped batch [6, 0] was still read
])
def test_last_batch_and_next_epoch(seven, policy, pad, last, next_first):
    first, second = epochs(_iterator(seven, 2, policy, pad=pad, auto_reset=True), 2)
    assert _flat(first)[-1] == last
    assert _flat(second)[0] == next_first


def test_epoch_lengths_per_policy(seven):
    assert [e[0] for e in epochs(_iterator(seven, 2, DROP, auto_reset=True), 2)] == [3, 3]
    assert [e[0] for e in epochs(_iterator(seven, 2, PARTIAL, auto_reset=True), 2)] == [4, 4]
    # FILL without padding: epoch 2 starts one sample in (borrowed by epoch 1), 6 left = 3 batches, and so on
    fill = epochs(_iterator(seven, 2, FILL, auto_reset=True), 3)
    assert [(n, len(b)) for n, b in fill] == [(4, 4), (3, 3), (4, 4)]
    assert sum((sum(_flat(e), []) for e in fill), []) == [i % 7 for i in range(22)]  # FILL never skips a sample


@pytest.mark.parametrize("shards", [2, 3])
@pytest.mark.parametrize("size", [10, 11])
def test_partial_with_padding_sees_every_sample_once_per_epoch_over_all_shards(tmp_path, shards, size):
    files = numbered_files(tmp_path, size)
    runs = [epochs(_iterator(files, 3, PARTIAL, k, shards, pad=True, auto_reset=True), 3) for k in range(shards)]
    assert len({tuple(n for n, _ in run) for run in runs}) == 1  # every rank: the same number of batches
    for epoch in range(3):
        seen = sorted(sum((sum(_flat(run[epoch]), []) for run in runs), []))
        assert seen == list(range(size)), f"epoch {epoch}"


@pytest.mark.parametrize("shards", [2, 3])
def test_drop_with_padding_sees_samples_at_most_once_and_only_full_batches(tmp_path, shards):
    files = numbered_files(tmp_path, 11)
    runs = [epochs(_iterator(files, 2, DROP, k, shards, pad=True, auto_reset=True), 3) for k in range(shards)]
    for epoch in range(3):
        seen = sum((sum(_flat(run[epoch]), []) for run in runs), [])
        assert len(seen) == len(set(seen)) and all(len(b) == 2 for run in runs for b in _flat(run[epoch]))
        assert len(seen) == shards * (11 // shards // 2) * 2


def test_partial_keeps_views_not_copies(seven):
    it = _iterator(seven, 2, PARTIAL)
    *_, last = list(it)
    assert last[0]["label"].shape == (1, 1) and last[0]["label"]._base is not None


def test_to_torch_shares_the_batch_memory(seven):
    pipe = label_pipeline(headrace, seven, 4)
    (labels,) = pipe.run()
    tensor = to_torch(labels)
    assert tensor.data_ptr() == labels.as_array().ctypes.data
    assert to_torch(labels, torch.int64).dtype == torch.int64


def test_ragged_batch_is_refused_clearly():
    with pytest.raises(ValueError, match="different shapes"):
        to_torch(headrace.TensorListCPU([np.zeros(2), np.zeros(3)]))


def test_output_dtypes_and_classification_iterator(tmp_path):
    files = numbered_files(tmp_path, 6)

    @headrace.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def pipe():
        data, labels = fn.readers.file(files=files, labels=list(range(6)), name="Reader")
        return data, labels

    it = ClassificationIterator(pipe(), reader_name="Reader", label_dtype=torch.int64)
    batch = next(it)[0]
    assert set(batch) == {"data", "label"} and batch["label"].dtype == torch.int64
    assert batch["data"].dtype == torch.uint8 and batch["data"].shape == (3, 1)
    assert batch["label"].ravel().tolist() == [0, 1, 2]


def test_without_auto_reset_stop_until_reset_and_iter_resets(seven):
    it = _iterator(seven, 3, PARTIAL)
    assert [b[0]["label"].ravel().tolist() for b in it] == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    it.reset()
    assert next(it)[0]["label"].ravel().tolist() == [2, 3, 4]  # 0 and 1 went into the cut-off last batch
    assert [b[0]["label"].ravel().tolist() for b in iter(_iterator(seven, 3, PARTIAL))][0] == [0, 1, 2]


def test_reset_in_mid_epoch_is_ignored(seven, caplog):
    it = _iterator(seven, 2, FILL)
    next(it)
    with caplog.at_level(logging.WARNING, logger="headrace_torch"):
        it.reset()
    assert "cannot be reset" in caplog.text
    assert next(it)[0]["label"].ravel().tolist() == [2, 3]


def test_epochs_of_a_for_loop_log_no_warning(seven, caplog):
    with caplog.at_level(logging.WARNING, logger="headrace_torch"):
        epochs(_iterator(seven, 2, FILL, auto_reset=True), 4)  # FILL carries samples into the next epochs
    assert caplog.text == ""


def test_drop_reset_after_len_batches_skips_the_dropped_batch(seven):
    """Looping `for _ in range(len(it))` then reset() must leave the reader where a full loop would."""
    looped = _iterator(seven, 2, DROP, auto_reset=True)
    by_len = _iterator(seven, 2, DROP)
    for _ in range(2):
        expect = [b[0]["label"].ravel().tolist() for b in looped]
        got = [next(by_len)[0]["label"].ravel().tolist() for _ in range(len(by_len))]
        by_len.reset()
        assert got == expect


def test_reads_until_stop_iteration_without_size(tmp_path):
    data = [[np.full((2,), i * 10 + j, np.int32) for j in range(2)] for i in range(3)]

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(source=data)

    it = GenericIterator(pipe(), ["x"], auto_reset=True)
    for _ in range(2):
        assert [b[0]["x"][:, 0].tolist() for b in it] == [[0, 1], [10, 11], [20, 21]]
    with pytest.raises(TypeError, match="length is unknown"):
        len(it)


def test_state_dict_round_trip_continues_the_same_batches(tmp_path):
    files = numbered_files(tmp_path, 10)
    for policy, pad, k in [(FILL, False, 5), (FILL, False, 9), (PARTIAL, False, 4), (DROP, True, 6), (FILL, True, 3)]:
        reference = epochs(_iterator(files, 3, policy, 1, 3, pad=pad, auto_reset=True, prepare_first_batch=False), 8)
        flat = [b for _, e in reference for b in e]
        it = _iterator(files, 3, policy, 1, 3, pad=pad, auto_reset=True)
        consumed = []
        while len(consumed) < k:
            try:
                consumed.append(next(it)[0]["label"].ravel().tolist())
            except StopIteration:
                continue
        state = it.state_dict()
        pipeline_runs = it._pipes[0]._iteration - (1 if it._first_batch is not None else 0)
        # a new iterator on a pipeline positioned where the old one was (what a pipeline checkpoint restores)
        fresh = label_pipeline(headrace, files, 3, 1, 3, pad)
        for _ in range(pipeline_runs):
            fresh.run()
        resumed = GenericIterator([fresh], ["label"], reader_name="Reader", last_batch_policy=policy,
                                  auto_reset=True, prepare_first_batch=False)
        resumed.load_state_dict(state)
        rest = []
        while len(consumed) + len(rest) < len(flat):
            try:
                rest.append(next(resumed)[0]["label"].ravel().tolist())
            except StopIteration:
                continue
        assert consumed + rest == [b[0] for b in flat], f"{policy} pad={pad} k={k}"


def test_state_dict_of_another_configuration_is_refused(seven):
    state = _iterator(seven, 2, FILL).state_dict()
    with pytest.raises(ValueError, match="policy='FILL'"):
        _iterator(seven, 2, DROP).load_state_dict(state)
    with pytest.raises(ValueError, match="version"):
        _iterator(seven, 2, FILL).load_state_dict({**state, "version": 99})


def test_bad_arguments_are_refused(seven):
    pipe = label_pipeline(headrace, seven, 2)
    with pytest.raises(ValueError, match="distinct"):
        GenericIterator(pipe, ["a", "a"], reader_name="Reader")
    with pytest.raises(ValueError, match="reader_name or size"):
        GenericIterator(pipe, ["a"], reader_name="Reader", size=7)
    with pytest.raises(ValueError, match="1 outputs but output_map names 2"):
        GenericIterator(pipe, ["a", "b"], reader_name="Reader")
    with pytest.raises(ValueError, match="last_batch_policy"):
        GenericIterator(pipe, ["a"], reader_name="Reader", last_batch_policy="FILL")


def test_dali_import_path(seven):
    from headrace.plugin.pytorch import DALIGenericIterator
    from headrace.plugin.pytorch import LastBatchPolicy as Policy

    assert DALIGenericIterator is GenericIterator and Policy is LastBatchPolicy


# Resuming a training loop (docs/torch.md) at any batch, the last of an epoch included, and after an epoch's loop
def _checkpointed(files, batch, policy, auto_reset, checkpoint=None):
    @headrace.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=3, enable_checkpointing=True)
    def numbers():
        _, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader", random_shuffle=True)
        return labels

    return GenericIterator(numbers(checkpoint=checkpoint), ["label"], reader_name="Reader", last_batch_policy=policy,
                           auto_reset=auto_reset)


def _training(it, start_epoch, epochs, saves=None):
    """(epoch, labels) of every batch of `for epoch in range(start_epoch, epochs): for batch in it`; `saves` gets
    (batches so far, epoch to resume at, state_dict(), checkpoints()) after every batch and every epoch's loop."""
    stream = []
    for epoch in range(start_epoch, epochs):
        for batch in it:
            stream.append((epoch, batch[0]["label"].ravel().tolist()))
            if saves is not None:
                saves.append((len(stream), epoch, it.state_dict(), it.checkpoints()[0]))
        if saves is not None:
            saves.append((len(stream), epoch + 1, it.state_dict(), it.checkpoints()[0]))
    return stream


@pytest.mark.parametrize("auto_reset", [True, False])
@pytest.mark.parametrize("size", [7, 8])
@pytest.mark.parametrize("policy", [FILL, DROP, PARTIAL])
def test_a_training_loop_resumed_from_any_save_gives_the_same_epochs(tmp_path, policy, size, auto_reset):
    files = numbered_files(tmp_path, size)
    saves: list = []
    stream = _training(_checkpointed(files, 2, policy, auto_reset), 0, 3, saves)
    for done, epoch, state, checkpoint in saves:
        where = f"{policy.name} {size} auto_reset={auto_reset}, saved after batch {done}, resumed at epoch {epoch}"
        resumed = _checkpointed(files, 2, policy, auto_reset)
        resumed.load_state_dict(state)
        assert stream[:done] + _training(resumed, epoch, 3) == stream, where
        # DALI's form: the pipeline built from the checkpoint, a new iterator over it (preparing its first batch)
        rebuilt = _checkpointed(files, 2, policy, auto_reset, checkpoint=checkpoint)
        assert stream[:done] + _training(rebuilt, epoch, 3) == stream, f"{where}, through checkpoints()"


# A batch that fails (a bad file) is consumed all the same: the epochs after it are those of a run without the error
BAD = {10: "truncated", 19: "empty", 33: "text"}  # none in the first batch of either shard (batches of 8, 43 files)


@pytest.fixture(scope="module")
def with_bad_files(tmp_path_factory):
    """43 JPEG paths, three of them bad, and the same list with good JPEGs in their place."""
    root = tmp_path_factory.mktemp("bad")
    good = sorted(str(p) for p in make_image_folder(root / "good", 43, 1, size=(8, 10), seed=2).rglob("*.jpg"))
    data = Path(good[0]).read_bytes()
    contents = {"truncated": data[:len(data) // 3], "empty": b"", "text": b"not an image"}
    bad = list(good)
    for index, kind in BAD.items():
        bad[index] = str(root / f"{kind}.jpg")
        Path(bad[index]).write_bytes(contents[kind])
    return bad, good


def _decoding(files, batch, policy, shards):
    @headrace.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=5, enable_checkpointing=True)
    def images(shard_id):
        jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader",
                                        shard_id=shard_id, num_shards=shards)
        return fn.resize(fn.decoders.image(jpegs), resize_x=4, resize_y=4), labels

    pipes = [images(k) for k in range(shards)]
    return GenericIterator(pipes, ["image", "label"], reader_name="Reader", last_batch_policy=policy, auto_reset=True)


def _steps(it, epochs, states=None):
    """Per epoch, per step: the labels of each pipeline's batch, or "error"; `states` gets state_dict() after each
    error."""
    seen = []
    for _ in range(epochs):
        steps = []
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            except SampleError:
                steps.append("error")
                if states is not None:
                    states.append((sum(map(len, seen)) + len(steps), it.state_dict()))
                continue
            steps.append([b["label"].ravel().tolist() for b in batch])
        seen.append(steps)
    return seen


@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.parametrize("policy", [FILL, DROP, PARTIAL])
def test_failed_batches_keep_the_epochs_and_checkpoints_aligned(with_bad_files, policy, shards):
    bad, good = with_bad_files
    reference = _steps(_decoding(good, 8, policy, shards), 3)
    states: list = []
    got = _steps(_decoding(bad, 8, policy, shards), 3, states)
    assert [len(e) for e in got] == [len(e) for e in reference]
    for epoch, (mine, theirs) in enumerate(zip(got, reference, strict=True)):
        for step, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert a in (b, "error"), f"epoch {epoch} step {step}: {a} instead of {b}"
            assert a == "error" or not set(BAD) & set(sum(b, [])), f"epoch {epoch} step {step} holds a bad file"
    assert states, "no batch failed"
    flat = sum(got, [])
    for done, state in states[:3]:  # a checkpoint taken after an error resumes exactly
        resumed = _decoding(bad, 8, policy, shards)
        resumed.load_state_dict(state)
        rest = sum(_steps(resumed, 4), [])
        assert rest[:len(flat) - done] == flat[done:], f"resumed after step {done}"
