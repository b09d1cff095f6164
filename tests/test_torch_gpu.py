"""GPU batches become torch CUDA tensors on their own memory and device (DLPack), as CPU batches do on the host.
A CuPy array stands for a GPU batch: it is a real device buffer with `__dlpack__`, as headrace's GPU batches are."""

from __future__ import annotations

import pytest
import torch

from headrace_torch import to_torch
from headrace_torch.iterator import batch_tensor

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
    tensor = batch_tensor(batch, None)
    assert tensor.device == torch.device("cuda", last) and tensor.data_ptr() == batch.data.ptr


def _gpu_pipeline(data_dir: str, **kwargs):
    from headrace import fn, pipeline_def, types

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=3, enable_checkpointing=True)
    def gpu_train():
        jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader", pad_last_batch=True)
        images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB, random_area=[0.3, 1.0])
        images = fn.resize(images, resize_x=16, resize_y=16)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[128.0] * 3,
                                          std=[64.0] * 3, mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    return gpu_train(**kwargs)


def _loader(data_dir: str):
    from headrace_torch import GenericIterator, LastBatchPolicy

    return GenericIterator(_gpu_pipeline(data_dir), ["data", "label"], reader_name="Reader", auto_reset=True,
                           last_batch_policy=LastBatchPolicy.PARTIAL, output_dtypes={"label": torch.int64})


def _take(loader, count: int) -> list:
    out = []
    while len(out) < count:
        try:
            batch = next(loader)[0]
        except StopIteration:
            continue
        out.append((batch["data"].cpu().clone(), batch["label"].clone()))
    return out


def test_gpu_pipeline_batches_arrive_on_the_gpu_each_sample_once(image_folder):
    loader = _loader(str(image_folder))
    labels, images = [], 0
    for batch in loader:
        data, label = batch[0]["data"], batch[0]["label"]
        assert data.is_cuda and data.device.index == 0 and data.shape[1:] == (3, 16, 16)
        assert not label.is_cuda and label.dtype == torch.int64
        assert torch.isfinite(data).all()
        images += len(data)
        labels += label.reshape(-1).tolist()
    assert images == 37 and sorted(set(labels)) == [0, 1, 2]  # PARTIAL + padding: the 37 images once


def test_gpu_pipeline_checkpoint_restores_bit_for_bit(image_folder):
    reference = _take(_loader(str(image_folder)), 14)
    first = _loader(str(image_folder))
    _take(first, 6)
    state = first.state_dict()
    resumed = _loader(str(image_folder))
    resumed.load_state_dict(state)
    for i, ((a, la), (b, lb)) in enumerate(zip(_take(resumed, 8), reference[6:], strict=True)):
        assert torch.equal(a, b) and torch.equal(la, lb), f"batch {6 + i}"
