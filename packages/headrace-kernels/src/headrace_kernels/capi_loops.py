"""The per-image loops of headrace_kernels.nvimgcodec_capi, compiled by numba without the GIL. The C functions
arrive as arguments (ctypes function objects), not as globals, so the compiled code does not depend on where the
library was loaded and numba caches it on disk. Pointers are uint64 array entries, computed by the caller."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def parse(create, get_info, instance, handles, handle_at, data_at, sizes, info_at, statuses):
    """Code stream i from sizes[i] bytes at data_at[i] (into handles[i]), and its image info (at info_at[i])."""
    for i in range(len(sizes)):
        if sizes[i] == 0:
            statuses[i] = -1
            continue
        status = create(instance, handle_at[i], data_at[i], sizes[i], np.uint64(0))
        if status == 0:
            status = get_info(handles[i], info_at[i])
        statuses[i] = status


@numba.njit(nogil=True, cache=True)
def cut(get_sub, parents, sub_at, view_at, statuses):
    """The sub code stream of view view_at[i] of each stream parents[i] (into sub_at[i])."""
    for i in range(len(parents)):
        if parents[i] != 0:
            statuses[i] = get_sub(parents[i], sub_at[i], view_at[i])


@numba.njit(nogil=True, cache=True)
def destroy_streams(destroy, handles):
    for i in range(len(handles)):
        if handles[i] != 0:
            destroy(handles[i])
            handles[i] = 0


@numba.njit(nogil=True, cache=True)
def submit_decode(create_image, destroy_image, decode, instance, decoder, images, image_at, info_at, streams_ptr,
                  params_ptr, future_ptr):
    """Create the output images and start decoding the batch (the future at future_ptr says when it is done); on a
    failure the images made so far are destroyed."""
    status = 0
    for k in range(len(images)):
        status = create_image(instance, image_at[k], info_at[k])
        if status != 0:
            break
    if status == 0:
        status = decode(decoder, streams_ptr, image_at[0], np.int32(len(images)), params_ptr, future_ptr)
    if status != 0:
        for k in range(len(images)):
            if images[k] != 0:
                destroy_image(images[k])
                images[k] = 0
    return status


@numba.njit(nogil=True, cache=True)
def finish_decode(wait, get_status, destroy_future, destroy_image, images, future, statuses_ptr, count_ptr):
    """Wait for a started decode, read the per-image statuses, destroy the future and the images."""
    wait(future[0])
    status = get_status(future[0], statuses_ptr, count_ptr)
    destroy_future(future[0])
    for k in range(len(images)):
        if images[k] != 0:
            destroy_image(images[k])
            images[k] = 0
    return status
