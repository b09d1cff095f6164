"""dump_image: the files DALI's CPU build writes (names and bytes) against headrace's, CPU and GPU; the output is the
input unchanged. Exact: file names and bytes must be identical."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest
from ops_support import needs_dali

from headrace import fn, pipeline_def
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(5)
COLOUR = [RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8), RNG.integers(0, 256, (3, 2, 3), dtype=np.uint8),
          np.array([[[0, 255, 100]]], np.uint8)]
GREY = [RNG.integers(0, 256, (4, 6, 1), dtype=np.uint8), RNG.integers(0, 256, (1, 9, 1), dtype=np.uint8)]


def _dump(api, images: list[np.ndarray], where: Path, device: str = "cpu", iterations: int = 1,
          **kwargs) -> tuple[list[np.ndarray], dict[str, bytes]]:
    """Run dump_image of `api` (headrace or nvidia.dali) in directory `where`: (output samples, files written)."""
    where.mkdir(parents=True, exist_ok=True)

    @api.pipeline_def(batch_size=len(images), num_threads=1, device_id=0 if device == "gpu" else None)
    def pipe():
        x = api.fn.external_source(source=lambda: images, batch=True, layout="HWC")
        return api.fn.dump_image(x.gpu() if device == "gpu" else x, **kwargs)

    here, p = os.getcwd(), None
    os.chdir(where)
    try:
        p = pipe()
        if hasattr(p, "build"):
            p.build()
        for _ in range(iterations):
            (out,) = p.run()
        out = out.as_cpu() if device == "gpu" else out
        samples = [np.array(out.at(i)) for i in range(len(out))]
    finally:  # both run batches ahead: done writing once closed (headrace) or destroyed (DALI), still in `where`
        if hasattr(p, "close"):
            p.close()
        p = out = None
        gc.collect()
        os.chdir(here)
    return samples, {f.name: f.read_bytes() for f in where.iterdir()}


def _headrace(images, where, device="cpu", **kwargs):
    import headrace

    return _dump(headrace, images, where, device, **kwargs)


def _dali(images, where, **kwargs):
    from nvidia import dali

    return _dump(dali, images, where, **kwargs)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("images, kwargs", [(COLOUR, {}), (COLOUR, {"suffix": "rgb"}), (GREY, {"suffix": "g"})],
                         ids=["colour", "suffix", "grey"])
def test_writes_the_files_dali_writes(tmp_path, images, kwargs):
    ours, our_files = _headrace(images, tmp_path / "headrace", iterations=2, **kwargs)
    theirs, their_files = _dali(images, tmp_path / "dali", iterations=2, **kwargs)
    assert sorted(our_files) == sorted(their_files) and len(our_files) == len(images)
    for name, data in their_files.items():
        assert our_files[name] == data, name
    for got, expected, image in zip(ours, theirs, images, strict=True):
        np.testing.assert_array_equal(got, image)
        np.testing.assert_array_equal(expected, image)


def test_ppm_text_reads_back_as_the_image(tmp_path):
    """Independent of DALI: the P3 / P2 text parses back into the pixels, one line per image row."""
    _, files = _headrace(COLOUR[:1], tmp_path / "colour", suffix="x")
    _, grey = _headrace(GREY[:1], tmp_path / "grey", suffix="x")
    for data, image, magic in ((files["0-x-0.ppm"], COLOUR[0], "P3"), (grey["0-x-0.ppm"], GREY[0], "P2")):
        lines = data.decode().split("\n")
        assert lines[:3] == [magic, f"{image.shape[1]} {image.shape[0]}", "255"]
        rows = lines[3:-1]
        assert len(rows) == image.shape[0] and lines[-1] == ""
        np.testing.assert_array_equal(np.array([r.split() for r in rows], np.uint8).reshape(image.shape), image)


def test_samples_of_a_branch_are_numbered_within_it(tmp_path):
    images = [np.full((1, 2, 3), v, np.uint8) for v in (1, 9, 2, 8)]

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        if fn.reductions.max(x) > 5:
            x = fn.dump_image(x, suffix="big")
        return x

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        p = pipe()
        p.run()
        p.close()  # waits for the batches it ran ahead
    finally:
        os.chdir(here)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["0-big-0.ppm", "1-big-0.ppm"]
    assert (tmp_path / "1-big-0.ppm").read_bytes().endswith(b"8 8 8 8 8 8 \n")


@pytest.mark.parametrize("images, message", [
    ([np.zeros((2, 2, 4), np.uint8)], "only 3-channel and grey .* got 4 channels"),
    ([np.zeros((2, 2), np.uint8)], "three dimensions"),
    ([np.zeros((2, 2, 3), np.float32)], "must be uint8, got float32"),
    ([np.zeros((0, 2, 3), np.uint8)], "empty"),
])
def test_bad_images_are_errors_naming_the_sample(tmp_path, images, message):
    with pytest.raises(SampleError, match=f"dump_image .* sample 1 .*{message}"):
        _headrace([COLOUR[2], *images], tmp_path)


def test_only_hwc_is_accepted(tmp_path):
    with pytest.raises(SchemaError, match="dump_image: argument 'input_layout': only 'HWC'"):
        _headrace(COLOUR, tmp_path, input_layout="CHW")


@pytest.mark.gpu
@pytest.mark.parametrize("images", [COLOUR, GREY, [COLOUR[0]] * 3], ids=["ragged", "grey", "dense"])
def test_gpu_writes_the_cpu_files(tmp_path, images):
    cpu, cpu_files = _headrace(images, tmp_path / "cpu", suffix="s")
    gpu, gpu_files = _headrace(images, tmp_path / "gpu", "gpu", suffix="s")
    assert cpu_files == gpu_files and len(cpu_files) == len(images)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(b, a)
