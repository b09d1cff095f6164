"""permute_batch against DALI's CPU operator (exact: values, shapes, layout), batch_permutation by its properties
(permutations, derangements, independent draws) and statistics over many batches, as DALI's own (its indices come
from another generator); the GPU kernels against the CPU ones (exact: the same random stream)."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import fn, pipeline_def
from headrace.errors import SampleError

DATA = [np.full((i + 1, 2), i, np.int16) for i in range(5)]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("indices", [[4, 0, 0, 2, 1], [0, 1, 2, 3, 4], [3, 3, 3, 3, 3]])
def test_permute_batch_matches_dali(indices):
    ours = run_headrace("permute_batch", DATA, layout="AB", indices=indices)
    theirs = run_dali("permute_batch", DATA, layout="AB", indices=indices)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@needs_dali[0]
@needs_dali[1]
def test_per_sample_indices_match_dali():
    arg_inputs = {"indices": [np.array(i, np.int32) for i in (2, 2, 0, 4, 1)]}
    ours = run_headrace("permute_batch", DATA, arg_inputs=arg_inputs)
    theirs = run_dali("permute_batch", DATA, arg_inputs=arg_inputs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


def _permutations(batch_size: int, iterations: int, seed: int = 4, device_id=None, gpu: bool = False,
                  **kwargs) -> np.ndarray:
    """(iterations, batch_size) indices of batch_permutation (on the GPU with `gpu`), with the batch they permuted
    checked against them."""
    data = [np.array([i], np.int32) for i in range(batch_size)]

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=0 if gpu else device_id, seed=seed)
    def pipe():
        x = fn.external_source(source=lambda: data, batch=True)
        # named: the same random stream on both devices
        indices = fn.batch_permutation(**kwargs, name="perm", **({"device": "gpu"} if gpu else {}))
        if gpu:
            return indices.cpu(), fn.permute_batch(x.gpu(), indices=indices.cpu()).cpu()
        return indices, fn.permute_batch(x, indices=indices)

    p = pipe()
    rows = []
    for _ in range(iterations):
        indices, permuted = p.run()
        row = [int(np.asarray(indices.at(i))) for i in range(batch_size)]
        assert [int(np.asarray(permuted.at(i))[0]) for i in range(batch_size)] == row
        rows.append(row)
    p.close()
    return np.array(rows)


def _dali_permutations(batch_size: int, iterations: int, **kwargs) -> np.ndarray:
    from nvidia import dali

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=4)
    def pipe():
        return dali.fn.batch_permutation(**kwargs)

    p = pipe()
    p.build()
    batches = [p.run()[0] for _ in range(iterations)]
    return np.array([[int(np.asarray(batch.at(i))) for i in range(batch_size)] for batch in batches])


def _check_kind(rows: np.ndarray, allow_repetitions: bool, no_fixed_points: bool) -> None:
    size = rows.shape[1]
    assert rows.min() >= 0 and rows.max() < size
    if not allow_repetitions:
        assert all(sorted(row) == list(range(size)) for row in rows)
    else:
        assert any(len(set(row)) < size for row in rows)  # 200 batches of 6 without a repeat: p ~ 1e-300
    if no_fixed_points:
        assert not np.any(rows == np.arange(size))


KINDS = [dict(), dict(no_fixed_points=True), dict(allow_repetitions=True),
         dict(allow_repetitions=True, no_fixed_points=True)]


@pytest.mark.parametrize("kwargs", KINDS, ids=[str(k) for k in KINDS])
def test_batch_permutation_kinds_and_statistics(kwargs):
    rows = _permutations(6, 200, **kwargs)
    _check_kind(rows, kwargs.get("allow_repetitions", False), kwargs.get("no_fixed_points", False))
    # uniform over the allowed values: each (position, value) count near 200 / 6 (or / 5 without fixed points)
    allowed = 5 if kwargs.get("no_fixed_points") else 6
    counts = np.array([[np.sum(rows[:, i] == v) for v in range(6)] for i in range(6)])
    expected = 200 / allowed
    assert np.all(np.abs(counts[counts > 0] - expected) < 5 * np.sqrt(expected))  # 5 sigma
    assert len({tuple(r) for r in rows}) > 100  # batches differ (265 derangements of 6: ~140 distinct expected)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", KINDS, ids=[str(k) for k in KINDS])
def test_batch_permutation_kinds_as_dali(kwargs):
    ours, theirs = _permutations(6, 50, **kwargs), _dali_permutations(6, 50, **kwargs)
    for rows in (ours, theirs):
        _check_kind(rows, kwargs.get("allow_repetitions", False), kwargs.get("no_fixed_points", False))
        assert rows.dtype.kind == "i"


def test_batch_permutation_is_reproducible_and_a_batch_of_one_is_itself():
    np.testing.assert_array_equal(_permutations(5, 4, seed=9), _permutations(5, 4, seed=9))
    assert not np.array_equal(_permutations(5, 4, seed=9), _permutations(5, 4, seed=10))
    np.testing.assert_array_equal(_permutations(1, 3, no_fixed_points=True), np.zeros((3, 1)))


def test_bad_indices_name_op_sample_and_argument():
    with pytest.raises(SampleError, match=r"permute_batch .*'indices': sample 0 asks for sample 5, which is not in a "
                                          r"batch of 5"):
        run_headrace("permute_batch", DATA, indices=[5, 0, 0, 0, 0])
    with pytest.raises(SampleError, match=r"permute_batch .*'indices' has 2 values for a batch of 5"):
        run_headrace("permute_batch", DATA, indices=[4, 0])


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", KINDS, ids=[str(k) for k in KINDS])
def test_gpu_matches_cpu(kwargs):
    from tests.gpu_helpers import cpu_and_gpu

    np.testing.assert_array_equal(_permutations(6, 5, device_id=0, **kwargs),
                                  _permutations(6, 5, gpu=True, **kwargs))
    cpu, gpu = cpu_and_gpu(DATA, lambda d, dev: fn.permute_batch(d, indices=[4, 0, 0, 2, 1]))
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a, b)


def test_pipeline_file_round_trip(tmp_path):
    from headrace import Pipeline

    @pipeline_def(batch_size=5, num_threads=1, device_id=None, seed=12)
    def pipe():
        x = fn.external_source(name="x", layout="AB")  # fed: a file keeps no Python source
        indices = fn.batch_permutation(allow_repetitions=True)
        return indices, fn.permute_batch(x, indices=indices), fn.permute_batch(x, indices=[1, 1, 0, 4, 3])

    first = pipe()
    first.serialize(tmp_path / "pipe.json")
    second = Pipeline.load(tmp_path / "pipe.json")
    for _ in range(2):
        for a, b in zip(first.run(x=DATA), second.run(x=DATA), strict=True):
            for i in range(5):
                np.testing.assert_array_equal(np.asarray(a.at(i)), np.asarray(b.at(i)))
    first.close()
    second.close()
