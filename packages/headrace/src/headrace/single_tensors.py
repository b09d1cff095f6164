"""Single tensors as DALI's (TensorCPU / TensorGPU), and the copies into memory that plugins hand over
(`copy_to_external`), shared with the batches of headrace.batch."""

from __future__ import annotations

import numpy as np


def _address(ptr) -> int:
    """An address given as an int or a ctypes pointer."""
    value = getattr(ptr, "value", ptr)
    return int(value or 0)


def copy_to_host(array: np.ndarray, ptr) -> None:
    """Copy `array`'s elements, C order, to host memory at `ptr` (an int or a ctypes pointer)."""
    import ctypes

    data = np.ascontiguousarray(array)
    ctypes.memmove(_address(ptr), data.ctypes.data, data.nbytes)


def copy_to_device(array, ptr, cuda_stream, non_blocking: bool, producer_stream, device_id: int) -> None:
    """Copy a CuPy `array`'s elements, C order, to device memory at `ptr`, ordered after `producer_stream` (the
    stream that made the array), on `cuda_stream` (default: the producer's); wait for it unless `non_blocking`."""
    import cupy

    handle = _address(getattr(cuda_stream, "cuda_stream", getattr(cuda_stream, "ptr", cuda_stream)))
    with cupy.cuda.Device(device_id):
        source = cupy.ascontiguousarray(array)
        stream = cupy.cuda.ExternalStream(handle) if handle else producer_stream or cupy.cuda.get_current_stream()
        if producer_stream is not None and stream is not producer_stream:
            stream.wait_event(producer_stream.record())
        target = cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(_address(ptr), source.nbytes, None, device_id), 0)
        target.copy_from_device_async(source.data, source.nbytes, stream)
        if not non_blocking:
            stream.synchronize()


class _Tensor:
    """What the host and device tensors share: the array, a layout, where the data came from."""

    def __init__(self, array, layout: str = "", source_info: str = ""):
        self._array = array
        self._layout = layout or ""
        self._source_info = source_info

    def shape(self) -> list[int]:
        return list(self._array.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._array.dtype)

    @property
    def ndim(self) -> int:
        return self._array.ndim

    def layout(self) -> str:
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        self._layout = layout or ""

    def source_info(self) -> str:
        """Where the data came from (a file name), as DALI's; '' when unknown."""
        return self._source_info

    def squeeze(self, dim: int | None = None) -> bool:
        """Drop extents of 1 (all of them, or `dim`) in place; whether anything changed, as DALI's."""
        before = tuple(self._array.shape)
        self._array = self._array.squeeze(axis=dim)
        return tuple(self._array.shape) != before

    def __dlpack__(self, stream=None, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape()}, dtype={self.dtype}, layout={self._layout!r})"


class TensorCPU(_Tensor):
    """One tensor on the host, as DALI's TensorCPU: `shape()`, `dtype`, `layout()`, numpy and DLPack views."""

    device = "cpu"

    def __init__(self, array, layout: str = "", source_info: str = ""):
        super().__init__(np.asarray(array), layout, source_info)

    def as_array(self) -> np.ndarray:
        return self._array

    def as_cpu(self) -> TensorCPU:
        """The tensor itself: it is on the host already (DALI's passthrough)."""
        return self

    def data_ptr(self) -> int:
        """The address of the tensor's first element (made C-contiguous first)."""
        self._array = np.ascontiguousarray(self._array)
        return self._array.ctypes.data

    def copy_to_external(self, ptr) -> None:
        """Copy the tensor's elements to host memory at `ptr` (an int or ctypes.c_void_p), as DALI's."""
        copy_to_host(self._array, ptr)

    def __array__(self, dtype=None, copy=None):
        return self._array.astype(dtype) if dtype is not None else self._array


class TensorGPU(_Tensor):
    """One tensor in GPU memory (a CuPy array), as DALI's TensorGPU: `shape()`, `layout()`, `as_cpu()`, DLPack; the
    stream that made it, which copies wait for."""

    device = "gpu"

    def __init__(self, array, layout: str = "", source_info: str = "", stream=None, device_id: int = 0):
        super().__init__(array, layout, source_info)
        self.stream, self.device_id = stream, device_id

    def data_ptr(self) -> int:
        """The device address of the tensor's first element (made C-contiguous first)."""
        import cupy

        self._array = cupy.ascontiguousarray(self._array)
        return int(self._array.data.ptr)

    def copy_to_external(self, ptr, cuda_stream=None, non_blocking: bool = False, use_copy_kernel: bool = False
                         ) -> None:
        """Copy the tensor to device memory at `ptr` on `cuda_stream` (default: the stream that made it), as DALI's;
        waits for the copy unless `non_blocking` (use_copy_kernel is accepted)."""
        copy_to_device(self._array, ptr, cuda_stream, non_blocking, self.stream, self.device_id)

    def as_cpu(self) -> TensorCPU:
        return TensorCPU(self._array.get(), self._layout, self._source_info)

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._array.__cuda_array_interface__
