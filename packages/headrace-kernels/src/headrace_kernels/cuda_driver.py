"""The CUDA driver's functions that headrace calls through ctypes, each declared once: ctypes releases the GIL for
the length of a foreign call (gpu/events.py), and numba cfuncs call them from nvImageCodec's threads
(nvimgcodec_memory.py). Every function returns a CUresult, which `check` turns into the caller's error."""

from __future__ import annotations

import ctypes
import functools

DECLARED = {
    "cuEventCreate": [ctypes.c_void_p, ctypes.c_uint], "cuEventDestroy_v2": [ctypes.c_void_p],
    "cuEventRecord": [ctypes.c_void_p, ctypes.c_void_p], "cuEventSynchronize": [ctypes.c_void_p],
    "cuEventQuery": [ctypes.c_void_p], "cuStreamWaitEvent": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint],
    "cuMemPoolCreate": [ctypes.c_void_p, ctypes.c_void_p],
    "cuMemPoolSetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p],
    "cuMemPoolGetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p],
    "cuMemPoolTrimTo": [ctypes.c_void_p, ctypes.c_size_t],
    "cuMemAllocFromPoolAsync": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p],
    "cuMemFreeAsync": [ctypes.c_void_p, ctypes.c_void_p],  # a CUdeviceptr is passed as a pointer is
    "cuMemHostAlloc": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint], "cuMemFreeHost": [ctypes.c_void_p]}
"""Each function's argument types."""


@functools.cache
def driver() -> ctypes.CDLL:
    """libcuda, with the functions of DECLARED declared."""
    cuda = ctypes.CDLL("libcuda.so.1")
    for name, argtypes in DECLARED.items():
        function = getattr(cuda, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    return cuda


CUDA_SUCCESS = 0


def check(status: int, what: str, error: type[Exception]) -> None:
    """Raise `error` naming the call `what` where a driver call did not return CUDA_SUCCESS."""
    if status != CUDA_SUCCESS:
        raise error(f"{what} failed with CUresult {status}")
