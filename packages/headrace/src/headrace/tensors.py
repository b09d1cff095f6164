"""DALI's `tensors` module names: batches (TensorListCPU / TensorListGPU) and single tensors (TensorCPU /
TensorGPU), so that `from nvidia.dali.tensors import TensorCPU` ports by its import line."""

from __future__ import annotations

import numpy as np

from headrace.batch import TensorListCPU, TensorListGPU


class TensorCPU:
    """One tensor on the host, as DALI's TensorCPU: `shape()`, `dtype`, `layout()`, numpy and DLPack views."""

    device = "cpu"

    def __init__(self, array, layout: str = ""):
        self._array = np.asarray(array)
        self._layout = layout or ""

    def shape(self) -> list[int]:
        return list(self._array.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def ndim(self) -> int:
        return self._array.ndim

    def layout(self) -> str:
        return self._layout

    def as_array(self) -> np.ndarray:
        return self._array

    def squeeze(self, dim: int | None = None) -> bool:
        """Drop extents of 1 (all of them, or `dim`) in place; whether anything changed, as DALI's."""
        before = self._array.shape
        self._array = np.squeeze(self._array, axis=dim)
        return self._array.shape != before

    def __array__(self, dtype=None, copy=None):
        return self._array.astype(dtype) if dtype is not None else self._array

    def __dlpack__(self, stream=None, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __repr__(self) -> str:
        return f"TensorCPU(shape={self.shape()}, dtype={self.dtype}, layout={self._layout!r})"


class TensorGPU:
    """One tensor in GPU memory (a CuPy array), as DALI's TensorGPU: `shape()`, `layout()`, `as_cpu()`, DLPack."""

    device = "gpu"

    def __init__(self, array, layout: str = ""):
        self._array = array
        self._layout = layout or ""

    def shape(self) -> list[int]:
        return list(self._array.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._array.dtype)

    def layout(self) -> str:
        return self._layout

    def as_cpu(self) -> TensorCPU:
        return TensorCPU(self._array.get(), self._layout)

    def __dlpack__(self, stream=None, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._array.__cuda_array_interface__

    def __repr__(self) -> str:
        return f"TensorGPU(shape={self.shape()}, dtype={self.dtype}, layout={self._layout!r})"


__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
