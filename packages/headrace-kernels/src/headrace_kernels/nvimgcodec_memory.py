"""A CUDA memory pool for nvImageCodec's own device buffers (executor option `decoder_memory="pool"`), as DALI gives
its decoders its pool: nvImageCodec allocates and frees on its decode streams (the driver's cuMemAllocFromPoolAsync
and cuMemFreeAsync), each allocation rounded up to the node's device_memory_padding. Without an allocator it uses
its own, which allocates with cudaMalloc and frees with cudaFree (a wait for the whole device) when its buffers
grow. nvJPEG takes custom allocators only as a pair, so pinned host buffers come through one too: the driver's
cuMemHostAlloc and cuMemFreeHost (nvJPEG's own choice), rounded up to host_memory_padding. The callbacks are numba
cfuncs: nvImageCodec's threads call them without the GIL."""

from __future__ import annotations

import ctypes
import threading

import numba
import numpy as np
from numba import types

from headrace_kernels.cuda_driver import check, driver
from headrace_kernels.nvimgcodec_capi import CApiError, new, pointer

CU_MEM_ALLOCATION_TYPE_PINNED = 1  # device memory that is not migrated
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4
CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5
POOL_PROPS_BYTES = 128
"""Room for CUmemPoolProps (88 bytes in CUDA 12 and 13), zeroed past the four fields set here."""


def callbacks(allocate, free) -> tuple:
    """The cfuncs of an nvimgcodecDeviceAllocator_t (device_malloc, device_free) that call the ctypes functions
    `allocate(ptr, size, pool, stream)` and `free(address, stream)`, the context argument being the pool."""
    signature = types.int32(types.voidptr, types.voidptr, types.uintp, types.voidptr)

    @numba.cfunc(signature, nopython=True)
    def device_malloc(ctx, ptr, size, stream):
        return allocate(ptr, size, ctx, stream)

    @numba.cfunc(signature, nopython=True)
    def device_free(ctx, ptr, size, stream):
        return free(ptr, stream)

    return device_malloc, device_free


def pinned_callbacks(allocate, free) -> tuple:
    """The cfuncs of an nvimgcodecPinnedAllocator_t (pinned_malloc, pinned_free) that call the ctypes functions
    `allocate(ptr, size, flags=0)` and `free(address)`: page-locked host memory, freed once the device is idle."""
    signature = types.int32(types.voidptr, types.voidptr, types.uintp, types.voidptr)

    @numba.cfunc(signature, nopython=True)
    def pinned_malloc(ctx, ptr, size, stream):
        return allocate(ptr, size, 0)

    @numba.cfunc(signature, nopython=True)
    def pinned_free(ctx, ptr, size, stream):
        return free(ptr)

    return pinned_malloc, pinned_free


def _check(status: int, what: str) -> None:
    check(status, what, CApiError)


class DecoderMemory:
    """One device's pool for nvImageCodec's buffers, kept for the process (its unused memory goes back to the device
    with `trim`), and its allocator structures by padding."""

    _shared: dict[int, DecoderMemory] = {}
    _lock = threading.Lock()

    def __init__(self, device_id: int):
        cuda = driver()
        props = np.zeros(POOL_PROPS_BYTES // 4, np.int32)
        props[0], props[2], props[3] = CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_LOCATION_TYPE_DEVICE, device_id
        handle = ctypes.c_void_p()
        _check(cuda.cuMemPoolCreate(ctypes.byref(handle), props.ctypes.data), "cuMemPoolCreate")
        self.pool = handle.value
        keep = ctypes.c_uint64(2**64 - 1)  # freed memory stays in the pool until `trim`
        _check(cuda.cuMemPoolSetAttribute(self.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, ctypes.byref(keep)),
               "cuMemPoolSetAttribute")
        self._callbacks = callbacks(cuda.cuMemAllocFromPoolAsync, cuda.cuMemFreeAsync)
        self._pinned_callbacks = pinned_callbacks(cuda.cuMemHostAlloc, cuda.cuMemFreeHost)
        # never freed: a decoder destroyed while the interpreter exits calls them
        for function in self._callbacks + self._pinned_callbacks:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(function))
        self._allocators: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def shared(cls, device_id: int) -> DecoderMemory:
        with cls._lock:
            memory = cls._shared.get(device_id)
            if memory is None:
                memory = cls._shared[device_id] = cls(device_id)
            return memory

    def allocators(self, device_padding: int, host_padding: int) -> tuple[int, int]:
        """The addresses of an nvimgcodecDeviceAllocator_t on this pool and of an nvimgcodecPinnedAllocator_t, which
        round allocations up to multiples of these paddings (0: none), kept as long as the pool."""
        with self._lock:
            pair = self._allocators.get((device_padding, host_padding))
            if pair is None:
                device, pinned = new("nvimgcodecDeviceAllocator_t"), new("nvimgcodecPinnedAllocator_t")
                device["device_malloc"], device["device_free"] = (f.address for f in self._callbacks)
                device["device_ctx"], device["device_mem_padding"] = self.pool, device_padding
                pinned["pinned_malloc"], pinned["pinned_free"] = (f.address for f in self._pinned_callbacks)
                pinned["pinned_mem_padding"] = host_padding
                pair = self._allocators[(device_padding, host_padding)] = (device, pinned)
            return pointer(pair[0]), pointer(pair[1])

    @classmethod
    def reserved(cls) -> dict[int, int]:
        """The device memory each device's pool holds now, in bytes (nvImageCodec's buffers, and what they gave
        back to it and `trim` has not returned): executor option decoder_memory='pool' makes it countable."""
        held = {}
        with cls._lock:
            pools = dict(cls._shared)
        for device_id, memory in pools.items():
            value = ctypes.c_uint64()
            _check(driver().cuMemPoolGetAttribute(memory.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                                  ctypes.byref(value)), "cuMemPoolGetAttribute")
            held[device_id] = value.value
        return held

    def trim(self) -> None:
        """Give the pool's unused memory back to the device."""
        _check(driver().cuMemPoolTrimTo(self.pool, 0), "cuMemPoolTrimTo")
