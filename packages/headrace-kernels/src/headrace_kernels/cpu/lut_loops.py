"""Per-channel table lookups of uint8 images in one compiled pass (numba, GIL released once per image): the uint8
path of crop_mirror_normalize, mirrored and laid out (HWC -> CHW or HWC) while it looks up. Table entries are
copied bit for bit, so the output equals a lookup in the same table by any other means."""

from __future__ import annotations

import numba
import numpy as np

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@numba.njit(nogil=True, cache=True)
def _lookup_chw(view, table, out, top, left, mirror) -> None:
    height, width, channels = view.shape
    for c in range(channels):
        levels = table[c]
        for y in range(height):
            source = view[y]
            target = out[c, top + y]
            for x in range(width):
                target[left + x] = levels[source[width - 1 - x, c] if mirror else source[x, c]]


@numba.njit(nogil=True, cache=True)
def _lookup_hwc(view, table, out, top, left, mirror) -> None:
    height, width, channels = view.shape
    for y in range(height):
        source = view[y]
        target = out[top + y]
        for x in range(width):
            pixel = source[width - 1 - x] if mirror else source[x]
            for c in range(channels):
                target[left + x, c] = table[c, pixel[c]]


def lookup_into(view: np.ndarray, table: np.ndarray, out: np.ndarray, top: int, left: int, chw: bool,
                mirror: bool) -> None:
    """out[.., top + y, left + x] = table[c][view[y, x', c]] for every pixel and channel of the (h, w, C) uint8
    `view`, where x' is x or, with `mirror`, w - 1 - x; `out` is (C', H, W) with `chw`, else (H, W, C'), of the
    table's type, and has room for the view at (top, left)."""
    bits = _BITS[table.dtype.itemsize]
    table = np.ascontiguousarray(table).view(bits)
    target = out.view(bits)
    (_lookup_chw if chw else _lookup_hwc)(view, table, target, top, left, mirror)
