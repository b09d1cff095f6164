"""DALI's DALIRaggedIterator in headrace-torch: outputs of samples of different shapes as lists of tensors
(SPARSE_LIST_TAG) or one sparse COO tensor (SPARSE_COO_TAG) beside dense ones, over epochs whose last batch is cut
(PARTIAL) or filled (FILL), in headrace and (FILL: DALI 2.4's fails on a PARTIAL last batch) in DALI's CPU build with
the same script (marker dali). Exact."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from ops_support import HAS_DALI, needs_dali

import headrace

APIS = ["headrace", pytest.param("dali", marks=needs_dali)]
LENGTHS = [3, 1, 4, 2, 5, 2, 3]


def _expected(n: int) -> np.ndarray:
    return np.arange(LENGTHS[n % len(LENGTHS)], dtype=np.float32) + 10 * n


def _samples(info) -> tuple[np.ndarray, np.ndarray]:
    """Sample n of an endless stream (the iterator's `size` makes the epochs): n + 1 ragged values, and n."""
    return _expected(info.idx_in_epoch), np.array([info.idx_in_epoch], np.int32)


def _epochs(name: str, policy: str, epochs: int = 2) -> list[list[dict]]:
    if name == "headrace":
        lib, plugin = headrace, importlib.import_module("headrace.plugin.pytorch")
    else:
        lib, plugin = importlib.import_module("nvidia.dali"), importlib.import_module("nvidia.dali.plugin.pytorch")
    iterator_class = plugin.DALIRaggedIterator

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        ragged, number = lib.fn.external_source(source=_samples, batch=False, num_outputs=2)
        return ragged, ragged, number

    iterator = iterator_class(pipe(), ["list", "coo", "number"], size=len(LENGTHS),
                              output_types=[iterator_class.SPARSE_LIST_TAG, iterator_class.SPARSE_COO_TAG,
                                            iterator_class.DENSE_TAG],
                              last_batch_policy=getattr(plugin.LastBatchPolicy, policy), auto_reset=True)
    out = []
    for _ in range(epochs):
        batches = []
        for (batch,) in iterator:
            batches.append({"list": [t.clone() for t in batch["list"]], "coo": batch["coo"].to_dense().clone(),
                            "number": batch["number"].clone()})
        out.append(batches)
    return out


@pytest.mark.parametrize("name, policy", [("headrace", "PARTIAL"), ("headrace", "FILL"),
                                          pytest.param("dali", "FILL", marks=needs_dali)])
def test_ragged_outputs(name, policy):
    epochs = _epochs(name, policy)
    # 7 samples an epoch in batches of 3: the last one cut to 1 (PARTIAL), or filled (FILL) with 2 samples that then
    # count towards the next epoch, as DALI's counter does
    expected_sizes = [[3, 3, 1], [3, 3, 1]] if policy == "PARTIAL" else [[3, 3, 3], [3, 3]]
    assert [[len(b["list"]) for b in batches] for batches in epochs] == expected_sizes
    for batches in epochs:
        for batch in batches:
            for row, (tensor, number) in enumerate(zip(batch["list"], batch["number"].reshape(-1), strict=True)):
                expected = _expected(int(number))
                np.testing.assert_array_equal(tensor.numpy(), expected)
                np.testing.assert_array_equal(batch["coo"][row, :len(expected)].numpy(), expected)
            assert batch["coo"].shape == (len(batch["list"]), max(len(t) for t in batch["list"]))


@pytest.mark.dali
@pytest.mark.skipif(not HAS_DALI, reason="nvidia-dali-cuda130 is not installed")
def test_same_batches_as_dali():
    # FILL only: DALI 2.4's DALIRaggedIterator fails on a PARTIAL last batch (it reads an attribute it never sets)
    ours, theirs = _epochs("headrace", "FILL"), _epochs("dali", "FILL")
    assert len(ours) == len(theirs)
    for mine, dalis in zip(ours, theirs, strict=True):
        assert len(mine) == len(dalis)
        for a, b in zip(mine, dalis, strict=True):
            assert torch.equal(a["number"], b["number"]) and torch.equal(a["coo"], b["coo"])
            assert all(torch.equal(x, y) for x, y in zip(a["list"], b["list"], strict=True))


def test_output_types_are_checked():
    plugin = importlib.import_module("headrace.plugin.pytorch")

    @headrace.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        return headrace.fn.external_source(source=lambda: [np.zeros(2, np.float32)] * 3)

    with pytest.raises(ValueError, match="2 tags for the 1 outputs"):
        plugin.DALIRaggedIterator(pipe(), ["x"], output_types=["dense", "dense"])
    with pytest.raises(ValueError, match="output_types must be made of"):
        plugin.DALIRaggedIterator(pipe(), ["x"], output_types=["ragged"])
