"""DALI's `feed_ndarray` and `to_torch_type` in headrace-torch (and `headrace.plugin.pytorch`): the same script copies a
batch into a torch tensor in headrace and in DALI's CPU build (marker dali), with the same result; a wrong element type
or shape is refused before anything is copied. Exact."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from ops_support import HAS_DALI, needs_dali

import headrace
from headrace_torch import feed_ndarray, to_torch_type

APIS = ["headrace", pytest.param("dali", marks=needs_dali)]
SAMPLES = [np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1) for i in range(2)]


def _api(name: str):
    if name == "headrace":
        return headrace, importlib.import_module("headrace.plugin.pytorch")
    return importlib.import_module("nvidia.dali"), importlib.import_module("nvidia.dali.plugin.pytorch")


def _batch(lib, samples):
    @lib.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None)
    def pipe():
        return lib.fn.external_source(source=lambda: samples)

    built = pipe()
    built.build()
    return built.run()[0]


@pytest.mark.parametrize("name", APIS)
def test_feed_ndarray_copies_a_batch_into_a_torch_tensor(name):
    lib, plugin = _api(name)
    batch = _batch(lib, SAMPLES).as_tensor()
    target = torch.zeros((2, 3, 4), dtype=plugin.to_torch_type[batch.dtype])
    assert plugin.feed_ndarray(batch, target) is target
    np.testing.assert_array_equal(target.numpy(), np.stack(SAMPLES))


@pytest.mark.dali
@pytest.mark.skipif(not HAS_DALI, reason="nvidia-dali-cuda130 is not installed")
def test_to_torch_type_matches_dali():
    types = importlib.import_module("nvidia.dali.types")
    dali_plugin = importlib.import_module("nvidia.dali.plugin.pytorch")
    for dali_type, torch_type in dali_plugin.to_torch_type.items():
        assert to_torch_type[headrace.types.DALIDataType(int(dali_type))] is torch_type
        assert to_torch_type[np.dtype(types.to_numpy_type(dali_type))] is torch_type


@pytest.mark.parametrize("target, error, message", [
    (torch.zeros((2, 3, 4), dtype=torch.float64), TypeError, "element type"),
    (torch.zeros((2, 4, 3), dtype=torch.float32), ValueError, "shapes do not match"),
    (torch.zeros((2, 4, 3), dtype=torch.float32).transpose(1, 2), ValueError, "contiguous"),
])
def test_a_wrong_target_is_refused_before_copying(target, error, message):
    before = target.clone()
    with pytest.raises(error, match=message):
        feed_ndarray(_batch(headrace, SAMPLES), target)
    assert torch.equal(target, before)


def test_ragged_batches_and_foreign_objects_are_refused():
    ragged = _batch(headrace, [np.zeros((2, 2), np.float32), np.zeros((3, 2), np.float32)])
    with pytest.raises(ValueError, match="different shapes"):
        feed_ndarray(ragged, torch.zeros((2, 2, 2)))
    with pytest.raises(TypeError, match="headrace batch or tensor"):
        feed_ndarray(torch.zeros(3), torch.zeros(3))
