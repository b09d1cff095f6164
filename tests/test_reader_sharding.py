"""The rules of readers.file's sharding and epoch ends (module docstring of headrace.readers.file), each checked on
its own, without DALI (tests/test_torch_vs_dali.py checks them against DALI as well)."""

from __future__ import annotations

import pytest
from torch_harness import label_pipeline, numbered_files

import headrace
from headrace import SchemaError


def _batches(pipe, count: int) -> list[list[int]]:
    out = [pipe.run()[0].as_array().ravel().tolist() for _ in range(count)]
    pipe.close()
    return out


@pytest.fixture
def ten(tmp_path):
    return numbered_files(tmp_path / "ten", 10)


def test_shard_k_holds_the_contiguous_range_k_n_over_s(ten):
    # N=10, S=3: [0, 3), [3, 6), [6, 10); batch 10 reads the whole shard (and runs on into the next epoch)
    firsts = [_batches(label_pipeline(headrace, ten, 10, k, 3, stick=True), 1)[0] for k in range(3)]
    assert firsts == [[0, 1, 2, 0, 1, 2, 0, 1, 2, 0], [3, 4, 5, 3, 4, 5, 3, 4, 5, 3], [6, 7, 8, 9, 6, 7, 8, 9, 6, 7]]


def test_without_stick_to_shard_each_epoch_moves_to_the_next_shard(ten):
    assert _batches(label_pipeline(headrace, ten, 4, 1, 3), 3) == [[3, 4, 5, 6], [7, 8, 9, 0], [1, 2, 3, 4]]


def test_without_padding_a_batch_runs_on_into_the_next_epoch(tmp_path):
    files = numbered_files(tmp_path, 7)
    assert _batches(label_pipeline(headrace, files, 3), 3) == [[0, 1, 2], [3, 4, 5], [6, 0, 1]]


def test_padding_repeats_the_last_sample_to_the_end_of_the_batch(tmp_path):
    files = numbered_files(tmp_path, 7)
    assert _batches(label_pipeline(headrace, files, 3, pad=True), 4) == [[0, 1, 2], [3, 4, 5], [6, 6, 6], [0, 1, 2]]


def test_padding_brings_every_shard_to_ceil_n_over_s_so_batch_counts_agree(ten):
    # shards of 3, 3 and 4 samples; every shard returns 4 per epoch, so shard 0 needs a batch of padding only
    assert _batches(label_pipeline(headrace, ten, 3, 0, 3, pad=True, stick=True), 4) == \
        [[0, 1, 2], [2, 2, 2], [0, 1, 2], [2, 2, 2]]
    assert _batches(label_pipeline(headrace, ten, 3, 2, 3, pad=True, stick=True), 2) == [[6, 7, 8], [9, 9, 9]]


def test_reader_meta_counts_padding(ten):
    plain = label_pipeline(headrace, ten, 3, 1, 3)
    padded = label_pipeline(headrace, ten, 3, 1, 3, pad=True)
    assert plain.reader_meta("Reader") == {"epoch_size": 10, "epoch_size_padded": 10, "number_of_shards": 3,
                                           "shard_id": 1, "pad_last_batch": False, "stick_to_shard": False}
    assert padded.reader_meta("Reader")["epoch_size_padded"] == 12  # ceil(10 / 3) * 3


def test_random_shuffle_permutes_each_epoch_of_the_shard(ten):
    # DALI's way: the data set is permuted once (DALI's fixed permutation) before it is split into shards
    from headrace.readers.shuffling import dali_permutation

    pipe = label_pipeline(headrace, ten, 5, 0, 2, stick=True, random_shuffle=True)
    epochs = _batches(pipe, 4)
    assert all(sorted(e) == sorted(dali_permutation(10)[:5].tolist()) for e in epochs)
    assert len({tuple(e) for e in epochs}) > 1  # not the same order every epoch


def test_shuffle_after_epoch_partitions_each_epoch_over_the_shards_whatever_the_pipeline_seeds(tmp_path):
    files = numbered_files(tmp_path, 11)
    # pipelines of the ranks built with different seeds still agree on the permutation of each epoch
    per_shard = [_batches(label_pipeline(headrace, files, 4, k, 3, pad=True, shuffle_after_epoch=True, seed=k), 3)
                 for k in range(3)]
    for epoch in range(3):
        seen = []
        for k, batches in enumerate(per_shard):
            samples = batches[epoch]  # shards of 3, 4, 4 samples: one padded batch of 4 per epoch
            shard = (k + epoch) % 3
            real = 11 * (shard + 1) // 3 - 11 * shard // 3
            seen += samples[:real]
        assert sorted(seen) == list(range(11)), f"epoch {epoch}"
    assert [per_shard[k][0] for k in range(3)] != [[0, 1, 2, 2], [3, 4, 5, 6], [7, 8, 9, 10]]


def test_bad_sharding_is_refused_with_the_node_named(tmp_path):
    files = numbered_files(tmp_path, 2)
    with pytest.raises(SchemaError, match=r"readers.file \(node 'Reader'\).*2 samples.*num_shards=3"):
        label_pipeline(headrace, files, 1, 0, 3).build()
    with pytest.raises(SchemaError, match=r"shard_id 2 is not in \[0, num_shards=2\)"):
        label_pipeline(headrace, files, 1, 2, 2).build()
