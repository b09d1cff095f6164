"""Batches to torch tensors without a copy: anything with `__dlpack__` (CPU or GPU) goes through DLPack."""

from __future__ import annotations

import torch


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
