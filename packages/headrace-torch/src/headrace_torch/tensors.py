"""Batches to torch tensors: without a copy through DLPack (`to_torch`), or copied into a torch tensor the caller
owns (`feed_ndarray`, DALI's)."""

from __future__ import annotations

import numpy as np
import torch

from headrace.enums import DALIDataType, to_numpy_dtype


def _torch_types() -> dict:
    pairs = {DALIDataType.FLOAT: torch.float32, DALIDataType.FLOAT64: torch.float64,
             DALIDataType.FLOAT16: torch.float16, DALIDataType.UINT8: torch.uint8, DALIDataType.INT8: torch.int8,
             DALIDataType.BOOL: torch.bool, DALIDataType.INT16: torch.int16, DALIDataType.INT32: torch.int32,
             DALIDataType.INT64: torch.int64}
    return {**pairs, **{to_numpy_dtype(dali_type): torch_type for dali_type, torch_type in pairs.items()}}


to_torch_type = _torch_types()
"""The torch dtype of each element type torch has, keyed by DALI data type (as DALI's `to_torch_type`) and by the
numpy dtype headrace's batches report."""


def to_torch(batch, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A torch tensor sharing the batch's memory (CPU or GPU, wherever the batch lives).

    `batch` is a headrace TensorList (dense, or made dense by `as_tensor()`), or any object with `__dlpack__`.
    `dtype` converts afterwards (a copy only when the type differs), e.g. int64 labels for a loss function.
    """
    tensor = torch.from_dlpack(check_dense(batch))
    if dtype is not None and tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    return tensor


def check_dense(batch):
    """The batch as one dense tensor (a TensorList's `as_tensor()`), or a clear error when its samples differ in
    shape: a torch tensor needs one shape."""
    if not hasattr(batch, "as_tensor"):
        return batch
    try:
        return batch.as_tensor()
    except ValueError:
        shapes = batch.shape() if callable(getattr(batch, "shape", None)) else "?"
        raise ValueError(f"the batch's samples have different shapes ({_few(shapes)}); a torch tensor needs one "
                         "shape: resize, crop or pad them in the pipeline") from None


def _few(shapes) -> str:
    shapes = list(dict.fromkeys(tuple(s) for s in shapes)) if not isinstance(shapes, str) else shapes
    return str(shapes[:4]) + ("..." if len(shapes) > 4 else "")


def feed_ndarray(tensor, arr: torch.Tensor, cuda_stream=None) -> torch.Tensor:
    """Copy a batch (dense) or a tensor into the torch tensor `arr`, which must have its element type and shape (a
    batch's shape is (samples, ...)), as DALI's `feed_ndarray`. A GPU batch is copied on `cuda_stream` (a torch or
    CuPy stream, or a handle) without waiting for the copy, else on the batch's own stream, waited for."""
    if torch.is_tensor(tensor) or not hasattr(tensor, "copy_to_external"):
        raise TypeError(f"feed_ndarray copies a headrace batch or tensor, got {type(tensor).__name__}")
    dtype = to_torch_type.get(np.dtype(tensor.dtype))
    if dtype != arr.dtype:
        raise TypeError(f"the element type of the batch ({tensor.dtype}) doesn't match the element type of the target "
                        f"torch tensor ({arr.dtype})")
    shape = _dense_shape(tensor)
    if shape != list(arr.size()):
        raise ValueError(f"shapes do not match: the batch has shape {shape}, the torch tensor {list(arr.size())}")
    if not arr.is_contiguous():
        raise ValueError("the target torch tensor must be contiguous")
    if getattr(tensor, "device", "cpu") == "gpu":
        tensor.copy_to_external(arr.data_ptr(), cuda_stream, non_blocking=cuda_stream is not None)
    else:
        tensor.copy_to_external(arr.data_ptr())
    return arr


def _dense_shape(tensor) -> list[int]:
    """The shape of a tensor, or of a batch as one array (samples first); a batch of ragged samples is refused."""
    if not hasattr(tensor, "at"):
        return list(tensor.shape())
    shapes = {tuple(s) for s in tensor.shape()}
    if len(shapes) > 1:
        raise ValueError(f"the batch's samples have different shapes ({_few(shapes)}); feed_ndarray copies one "
                         "dense array")
    return [len(tensor), *(next(iter(shapes)) if shapes else ())]
