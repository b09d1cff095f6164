"""Bad files in a folder read by readers.file: the decoders raise SampleError naming the file and the op."""

from __future__ import annotations

import shutil

import cv2
import numpy as np
import pytest

from headrace import SampleError, fn, pipeline_def
from headrace.data.synthetic import synthetic_image


def _good_jpeg(seed: int) -> bytes:
    ok, data = cv2.imencode(".jpg", synthetic_image(np.random.default_rng(seed), 48, 64))
    assert ok
    return data.tobytes()


def _corrupt_markers(data: bytes) -> bytes:
    """A JPEG whose header segments are overwritten: no longer parseable."""
    broken = bytearray(data)
    broken[2:40] = bytes(38)
    return bytes(broken)


BAD_FILES = {
    "corrupt.jpg": lambda good: _corrupt_markers(good),
    "truncated.jpg": lambda good: good[: len(good) // 2],
    "truncated_header.jpg": lambda good: good[:10],
    "empty.jpg": lambda good: b"",
    "not_an_image.jpg": lambda good: b"name,label\nthis is a csv file, not a picture\n",
    "truncated.png": lambda good: cv2.imencode(".png", np.zeros((32, 32, 3), np.uint8))[1].tobytes()[:40],
}


@pytest.fixture(params=sorted(BAD_FILES))
def folder_with_bad_file(request, tmp_path):
    """Two good JPEGs and one bad file, the bad one read first (it sorts first in class 'a_bad')."""
    (tmp_path / "a_bad").mkdir()
    (tmp_path / "b_good").mkdir()
    bad = tmp_path / "a_bad" / request.param
    bad.write_bytes(BAD_FILES[request.param](_good_jpeg(0)))
    for i in range(2):
        (tmp_path / "b_good" / f"ok_{i}.jpg").write_bytes(_good_jpeg(i + 1))
    yield tmp_path, bad
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.parametrize("decoder", ["image", "image_random_crop"])
def test_bad_file_raises_sample_error_naming_file_and_op(folder_with_bad_file, decoder):
    root, bad = folder_with_bad_file

    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=1)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(root), name="Reader")
        return getattr(fn.decoders, decoder)(jpegs), labels

    p = pipe()
    with pytest.raises(SampleError) as info:
        p.run()
    p.close()
    message = str(info.value)
    assert str(bad) in message
    assert f"decoders.{decoder}" in message
    assert info.value.source == str(bad) and info.value.op == f"decoders.{decoder}" and info.value.sample == 0


def test_good_files_of_the_same_folder_decode(tmp_path):
    (tmp_path / "c").mkdir()
    for i in range(3):
        (tmp_path / "c" / f"{i}.jpg").write_bytes(_good_jpeg(i))

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        return fn.decoders.image(jpegs)

    (images,) = pipe().run()
    assert images.as_array().shape == (3, 48, 64, 3)
