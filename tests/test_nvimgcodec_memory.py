"""nvImageCodec's buffers from a CUDA memory pool (executor option decoder_memory="pool"): the allocator callbacks
forward nvImageCodec's calls to the driver's stream-ordered allocation (here to recording stand-ins, called through
the C function pointers nvImageCodec would call), and the option's values. The pool itself, with the driver, is
tested on the GPU in tests/test_gpu_decode.py."""

from __future__ import annotations

import ctypes

import pytest

from headrace import ExecutorOptions
from headrace.errors import SchemaError
from headrace_kernels.nvimgcodec_memory import callbacks, pinned_callbacks

DRIVER_ALLOC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
DRIVER_FREE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
HOST_ALLOC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint)
HOST_FREE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
NVIMGCODEC_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_void_p)


def test_the_callbacks_forward_to_the_pools_stream_ordered_allocation():
    calls = []

    def allocate(ptr, size, pool, stream):
        calls.append(("allocate", size, pool, stream))
        ctypes.c_uint64.from_address(ptr).value = 0x7F00_0000 + size
        return 0

    def free(address, stream):
        calls.append(("free", address, stream))
        return 2  # the driver's error code comes back to nvImageCodec

    driver_alloc, driver_free = DRIVER_ALLOC(allocate), DRIVER_FREE(free)
    device_malloc, device_free = callbacks(driver_alloc, driver_free)
    pool, stream = 0x1000, 0x2000
    out = ctypes.c_uint64(0)
    assert NVIMGCODEC_CALLBACK(device_malloc.address)(pool, ctypes.addressof(out), 4096, stream) == 0
    assert out.value == 0x7F00_0000 + 4096
    assert NVIMGCODEC_CALLBACK(device_free.address)(pool, out.value, 4096, stream) == 2
    assert calls == [("allocate", 4096, pool, stream), ("free", 0x7F00_0000 + 4096, stream)]


def test_the_pinned_callbacks_forward_to_page_locked_host_allocation():
    calls = []

    def allocate(ptr, size, flags):
        calls.append(("allocate", size, flags))
        ctypes.c_uint64.from_address(ptr).value = 0x5000_0000
        return 0

    def free(address):
        calls.append(("free", address))
        return 0

    host_alloc, host_free = HOST_ALLOC(allocate), HOST_FREE(free)
    pinned_malloc, pinned_free = pinned_callbacks(host_alloc, host_free)
    out = ctypes.c_uint64(0)
    assert NVIMGCODEC_CALLBACK(pinned_malloc.address)(0, ctypes.addressof(out), 1 << 20, 0x2000) == 0
    assert out.value == 0x5000_0000
    assert NVIMGCODEC_CALLBACK(pinned_free.address)(0, out.value, 1 << 20, 0x2000) == 0
    assert calls == [("allocate", 1 << 20, 0), ("free", 0x5000_0000)]


def test_decoder_memory_option_values():
    assert ExecutorOptions().decoder_memory == "nvimgcodec"
    assert ExecutorOptions.from_strings({"decoder_memory": "pool"}).decoder_memory == "pool"
    with pytest.raises(SchemaError, match="decoder_memory"):
        ExecutorOptions(decoder_memory="cuda")


def test_every_driver_function_called_is_declared_once(monkeypatch):
    """The driver functions that the events and the pool call are all in cuda_driver.DECLARED, which a stand-in
    libcuda (none on a machine without a GPU) gets declared: argument types and a CUresult."""
    import inspect
    import re

    from headrace_kernels import cuda_driver, nvimgcodec_memory
    from headrace_kernels.gpu import events

    called = set()
    for module in (events, nvimgcodec_memory):
        called |= set(re.findall(r"\b(?:driver\(\)|cuda)\.(cu\w+)", inspect.getsource(module)))
    assert called and called <= set(cuda_driver.DECLARED), called - set(cuda_driver.DECLARED)

    class Function:
        argtypes = restype = None

    stand_in = type("Lib", (), {name: Function() for name in cuda_driver.DECLARED})()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: stand_in if name == "libcuda.so.1" else None)
    cuda_driver.driver.cache_clear()
    try:
        cuda = cuda_driver.driver()
        assert all(getattr(cuda, name).restype is ctypes.c_int and getattr(cuda, name).argtypes == argtypes
                   for name, argtypes in cuda_driver.DECLARED.items())
    finally:
        cuda_driver.driver.cache_clear()
