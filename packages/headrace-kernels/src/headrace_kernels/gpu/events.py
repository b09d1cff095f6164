"""CUDA events recorded, waited for and queried with the interpreter lock released. CuPy's `Stream.record`,
`Stream.wait_event`, `Event.done` and event creation hold the lock through their driver calls, and a driver call
can wait on the driver's own lock while another thread (nvImageCodec's, decoding) is inside the driver: every
Python thread of the pipeline then waits with it. ctypes releases the lock for the length of a foreign call."""

from __future__ import annotations

import ctypes

from headrace_kernels.cuda_driver import check, driver

CU_EVENT_DISABLE_TIMING = 2
CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NOT_READY = 201, 600


class EventError(RuntimeError):
    """A CUDA driver call on an event failed."""


def _check(status: int, what: str) -> None:
    check(status, what, EventError)


class Event:
    """A CUDA event without timing, recorded on a stream (`record`); `ptr` as CuPy's events have, so CuPy's
    `Stream.wait_event` takes it too."""

    def __init__(self):
        self.ptr = 0
        handle = ctypes.c_void_p()
        status = driver().cuEventCreate(ctypes.byref(handle), CU_EVENT_DISABLE_TIMING)
        if status == CUDA_ERROR_INVALID_CONTEXT:  # a thread that has made no runtime call yet: make it current
            from headrace_kernels.gpu.cupy_module import cupy

            runtime = cupy().cuda.runtime
            runtime.setDevice(runtime.getDevice())
            status = driver().cuEventCreate(ctypes.byref(handle), CU_EVENT_DISABLE_TIMING)
        _check(status, "cuEventCreate")
        self.ptr = handle.value or 0

    def synchronize(self) -> None:
        """Wait for the work queued before the record."""
        _check(driver().cuEventSynchronize(self.ptr), "cuEventSynchronize")

    @property
    def done(self) -> bool:
        status = driver().cuEventQuery(self.ptr)
        if status == CUDA_ERROR_NOT_READY:
            return False
        _check(status, "cuEventQuery")
        return True

    def __del__(self):
        if self.ptr:
            try:
                driver().cuEventDestroy_v2(self.ptr)  # a status at interpreter exit, context gone, is no matter
            except Exception:  # noqa: BLE001 - ctypes itself torn down at exit
                pass
            self.ptr = 0


def record(stream) -> Event:
    """A new event recorded on `stream` (anything with a CUDA stream handle as `ptr`)."""
    event = Event()
    _check(driver().cuEventRecord(event.ptr, stream.ptr), "cuEventRecord")
    return event


def wait(stream, event) -> None:
    """Make `stream`'s later work wait for `event` (ours or CuPy's)."""
    _check(driver().cuStreamWaitEvent(stream.ptr, event.ptr, 0), "cuStreamWaitEvent")
