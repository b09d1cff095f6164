"""The batches a pipeline returns: a list of samples, dense when they share a shape, with numpy and DLPack views."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

import numpy as np

from headrace.single_tensors import TensorCPU, TensorGPU, copy_to_device, copy_to_host
from headrace_kernels.gpu import events
from headrace_kernels.gpu.ragged import PackedSamples


class _TensorList:
    """What CPU and GPU batches share: a dense (N, ...) array or a list of samples, a layout, sample sources."""

    _dense: object
    _samples: list | None
    _layout: str
    _source_info: list[str] | None

    def __len__(self) -> int:
        return len(self._dense) if self._dense is not None else len(self._samples)

    def at(self, index: int):
        raise NotImplementedError

    def __getitem__(self, index: int):
        return self.at(index)

    def __iter__(self):
        return (self.at(i) for i in range(len(self)))

    def is_dense_tensor(self) -> bool:
        if self._dense is not None:
            return True
        first = self._samples[0] if self._samples else None
        return all(tuple(s.shape) == tuple(first.shape) and s.dtype == first.dtype for s in self._samples)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.at(0).dtype)

    def layout(self) -> str:
        return self._layout

    def set_layout(self, layout: str | None) -> None:
        """Name the samples' axes (DALI's); None or '' clears the name."""
        self._layout = layout or ""

    def ndim(self) -> int:
        """The number of dimensions of the samples (DALI's)."""
        return len(self.at(0).shape) if len(self) else 0

    def source_info(self, index: int) -> str:
        """Where sample `index` came from, as DALI words it (a reader's SampleSource gives its source_info text)."""
        source = self._source_info[index] if self._source_info else ""
        return getattr(source, "source_info", source)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)}, dtype={self.dtype}, layout={self._layout!r})"


class TensorListCPU(_TensorList):
    """A batch on the host, as DALI's TensorListCPU: `at(i)`, `as_array()`, `as_tensor()`, `__dlpack__`."""

    device = "cpu"

    def __init__(self, samples: Sequence[np.ndarray] | np.ndarray, layout: str = "",
                 source_info: Sequence[str] | None = None):
        self._dense = samples if isinstance(samples, np.ndarray) else None
        self._samples = None if self._dense is not None else list(samples)
        self._layout = layout
        self._source_info = list(source_info) if source_info is not None else None

    def at(self, index: int) -> np.ndarray:
        return self._dense[index] if self._dense is not None else self._samples[index]

    def as_array(self) -> np.ndarray:
        """The batch as one (N, ...) array; a view when the batch is dense already."""
        if self._dense is None:
            if not self.is_dense_tensor():
                shapes = sorted({s.shape for s in self._samples})
                raise ValueError(f"the samples have different shapes ({shapes[:4]}...): use at(i) or a padding op")
            self._dense = np.stack(self._samples)
            self._samples = None
        return self._dense

    def as_tensor(self) -> TensorListCPU:
        self.as_array()
        return self

    def _contiguous(self) -> np.ndarray:
        """The samples' elements back to back, in one C-contiguous array (the dense batch where it is one)."""
        if self._dense is not None or self.is_dense_tensor():
            return np.ascontiguousarray(self.as_array())
        return np.concatenate([np.ascontiguousarray(s).ravel() for s in self._samples])

    def data_ptr(self) -> int:
        """The address of the first element of the batch, whose samples lie back to back (DALI's); samples of
        different shapes are first gathered into one buffer, which they then view."""
        flat = self._contiguous()
        if self._dense is not None:  # the dense batch itself, or its contiguous copy in its place
            self._dense = flat
        else:
            ends = np.cumsum([s.size for s in self._samples])
            self._samples = [flat[end - s.size:end].reshape(s.shape) for end, s in zip(ends, self._samples,
                                                                                     strict=True)]
        return flat.ctypes.data

    def as_reshaped_tensor(self, shape: Sequence[int]):
        """The batch's elements, back to back, as one tensor of `shape` (DALI's)."""
        return TensorCPU(self._contiguous().reshape(tuple(shape)), self._layout)

    def copy_to_external(self, ptr) -> None:
        """Copy the batch's elements, back to back, to host memory at `ptr` (an int or ctypes.c_void_p), as DALI's
        plugins hand their tensors' memory."""
        copy_to_host(self._contiguous(), ptr)

    def __array__(self, dtype=None, copy=None):
        array = self.as_array()
        return array.astype(dtype) if dtype is not None else array

    def __dlpack__(self, stream=None, **kwargs):
        return self.as_array().__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.as_array().__dlpack_device__()

    def shape(self) -> list[tuple[int, ...]]:
        return [tuple(self.at(i).shape) for i in range(len(self))]



class TensorListGPU(_TensorList):
    """A batch in GPU memory, as DALI's TensorListGPU: `at(i)` (CuPy arrays), `as_tensor()`, `as_cpu()`, and zero-copy
    `__dlpack__` / `__cuda_array_interface__` for torch and CuPy. The data is produced on the pipeline's CUDA stream;
    both protocols make the consumer wait for it."""

    device = "gpu"

    def __init__(self, samples, layout: str = "", source_info: Sequence[str] | None = None, stream=None,
                 device_id: int = 0):
        packed = isinstance(samples, PackedSamples)
        self._dense = None if packed or isinstance(samples, list | tuple) else samples
        self._samples = (samples if packed else list(samples)) if self._dense is None else None
        self._layout = layout
        self._source_info = list(source_info) if source_info is not None else None
        self.stream = stream
        self.device_id = device_id

    @property
    def dense(self):
        """The batch as one (N, ...) CuPy array when it is stored that way, else None (no copy is made)."""
        return self._dense

    @property
    def packed(self) -> PackedSamples | None:
        """The samples as they lie in one device buffer (PackedSamples: buffer, starts, shapes) when a kernel made
        them so, else None (no copy is made)."""
        return self._samples if isinstance(self._samples, PackedSamples) else None

    def samples(self, raw: bool = False) -> list:
        """The samples as CuPy arrays; `raw` keeps a decoder's DeviceImage records as they are (the image kernels
        read those directly)."""
        if self._dense is not None:
            return list(self._dense)
        if raw:
            return list(self._samples)
        return [self.at(i) for i in range(len(self))]

    def part(self, start: int, stop: int) -> TensorListGPU:
        """Samples start..stop-1 as a batch of their own: views of this one's memory (no copy)."""
        if self._dense is not None:
            samples = self._dense[start:stop]
        elif isinstance(self._samples, PackedSamples):
            packed = self._samples
            samples = PackedSamples(packed.flat, packed.starts[start:stop], packed.shapes[start:stop],
                                    packed.sizes[start:stop])
        else:
            samples = self._samples[start:stop]
        return TensorListGPU(samples, self._layout, self._source_info[start:stop] if self._source_info else None,
                             self.stream, self.device_id)

    def with_metadata(self, layout: str, source_info: Sequence[str]) -> TensorListGPU:
        """Set the layout and sample sources (a pipeline output), returning the batch."""
        self._layout, self._source_info = layout, list(source_info)
        return self

    def at(self, index: int):
        """Sample `index` as a CuPy array (a view of the batch)."""
        if self._dense is not None:
            return self._dense[index]
        sample = self._samples[index]
        if sample is not None and not hasattr(sample, "get"):  # a decoder's DeviceImage: view it as a CuPy array
            # (None: a sample that did not take the `if` branch this batch was computed in)
            import cupy

            sample = self._samples[index] = cupy.asarray(sample)
        return sample

    def as_array(self):
        """The batch as one dense (N, ...) CuPy array; samples of different shapes raise ValueError."""
        if self._dense is None:
            if not self.is_dense_tensor():
                shapes = sorted({tuple(s.shape) for s in self._samples})
                raise ValueError(f"the samples have different shapes ({shapes[:4]}...): use at(i) or a padding op")
            import cupy

            with cupy.cuda.Device(self.device_id), self._stream_context():
                self._dense = cupy.stack([self.at(i) for i in range(len(self))])
            self._samples = None
        return self._dense

    def as_tensor(self) -> TensorListGPU:
        self.as_array()
        return self

    def data_ptr(self) -> int:
        """The device address of the first element of the batch (made one dense array first), DALI's."""
        return int(self.as_array().data.ptr)

    def as_reshaped_tensor(self, shape: Sequence[int]):
        """The dense batch as one tensor of `shape` (DALI's)."""
        return TensorGPU(self.as_array().reshape(tuple(shape)), self._layout, stream=self.stream,
                         device_id=self.device_id)

    def copy_to_external(self, ptr, cuda_stream=None, non_blocking: bool = False, use_copy_kernel: bool = False
                         ) -> None:
        """Copy the dense batch to device memory at `ptr` on `cuda_stream` (a handle or an object with `.ptr`, or
        `.cuda_stream`; default: the batch's stream), after the batch is computed; waits for the copy unless
        `non_blocking` (DALI's; use_copy_kernel is accepted)."""
        copy_to_device(self.as_array(), ptr, cuda_stream, non_blocking, self.stream, self.device_id)

    def _stream_context(self):
        import contextlib

        return self.stream if self.stream is not None else contextlib.nullcontext()

    def synchronize(self) -> None:
        """Wait on the host until the batch is computed."""
        if self.stream is not None:
            self.stream.synchronize()

    def as_cpu(self) -> TensorListCPU:
        """A host copy of the batch."""
        self.synchronize()
        if self._dense is not None:
            return TensorListCPU(self._dense.get(), self._layout, self._source_info)
        packed = self.packed
        if packed is not None:  # one copy of the buffer, then host views
            host = packed.flat.get()
            return TensorListCPU([host[int(a):int(a) + int(n)].reshape(shape) for a, n, shape in
                                  zip(packed.starts, packed.sizes, packed.shapes, strict=True)],
                                 self._layout, self._source_info)
        return TensorListCPU([self.at(i).get() for i in range(len(self))], self._layout, self._source_info)

    def _wait_on(self, consumer_stream) -> None:
        """Make the consumer's stream (a CUDA stream handle; None or the default streams: the host) wait for us."""
        if self.stream is None or consumer_stream == -1:
            return
        if consumer_stream is None or consumer_stream in (1, 2):
            self.stream.synchronize()
            return
        import cupy

        with cupy.cuda.Device(self.device_id):
            events.wait(cupy.cuda.ExternalStream(consumer_stream), events.record(self.stream))

    def __dlpack__(self, stream=None, **kwargs):
        array = self.as_array()
        self._wait_on(stream)
        try:
            return array.__dlpack__(stream=-1, **kwargs)  # the array API's "no synchronization": done above
        except Exception:  # noqa: BLE001 - an older CuPy without stream=-1
            return array.toDlpack()

    def __dlpack_device__(self):
        return (2, self.device_id)  # kDLCUDA

    @property
    def __cuda_array_interface__(self) -> dict:
        interface = dict(self.as_array().__cuda_array_interface__)
        interface["version"] = 3
        interface["stream"] = self.stream.ptr if self.stream is not None and self.stream.ptr else None
        if interface["stream"] is None:
            self.synchronize()
            interface.pop("stream")
        return interface

    def shape(self) -> list[tuple[int, ...]]:
        return [tuple(self.at(i).shape) for i in range(len(self))]



class BufferPool:
    """Reusable batch buffers: a buffer is handed out again only when nothing outside the pool references it
    (no batch, view or DLPack capsule), so reuse never overwrites data a user still holds. It keeps the buffers of
    the `max_shapes` (shape, dtype) keys used last: outputs whose shape changes from batch to batch (audio padded
    to each batch's longest sample) would otherwise keep a buffer of every shape they ever had."""

    def __init__(self, per_key: int, max_shapes: int = 16):
        self.per_key, self.max_shapes = per_key, max_shapes
        self._buffers: dict[tuple, list[np.ndarray]] = {}  # least recently used key first
        self._lock = threading.Lock()

    def get(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        key = (tuple(shape), np.dtype(dtype).str)
        with self._lock:
            buffers = self._buffers.pop(key, [])
            self._buffers[key] = buffers  # now the most recently used
            for buffer in buffers:
                # references: the list, the loop variable and getrefcount's argument
                if sys.getrefcount(buffer) <= 3:
                    return buffer
            buffer = np.empty(shape, dtype)
            if len(buffers) < self.per_key:
                buffers.append(buffer)
            while len(self._buffers) > self.max_shapes:  # the oldest key's buffers go once their users let go
                del self._buffers[next(iter(self._buffers))]
            return buffer

    def release(self) -> None:
        """Forget every pooled buffer; memory returns once users drop their batches."""
        with self._lock:
            self._buffers.clear()

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for buffers in self._buffers.values() for b in buffers)
