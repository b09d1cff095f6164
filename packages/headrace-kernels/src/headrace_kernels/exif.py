"""The EXIF orientation of a JPEG or TIFF, read from its header without decoding (so a crop window can be chosen in
the displayed frame, as the decoders apply the orientation)."""

from __future__ import annotations

import struct

import numpy as np

from headrace_kernels.host_arrays import addresses_and_sizes

_ORIENTATION_TAG = 0x0112


def _tiff_orientation(data: bytes, start: int) -> int:
    """Orientation tag of IFD0 of the TIFF structure at `start`; 1 when absent or unreadable."""
    order = data[start:start + 2]
    if order not in (b"II", b"MM"):
        return 1
    endian = "<" if order == b"II" else ">"
    try:
        (ifd,) = struct.unpack_from(endian + "I", data, start + 4)
        (count,) = struct.unpack_from(endian + "H", data, start + ifd)
        for i in range(count):
            tag, kind, _, value = struct.unpack_from(endian + "HHI4s", data, start + ifd + 2 + 12 * i)
            if tag == _ORIENTATION_TAG and kind == 3:  # SHORT, stored in the first two bytes of the value field
                orientation = struct.unpack_from(endian + "H", value)[0]
                return orientation if 1 <= orientation <= 8 else 1
    except struct.error:
        return 1
    return 1


def _jpeg_orientation(data: bytes) -> int:
    position = 2
    while position + 4 <= len(data) and data[position] == 0xFF:
        marker = data[position + 1]
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no more metadata
            return 1
        (length,) = struct.unpack_from(">H", data, position + 2)
        if marker == 0xE1 and data[position + 4:position + 10] == b"Exif\0\0":
            return _tiff_orientation(data, position + 10)
        position += 2 + length
    return 1


def orientation(data: bytes) -> int:
    """EXIF orientation (1..8) of encoded JPEG or TIFF bytes; 1 for other formats or when there is none."""
    if data[:2] == b"\xff\xd8":
        return _jpeg_orientation(data)
    if data[:4] in (b"II*\0", b"MM\0*"):
        return _tiff_orientation(data, 0)
    return 1


def swaps_axes(value: int) -> bool:
    """Whether an orientation turns the image by 90 degrees (height and width exchange)."""
    return value >= 5


def batch_orientations(arrays: list, located: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """`orientation` of every encoded uint8 array of a batch, in one numba call without the GIL
    (headrace_kernels.exif_batch: the same rules byte for byte, tested on truncated and corrupted headers).
    `located`: the arrays' `host_arrays.addresses_and_sizes`, where the caller has them already."""
    from headrace_kernels.exif_batch import orientations

    n = len(arrays)
    addresses, sizes = located if located is not None else addresses_and_sizes(arrays)
    out = np.empty(n, np.int64)
    orientations(addresses, sizes, out)
    return out
