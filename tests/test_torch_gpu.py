"""GPU batches become torch CUDA tensors on their own memory and device (DLPack), as CPU batches do on the host.
A CuPy array stands for a GPU batch: it is a real device buffer with `__dlpack__`, as headrace's GPU batches are."""

from __future__ import annotations

import pytest
import torch
from headrace_torch import to_torch
from headrace_torch.iterator import _tensor

pytestmark = pytest.mark.gpu


def test_gpu_batch_becomes_a_cuda_tensor_without_a_copy():
    cupy = pytest.importorskip("cupy")
    batch = cupy.arange(24, dtype=cupy.int32).reshape(4, 6)
    tensor = to_torch(batch)
    assert tensor.is_cuda and tensor.data_ptr() == batch.data.ptr
    assert tensor.sum().item() == int(batch.sum())
    assert to_torch(batch, torch.int64).dtype == torch.int64


def test_gpu_batch_stays_on_its_device():
    cupy = pytest.importorskip("cupy")
    last = cupy.cuda.runtime.getDeviceCount() - 1
    with cupy.cuda.Device(last):
        batch = cupy.ones((2, 3), dtype=cupy.float32)
    tensor = _tensor(batch, None)
    assert tensor.device == torch.device("cuda", last) and tensor.data_ptr() == batch.data.ptr
