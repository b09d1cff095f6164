"""random_shuffle of readers.file (and the readers that share its order, headrace.readers.shuffling) against DALI's
CPU build: DALI's one-time permutation of the data set exactly (initial_fill=1 gives DALI's order sample for sample),
every epoch the same multiset, output i of the buffer from the first i + initial_fill samples of the permuted shard,
and the distribution of displacements close to DALI's (the draws themselves come from other random streams, so the
orders differ: the deciles and quartiles of the displacement agree within 20% of initial_fill + 1, at least 1, and
their standard deviations within 15%). Checkpoints resume mid-epoch bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali

from headrace import fn, pipeline_def
from headrace.readers.shuffling import dali_permutation, shuffled_epoch


def _file_list(root: Path, count: int) -> tuple[str, str]:
    """(file_root, file_list): `count` entries 'a.bin <i>' naming one small file, so the label tells the entry."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.bin").write_bytes(b"x")
    (root / "list.txt").write_text("".join(f"a.bin {i}\n" for i in range(count)))
    return str(root), str(root / "list.txt")


def _labels(module, root: str, file_list: str, batch_size: int, batches: int, seed: int = 7, **reader) -> list[int]:
    @module.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=seed)
    def pipe():
        _, labels = module.fn.readers.file(file_root=root, file_list=file_list, random_shuffle=True, **reader)
        return labels

    p = pipe()
    p.build()
    out = []
    for _ in range(batches):
        (labels,) = p.run()
        out += [int(np.asarray(labels.at(i)).ravel()[0]) for i in range(batch_size)]
    if hasattr(p, "close"):
        p.close()
    return out


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("count", [12, 13, 200, 70001])  # even, odd (both of libstdc++'s paired draws); one draw each
def test_initial_fill_1_is_dalis_order_sample_for_sample(tmp_path, count):
    import nvidia.dali

    root, file_list = _file_list(tmp_path, count)
    size = min(count, 100)
    theirs = _labels(nvidia.dali, root, file_list, size, 1, initial_fill=1)
    ours = _labels(__import__("headrace"), root, file_list, size, 1, initial_fill=1)
    assert ours == theirs == dali_permutation(count)[:size].tolist()


@pytest.mark.dali
@needs_dali
def test_shards_hold_dalis_samples_every_epoch(tmp_path):
    import nvidia.dali

    root, file_list = _file_list(tmp_path, 30)
    shard = dict(num_shards=3, shard_id=1, stick_to_shard=True, initial_fill=4)
    ours = _labels(__import__("headrace"), root, file_list, 10, 4, **shard)
    theirs = _labels(nvidia.dali, root, file_list, 10, 4, **shard)
    epochs = [sorted(theirs[k:k + 10]) for k in range(0, 40, 10)]
    assert all(sorted(ours[k:k + 10]) == epochs[0] for k in range(0, 40, 10)) and epochs == [epochs[0]] * 4
    assert len({tuple(ours[k:k + 10]) for k in range(0, 40, 10)}) > 1  # a new order every epoch


def _displacements(order: list[int], base: list[int], epoch: int) -> np.ndarray:
    """Per output: its place in the base order (the epoch's order with initial_fill=1) minus its own place."""
    where = {sample: k for k, sample in enumerate(base)}
    return np.concatenate([[where[s] - i for i, s in enumerate(order[e:e + epoch])]
                           for e in range(0, len(order), epoch)])


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("fill", [4, 16])
def test_displacements_match_dalis(tmp_path, fill):
    """Output i comes from the first i + fill samples (displacement < fill) in both; the displacements' quantiles
    agree within 20% of fill + 1 (at least 1) and their spreads within 15%, over 10 epochs of 200."""
    import nvidia.dali

    root, file_list = _file_list(tmp_path, 200)
    found = {}
    for name, module in (("dali", nvidia.dali), ("headrace", __import__("headrace"))):
        base = _labels(module, root, file_list, 100, 2, initial_fill=1)
        order = _labels(module, root, file_list, 100, 20, initial_fill=fill)
        moved = _displacements(order, base, 200)
        assert moved.max() < fill, name
        assert all(sorted(order[e:e + 200]) == list(range(200)) for e in range(0, 2000, 200)), name
        found[name] = (np.percentile(moved, [10, 25, 50, 75, 90]), moved.std())
    (dali, dali_spread), (ours, our_spread) = found["dali"], found["headrace"]
    assert np.all(np.abs(dali - ours) <= max(1.0, 0.2 * (fill + 1))), found
    assert abs(our_spread / dali_spread - 1) < 0.15, found


def test_every_epoch_is_the_shard_and_the_modes_differ(tmp_path):
    """Buffer mode: each epoch is the permuted shard, in a new order; permutation mode: the unpermuted shard."""
    root, file_list = _file_list(tmp_path, 20)
    shard = dict(num_shards=2, shard_id=1, stick_to_shard=True, initial_fill=3)
    buffered = _labels(__import__("headrace"), root, file_list, 5, 8, **shard)
    permuted = _labels(__import__("headrace"), root, file_list, 5, 8, shuffle_mode="permutation", **shard)
    expected = sorted(dali_permutation(20)[10:].tolist())
    for e in range(0, 40, 10):
        assert sorted(buffered[e:e + 10]) == expected
        assert sorted(permuted[e:e + 10]) == list(range(10, 20))
    assert buffered[:10] != buffered[10:20] and permuted[:10] != permuted[10:20]


def test_buffer_windows_and_a_buffer_as_large_as_the_shard_is_uniform():
    """shuffled_epoch: output i from the first i + fill entries; with fill >= the shard each entry comes first
    about equally often, and 'permutation' is a uniform permutation too."""
    order = np.arange(50, 56)
    for epoch in range(40):
        out = shuffled_epoch(order, "buffer", 2, 3, epoch)
        assert sorted(out.tolist()) == order.tolist()
        assert all(int(v) - 50 < 2 + i for i, v in enumerate(out))
    for mode, fill in (("buffer", 6), ("permutation", 2)):
        firsts = np.array([shuffled_epoch(order, mode, fill, 9, epoch)[0] for epoch in range(3000)]) - 50
        assert np.all(np.abs(np.bincount(firsts, minlength=6) / 3000 - 1 / 6) < 0.03), mode


def test_dali_permutation_is_a_permutation_of_every_size():
    for count in (0, 1, 2, 3, 65535, 65536, 65537):
        assert sorted(dali_permutation(count).tolist()) == list(range(count))


@pytest.mark.parametrize("mode", ["buffer", "permutation"])
def test_checkpoint_mid_epoch_resumes_bit_for_bit(tmp_path, mode):
    root, file_list = _file_list(tmp_path, 23)

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=5, enable_checkpointing=True)
    def pipe():
        _, labels = fn.readers.file(file_root=root, file_list=file_list, random_shuffle=True, initial_fill=5,
                                    shuffle_mode=mode, num_shards=2, shard_id=1, name="Reader")
        return labels

    def labels(p, batches: int) -> list[int]:
        return [int(v) for _ in range(batches) for v in p.run()[0].as_array().ravel()]

    reference = pipe()
    expected = labels(reference, 9)
    first = pipe()
    labels(first, 2)  # mid-epoch: shards of 11 and 12 samples
    resumed = pipe(checkpoint=first.checkpoint())
    assert labels(resumed, 7) == expected[8:]
    for p in (reference, first, resumed):
        p.close()
