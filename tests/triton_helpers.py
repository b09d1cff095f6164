"""Shared by the Triton tests and the benchmark: test JPEGs and padded batches in the shape the model takes, and
whether a tritonserver is here to test with."""

from __future__ import annotations

import functools
import importlib.util
import types
from pathlib import Path

import cv2
import numpy as np

from headrace.data.synthetic import synthetic_image

REPO = Path(__file__).resolve().parent.parent
MODEL_REPOSITORY = REPO / "model_repository"
PREPROCESS_FILE = MODEL_REPOSITORY / "preprocess" / "1" / "pipeline.json"
NO_SERVER = "no tritonserver: pip install --no-deps nvidia-pytriton (scripts/test.sh)"  # the skip reason


@functools.cache
def _file_module(name: str, relative: str) -> types.ModuleType:
    """The Python file at `relative` (to the repository) as a module named `name`: a script or a Triton model's
    file, not part of a package."""
    spec = importlib.util.spec_from_file_location(name, REPO / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _repository_script() -> types.ModuleType:
    """scripts/make_model_repository.py as a module."""
    return _file_module("make_model_repository", "scripts/make_model_repository.py")


def dali_peer() -> types.ModuleType:
    """benchmarks/triton_dali/model.py as a module: the DALI peer's `build` and `DaliPreprocess`."""
    return _file_module("triton_dali_model", "benchmarks/triton_dali/model.py")


def served_preprocess(**kwargs):
    """The preprocess pipeline model_repository serves, as scripts/make_model_repository.py builds it: `kwargs` are
    its own (device, dtype, hw_decoder_load) and pipeline overrides (batch_size, device_id, ...)."""
    return _repository_script().preprocess(**kwargs)


def have_server() -> bool:
    """Whether headrace.serving finds a tritonserver (nvidia-pytriton's) to start."""
    from headrace.serving.server import ServerError, find_server

    try:
        find_server()
    except ServerError:
        return False
    return True


SIZES = [(240, 320), (300, 200), (256, 256), (333, 500), (427, 640), (200, 300), (281, 375), (320, 240)]


def jpegs(count: int = len(SIZES), seed: int = 0, quality: int = 90) -> list[np.ndarray]:
    """Encoded JPEGs of different sizes (so of different lengths), as 1-D uint8 arrays."""
    rng = np.random.default_rng(seed)
    return [_jpeg(rng, *SIZES[i % len(SIZES)], quality) for i in range(count)]


def _jpeg(rng: np.random.Generator, height: int, width: int, quality: int = 90) -> np.ndarray:
    """One synthetic image of that size, JPEG-encoded (1-D uint8)."""
    ok, buf = cv2.imencode(".jpg", synthetic_image(rng, height, width)[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.ravel()


def write_model_repository(out: Path, *options: str) -> Path:
    """scripts/make_model_repository.py's repository, written into `out` with `options` (e.g. "--kind",
    "KIND_GPU"), in a process of its own as a user runs it."""
    import subprocess
    import sys

    subprocess.run([sys.executable, str(REPO / "scripts" / "make_model_repository.py"), "--out", str(out), *options],
                   check=True, capture_output=True)
    return out


def respond_in_background(model: Path) -> None:
    """Have the model in folder `model` answer from a worker thread: `respond_in_background: true` in its config."""
    with (model / "config.pbtxt").open("a") as config:
        config.write('parameters {\n  key: "respond_in_background"\n  value: { string_value: "true" }\n}\n')


def offline_outputs() -> list[np.ndarray]:
    """Each of `jpegs()`'s outputs through the preprocess pipeline file, one image per run: what the server must
    answer."""
    from headrace.pipeline import Pipeline

    pipe = Pipeline.load(PREPROCESS_FILE)
    try:
        return [pipe.run(images=[j])[0].as_array()[0].copy() for j in jpegs()]
    finally:
        pipe.close()


def distinct_jpegs(count: int, seed: int = 0) -> list[np.ndarray]:
    """`count` synthetic q90 JPEGs, each of its own size (height 320-600, width 400-800)."""
    rng = np.random.default_rng(seed)
    sizes = sorted({(int(h), int(w)) for h, w in zip(rng.integers(320, 601, 4 * count),
                                                     rng.integers(400, 801, 4 * count), strict=True)})
    picked = [sizes[i] for i in rng.permutation(len(sizes))[:count]]
    return [_jpeg(rng, h, w) for h, w in picked]


def assert_warmed_up(log: str, model: str = "preprocess") -> None:
    """The backend's start-up log says `model` ran its warm-up batch, and no warm-up failed."""
    assert "warm-up failed" not in log
    assert f"model '{model}' warmed up (one batch of a tiny JPEG)" in log


def padded(images: list[np.ndarray]) -> np.ndarray:
    """A batch of encoded images as one (n, longest) uint8 array, zeros after each image's end: the JPEG decoder
    stops at the end-of-image marker, so the padding changes nothing (as DALI's Triton examples send batches)."""
    batch = np.zeros((len(images), max(len(j) for j in images)), np.uint8)
    for row, image in zip(batch, images, strict=True):
        row[:len(image)] = image
    return batch
