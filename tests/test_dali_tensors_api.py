"""The methods of DALI's returned batches and tensors that plugins and ported code call: `ndim()`, `set_layout()`,
`data_ptr()`, `as_reshaped_tensor()`, `copy_to_external()`, `source_info()`, a tensor's `as_cpu()`. On the host in
headrace and in DALI's CPU build with the same script (marker dali); on the GPU against the CPU batch (marker gpu).
Exact."""

from __future__ import annotations

import ctypes
import importlib

import numpy as np
import pytest
from ops_support import needs_dali

import headrace
from headrace.tensors import TensorCPU, TensorGPU

APIS = ["headrace", pytest.param("dali", marks=needs_dali)]
SAMPLES = [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(6, 12, dtype=np.int16).reshape(2, 3)]
RAGGED = [np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(6, 10, dtype=np.int32).reshape(2, 2)]


def _batch(name: str, samples: list[np.ndarray], device: str = "cpu"):
    lib = headrace if name == "headrace" else importlib.import_module("nvidia.dali")

    @lib.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None if device == "cpu" else 0)
    def pipe():
        data = lib.fn.external_source(source=lambda: samples, layout="HW")
        return data.gpu() if device == "gpu" else data

    built = pipe()
    built.build()
    return built.run()[0]


@pytest.mark.parametrize("name", APIS)
def test_batch_methods_as_dali(name):
    batch = _batch(name, SAMPLES)
    assert batch.ndim() == 2
    assert batch.data_ptr() != 0
    np.testing.assert_array_equal(np.array(batch.as_reshaped_tensor([3, 4])),
                                  np.concatenate([s.ravel() for s in SAMPLES]).reshape(3, 4))
    out = np.zeros((2, 2, 3), np.int16)
    batch.copy_to_external(ctypes.c_void_p(out.ctypes.data))
    np.testing.assert_array_equal(out, np.stack(SAMPLES))
    batch.set_layout("XY")
    assert batch.layout() == "XY"


@pytest.mark.parametrize("name", APIS)
def test_ragged_batch_copies_its_samples_back_to_back_as_dali(name):
    batch = _batch(name, RAGGED)
    out = np.zeros(10, np.int32)
    batch.copy_to_external(out.ctypes.data if name == "headrace" else ctypes.c_void_p(out.ctypes.data))
    np.testing.assert_array_equal(out, np.concatenate([s.ravel() for s in RAGGED]))
    np.testing.assert_array_equal(np.array(batch.as_reshaped_tensor([5, 2])), out.reshape(5, 2))
    address = batch.data_ptr()
    assert ctypes.string_at(address, out.nbytes) == out.tobytes()
    for i, sample in enumerate(RAGGED):  # the samples are still themselves
        np.testing.assert_array_equal(np.array(batch.at(i)), sample)


def test_tensor_methods():
    tensor = TensorCPU(np.arange(6, dtype=np.float32).reshape(1, 2, 3)[:, :, ::-1], "HWC", "file.jpg")
    assert tensor.as_cpu() is tensor and tensor.source_info() == "file.jpg"
    out = np.zeros((1, 2, 3), np.float32)
    tensor.copy_to_external(ctypes.c_void_p(out.ctypes.data))
    np.testing.assert_array_equal(out, np.array(tensor))
    assert ctypes.string_at(tensor.data_ptr(), out.nbytes) == out.tobytes()
    tensor.set_layout(None)
    assert tensor.layout() == ""


@pytest.mark.gpu
def test_gpu_batch_and_tensor_copy_to_device_memory():
    cupy = pytest.importorskip("cupy")
    batch = _batch("headrace", SAMPLES, device="gpu")
    assert batch.ndim() == 2
    target = cupy.zeros((2, 2, 3), cupy.int16)
    batch.copy_to_external(target.data.ptr)
    np.testing.assert_array_equal(target.get(), np.stack(SAMPLES))
    stream = cupy.cuda.Stream(non_blocking=True)
    again = cupy.zeros_like(target)
    batch.copy_to_external(again.data.ptr, cuda_stream=stream, non_blocking=True)
    stream.synchronize()
    np.testing.assert_array_equal(again.get(), np.stack(SAMPLES))
    assert batch.data_ptr() == batch.as_array().data.ptr
    reshaped = batch.as_reshaped_tensor([3, 4])
    assert isinstance(reshaped, TensorGPU) and reshaped.shape() == [3, 4]
    one = TensorGPU(cupy.arange(6, dtype=cupy.float32).reshape(1, 6), "XY")
    assert one.squeeze() and one.shape() == [6] and one.ndim == 1
    out = cupy.zeros(6, cupy.float32)
    one.copy_to_external(out.data.ptr)
    np.testing.assert_array_equal(out.get(), np.arange(6, dtype=np.float32))
