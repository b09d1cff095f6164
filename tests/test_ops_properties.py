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


def _file_root(tmp_path) -> str:
    for i in range(3):
        folder = tmp_path / f"class{i % 2}"
        folder.mkdir(exist_ok=True)
        Image.new("RGB", (4 + i, 3)).save(folder / f"{i}.jpg")
    return str(tmp_path)


def _properties(api, file_root: str, device_id=None, gpu: bool = False):
    """get_property's source_info of a file reader's output and of its decoded images, and the layout of a decoded
    image and of a fed HW batch, plus the reader's own source_info."""

    @api.pipeline_def(batch_size=3, num_threads=1, device_id=device_id, seed=1)
    def pipe():
        jpegs, _ = api.fn.readers.file(file_root=file_root)
        images = api.fn.decoders.image(jpegs)
        fed = api.fn.external_source(source=lambda: [np.zeros((2, 2), np.uint8)] * 3, batch=True, layout="HW")
        if gpu:
            images, fed = images.gpu(), fed.gpu()
        outs = (api.fn.get_property(jpegs, key="source_info"), api.fn.get_property(images, key="source_info"),
                api.fn.get_property(images, key="layout"), api.fn.get_property(fed, key="layout"), jpegs)
        return tuple(o.cpu() for o in outs[:4]) + outs[4:] if gpu else outs

    p = pipe()
    if hasattr(p, "build"):
        p.build()
    outs = p.run()
    texts = [[bytes(np.asarray(o.at(i))).decode() for i in range(3)] for o in outs[:4]]
    own = [outs[4].source_info(i) for i in range(3)] if hasattr(outs[4], "source_info") else None  # headrace's
    return texts, own


def test_get_property_gives_source_info_and_layout(tmp_path):
    import headrace

    (files, decoded, layouts, fed), sources = _properties(headrace, _file_root(tmp_path))
    assert files == sources == decoded and all(s.endswith(".jpg") and "class" in s for s in files)
    assert layouts == ["HWC"] * 3 and fed == ["HW"] * 3


@needs_dali[0]
@needs_dali[1]
def test_get_property_matches_dali(tmp_path):
    from nvidia import dali

    import headrace

    root = _file_root(tmp_path)
    (files, decoded, layouts, fed), _ = _properties(headrace, root)
    (d_files, d_decoded, d_layouts, d_fed), _ = _properties(dali, root)
    assert layouts == d_layouts and fed == d_fed
    # DALI's source_info is the path under file_root; headrace's the full path (as its batches' source_info)
    assert files + decoded == d_files + d_decoded


@pytest.mark.gpu
def test_get_property_gpu_matches_cpu(tmp_path):
    import headrace

    root = _file_root(tmp_path)
    assert _properties(headrace, root, device_id=0, gpu=True) == _properties(headrace, root, device_id=0)
