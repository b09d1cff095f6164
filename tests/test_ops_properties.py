"""The property ops against DALI's CPU operators (exact). peek_image_shape: on images of several formats, channel
counts and EXIF orientations, and against the decoded images' shapes."""

from __future__ import annotations

import io

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace
from PIL import Image

from headrace import types
from headrace.errors import SampleError


def _encoded(mode: str, size: tuple[int, int], fmt: str, orientation: int | None = None) -> np.ndarray:
    image = Image.new(mode, size, 100 if len(mode) == 1 else (10, 20, 30, 40)[:len(mode)])
    buffer = io.BytesIO()
    extra = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        extra["exif"] = exif.tobytes()
    image.save(buffer, format=fmt, **extra)
    return np.frombuffer(buffer.getvalue(), np.uint8)


IMAGES = [_encoded("RGB", (7, 5), "JPEG"), _encoded("L", (9, 4), "PNG"), _encoded("RGBA", (3, 8), "PNG"),
          _encoded("L", (6, 2), "JPEG"), _encoded("RGB", (11, 3), "BMP"), _encoded("RGB", (4, 6), "WEBP"),
          _encoded("LA", (5, 5), "PNG"), _encoded("RGB", (12, 13), "TIFF"), _encoded("RGB", (10, 4), "JPEG", 6),
          _encoded("RGB", (10, 4), "JPEG", 3)]
KWARGS = [dict(), dict(image_type=types.GRAY), dict(image_type=types.ANY_DATA), dict(image_type=types.BGR),
          dict(image_type=types.YCbCr), dict(dtype=types.INT32), dict(dtype=types.FLOAT),
          dict(adjust_orientation=False)]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", KWARGS, ids=[str(k) for k in KWARGS])
def test_matches_dali(kwargs):
    ours, theirs = run_headrace("peek_image_shape", IMAGES, **kwargs), run_dali("peek_image_shape", IMAGES, **kwargs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_is_the_decoded_shape():
    for kwargs in (dict(), dict(output_type=types.GRAY), dict(adjust_orientation=False)):
        peek_args = {"image_type": kwargs["output_type"]} if "output_type" in kwargs else dict(kwargs)
        peeked = run_headrace("peek_image_shape", IMAGES, **peek_args)
        decoded = run_headrace("decoders.image", IMAGES, **kwargs)
        for shape, image in zip(peeked, decoded, strict=True):
            assert tuple(shape) == image.shape
    turned = run_headrace("peek_image_shape", IMAGES[-2:])
    assert [tuple(s) for s in turned] == [(10, 4, 3), (4, 10, 3)]  # orientation 6 turns a 10-wide image, 3 not


def test_bad_input_names_op_and_sample():
    with pytest.raises(SampleError, match=r"peek_image_shape .*sample 1.*not a decodable image"):
        run_headrace("peek_image_shape", [IMAGES[0], np.frombuffer(b"not an image at all", np.uint8)])
    with pytest.raises(SampleError, match=r"peek_image_shape .*sample 0.*1-D uint8 bytes\), got float32"):
        run_headrace("peek_image_shape", [np.zeros(4, np.float32)])
