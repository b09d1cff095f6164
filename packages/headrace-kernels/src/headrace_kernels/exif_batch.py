"""exif.orientation compiled by numba for a whole batch of encoded images, read in place through their addresses:
one call, no GIL, no Python per image. The rules are exif.py's, byte for byte (bounds included: wherever
struct.unpack_from would fail there, the orientation is 1 here)."""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic


@intrinsic
def _bytes_at(typingctx, address):
    """uint8* from an integer address."""
    signature = types.CPointer(types.uint8)(types.uint64)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.uint8)))

    return signature, codegen


@numba.njit(nogil=True, cache=True)
def _u16(d, at, little):
    a, b = np.int64(d[at]), np.int64(d[at + 1])
    return (a | (b << 8)) if little else ((a << 8) | b)


@numba.njit(nogil=True, cache=True)
def _u32(d, at, little):
    lo, hi = _u16(d, at, little), _u16(d, at + 2, little)
    return (lo | (hi << 16)) if little else ((lo << 16) | hi)


@numba.njit(nogil=True, cache=True)
def _tiff(d, n, start):
    if start + 2 > n:
        return 1
    first, second = d[start], d[start + 1]
    if not ((first == 0x49 and second == 0x49) or (first == 0x4D and second == 0x4D)):
        return 1
    little = first == 0x49
    if start + 8 > n:
        return 1
    ifd = start + _u32(d, start + 4, little)
    if ifd + 2 > n:
        return 1
    for i in range(_u16(d, ifd, little)):
        at = ifd + 2 + 12 * i
        if at + 12 > n:
            return 1
        if _u16(d, at, little) == 0x0112 and _u16(d, at + 2, little) == 3:
            value = _u16(d, at + 8, little)
            return value if 1 <= value <= 8 else 1
    return 1


@numba.njit(nogil=True, cache=True)
def _orientation(d, n):
    if n >= 2 and d[0] == 0xFF and d[1] == 0xD8:
        position = 2
        while position + 4 <= n and d[position] == 0xFF:
            marker = d[position + 1]
            if marker == 0xD9 or marker == 0xDA:
                return 1
            length = _u16(d, position + 2, False)
            if marker == 0xE1 and position + 10 <= n and d[position + 4] == 0x45 and d[position + 5] == 0x78 and \
                    d[position + 6] == 0x69 and d[position + 7] == 0x66 and d[position + 8] == 0 and \
                    d[position + 9] == 0:
                return _tiff(d, n, position + 10)
            position += 2 + length
        return 1
    if n >= 4 and ((d[0] == 0x49 and d[1] == 0x49 and d[2] == 0x2A and d[3] == 0) or
                   (d[0] == 0x4D and d[1] == 0x4D and d[2] == 0 and d[3] == 0x2A)):
        return _tiff(d, n, 0)
    return 1


@numba.njit(nogil=True, cache=True)
def orientations(addresses, sizes, out):
    for k in range(len(addresses)):
        out[k] = _orientation(numba.carray(_bytes_at(addresses[k]), (sizes[k],)), sizes[k])
