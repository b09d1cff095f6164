"""Where a batch's host arrays lie: each one's data address and byte size, found once per batch for the compiled
loops that read them in place (nvImageCodec's header parse, the EXIF scan)."""

from __future__ import annotations

import numpy as np


def addresses_and_sizes(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 data addresses, int64 byte sizes) of C-contiguous arrays: one attribute walk per array, which costs
    about a microsecond each, so a batch pays it once whatever reads the arrays. Samples laid back to back in one
    1-D array (a Column with `packed`) are located from that array's address and their offsets instead."""
    packed = getattr(arrays, "packed", None)
    if packed is not None and packed[0].ndim == 1 and packed[0].flags.c_contiguous:
        flat, starts, _, counts = packed
        itemsize = flat.dtype.itemsize
        return (np.asarray(starts, np.uint64) * np.uint64(itemsize) + np.uint64(flat.ctypes.data),
                np.asarray(counts, np.int64) * itemsize)
    n = len(arrays)
    return (np.fromiter((a.ctypes.data for a in arrays), np.uint64, n),
            np.fromiter((a.nbytes for a in arrays), np.int64, n))
