"""The EXIF orientation reader: the batch version (numba, headrace_kernels.exif_batch) equals exif.orientation on
real headers of every orientation in both byte orders, on every truncation of them, on corrupted bytes and on
other formats (exact equality: both are integer rules)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from headrace_kernels import exif
from headrace_kernels.columns import Column
from headrace_kernels.host_arrays import addresses_and_sizes


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
    # the same bytes laid back to back in one array, with gaps (as the CPU stage's worker sends a batch's files)
    counts = np.array([len(c) for c in cases], np.int64)
    starts = np.cumsum(counts + 3) - counts - 3
    flat = np.zeros(int(starts[-1] + counts[-1]), np.uint8)
    for start, case in zip(starts.tolist(), cases, strict=True):
        flat[start:start + len(case)] = np.frombuffer(case, np.uint8)
    packed = Column.of_packed(flat, starts, [(int(c),) for c in counts], counts)
    assert exif.batch_orientations(packed).tolist() == expected


def test_packed_samples_are_located_from_their_array():
    """addresses_and_sizes of a Column laid back to back in one array (offsets and counts, no walk over the samples)
    equals the walk over the same samples as separate arrays, for bytes and for wider elements."""
    for dtype in (np.uint8, np.float32):
        flat = np.arange(40, dtype=dtype)
        starts, counts = np.array([0, 5, 5, 17], np.int64), np.array([3, 0, 10, 23], np.int64)
        packed = Column.of_packed(flat, starts, [(int(c),) for c in counts], counts)
        walked = addresses_and_sizes(list(packed))
        located = addresses_and_sizes(packed)
        assert located[0].dtype == np.uint64 and located[1].dtype == np.int64
        np.testing.assert_array_equal(located[0][counts > 0], walked[0][counts > 0])  # an empty slice: any address
        np.testing.assert_array_equal(located[1], walked[1])
        assert located[1].tolist() == (counts * flat.itemsize).tolist()
        packed[1] = np.zeros(2, dtype)  # a sample replaced: the samples are walked again
        assert addresses_and_sizes(packed)[1].tolist() == [3 * flat.itemsize, 2 * flat.itemsize] + \
            [int(c) * flat.itemsize for c in counts[2:]]
