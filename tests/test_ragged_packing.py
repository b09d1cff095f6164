"""gpu/ragged.py's index arithmetic (the packing behind the batched GPU box kernels) against a plain-Python
reference, with numpy as the array module: offsets, the sample of each row, per-row tables,
first elements of label rows, packing lists and dense batches, and splitting one buffer back into samples. Exact."""

from __future__ import annotations

import numpy as np
import pytest

from headrace_kernels.gpu import ragged

CASES = [[], [0], [3], [0, 0, 0], [1, 0, 4, 2], [5, 1, 0, 0, 7], [2, 2, 2]]


def reference_rows(counts: list[int]) -> list[tuple[int, int]]:
    """(sample, slot) of every packed row, one by one."""
    return [(i, j) for i, count in enumerate(counts) for j in range(count)]


@pytest.mark.parametrize("counts", CASES)
def test_offsets_and_row_samples(counts):
    starts = ragged.offsets(counts)
    assert starts.dtype == np.int64 and starts.tolist() == [sum(counts[:i]) for i in range(len(counts) + 1)]
    rows = ragged.row_samples(counts)
    assert rows.dtype == np.int32 and rows.tolist() == [i for i, _ in reference_rows(counts)]


@pytest.mark.parametrize("counts", CASES)
def test_per_row_repeats_each_sample_over_its_rows(counts):
    table = np.arange(len(counts) * 6, dtype=np.float32).reshape(len(counts), 2, 3)
    got = ragged.per_row(table, counts)
    want = [table[i] for i, _ in reference_rows(counts)]
    assert got.shape == (sum(counts), 2, 3)
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32).reshape(-1, 2, 3))


@pytest.mark.parametrize("shapes", [[(3,), (0,), (2,)], [(3, 2), (0, 2), (1, 2)], [(2, 1), (4, 1)], []])
def test_first_elements_of_label_rows(shapes):
    counts = [s[0] for s in shapes]
    sizes = [int(np.prod(s)) for s in shapes]
    flat = np.concatenate([np.arange(size) + 100 * i for i, size in enumerate(sizes)] + [np.zeros(0)])
    samples = [flat[sum(sizes[:i]):sum(sizes[:i + 1])].reshape(s) for i, s in enumerate(shapes)]
    want = [sample.reshape(sample.shape[0], -1)[j, 0] for sample in samples for j in range(sample.shape[0])]
    np.testing.assert_array_equal(flat[ragged.first_elements(counts, sizes)], want)


@pytest.mark.parametrize("counts", CASES)
def test_pack_and_split_round_trip(counts):
    rng = np.random.default_rng(sum(counts))
    samples = [rng.uniform(size=(c, 4)).astype(np.float32) for c in counts]
    rows = ragged.pack(np, samples, 4)
    assert rows.shape == (sum(counts), 4) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, np.concatenate([*samples, np.zeros((0, 4), np.float32)]))
    dense, listed = ragged.split(rows, [s.shape for s in samples])
    got = list(dense) if dense is not None else listed
    assert len(got) == len(samples)
    for a, b in zip(got, samples, strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    same_shapes = len({s.shape for s in samples}) == 1
    assert (dense is not None) == same_shapes


def test_split_hands_out_views_of_one_buffer():
    flat = np.arange(10, dtype=np.float32)
    _, listed = ragged.split(flat, [(2, 2), (0, 2), (3, 2)])
    listed[2][0, 0] = -1.0
    assert flat[4] == -1.0 and [p.shape for p in listed] == [(2, 2), (0, 2), (3, 2)]


def test_pack_reads_a_dense_batch_and_converts_types():
    dense = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    rows = ragged.pack(np, None, 4, dense=dense, dtype=np.float32)
    assert rows.dtype == np.float32 and rows.shape == (6, 4)
    np.testing.assert_array_equal(rows, dense.reshape(6, 4).astype(np.float32))
    labels = [np.array([1, 2], np.int32), np.zeros((0, 1), np.int32), np.array([[7], [8]], np.int32)]
    np.testing.assert_array_equal(ragged.pack(np, labels, 1).reshape(-1), [1, 2, 7, 8])
    assert ragged.pack(np, [], 4).shape == (0, 4)


def test_packed_samples_make_each_view_once_and_pack_without_a_copy():
    flat = np.arange(12, dtype=np.float32)
    packed = ragged.PackedSamples(flat, [0, 4, 4], [(2, 2), (0, 2), (4, 2)])
    assert len(packed) == 3 and packed.dtype == np.float32 and packed.back_to_back()
    assert packed[2] is packed[2] and packed[2].shape == (4, 2) and [p.shape for p in packed] == packed.shapes
    np.testing.assert_array_equal(packed[-1], flat[4:].reshape(4, 2))
    assert [p.shape for p in packed[1:]] == [(0, 2), (4, 2)]
    rows = ragged.pack(np, packed, 2)  # one buffer, back to back: a view of it
    assert np.shares_memory(rows, flat) and rows.shape == (6, 2)
    gapped = ragged.PackedSamples(flat, [0, 6], [(2, 2), (3, 2)])  # a gap between the samples: packed by a copy
    assert not gapped.back_to_back()
    rows = ragged.pack(np, gapped, 2)
    assert not np.shares_memory(rows, flat)
    np.testing.assert_array_equal(rows, np.concatenate([flat[:4], flat[6:12]]).reshape(5, 2))


def test_split_of_ragged_shapes_is_packed():
    flat = np.arange(10, dtype=np.float32)
    dense, packed = ragged.split(flat, [(2, 2), (3, 2)])
    assert dense is None and isinstance(packed, ragged.PackedSamples) and packed.back_to_back()
    assert packed.starts.tolist() == [0, 4]
