"""Batches to torch tensors without a copy: anything with `__dlpack__` (CPU or GPU) goes through DLPack."""

from __future__ import annotations

import numpy as np
import torch


def to_torch(batch, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A torch tensor sharing the batch's memory (CPU or GPU, wherever the batch lives).

    `batch` is a headrace TensorList (dense, or made dense by `as_tensor()`), or any object with `__dlpack__`.
    `dtype` converts afterwards (a copy only when the type differs), e.g. int64 labels for a loss function.
    """
    if hasattr(batch, "as_tensor") and not _is_dense(batch):
        shapes = batch.shape() if callable(getattr(batch, "shape", None)) else "?"
        raise ValueError(f"the batch's samples have different shapes ({_few(shapes)}); a torch tensor needs one "
                         "shape: resize or pad them in the pipeline, or set dynamic_shape only for varying batch "
                         "shapes")
    tensor = torch.from_dlpack(batch)
    if dtype is not None and tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    return tensor


def _is_dense(batch) -> bool:
    try:
        return bool(batch.is_dense_tensor())
    except AttributeError:
        return True


def _few(shapes) -> str:
    shapes = list(dict.fromkeys(tuple(s) for s in shapes)) if not isinstance(shapes, str) else shapes
    return str(shapes[:4]) + ("..." if len(shapes) > 4 else "")


def numpy_dtype_to_torch(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype
