"""Shared fixtures: small generated image folders and encoded images, and the gpu marker's skip rule."""

from __future__ import annotations

import shutil

import cv2
import numpy as np
import pytest

from headrace.data.synthetic import make_image_folder, synthetic_image


def _has_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no device
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU (run the gpu-marked tests on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _collect_pipelines_between_gpu_tests(request):
    """A GPU test's pipelines that it did not close are torn down here, in the main thread between tests, not by a
    garbage collection that a later test's prefetch thread happens to run while it decodes."""
    yield
    if "gpu" in request.keywords and HAS_GPU:
        import gc

        gc.collect()


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory):
    """37 JPEGs of varied size in 3 class folders (37 is not a multiple of any batch size used)."""
    root = tmp_path_factory.mktemp("images")
    make_image_folder(root, num_images=37, num_classes=3, size=(60, 80), seed=1)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def encode(image: np.ndarray, ext: str = ".jpg", *params: int) -> np.ndarray:
    """Encode an RGB image with OpenCV; returns the bytes as a uint8 array."""
    data = image[..., ::-1] if image.ndim == 3 and image.shape[2] == 3 else image
    ok, buf = cv2.imencode(ext, data, list(params))
    assert ok
    return buf.ravel()


@pytest.fixture(scope="session")
def rgb_image():
    return synthetic_image(np.random.default_rng(7), 75, 100)
