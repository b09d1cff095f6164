"""Shared by the Triton tests and the benchmark: test JPEGs and padded batches in the shape the model takes."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from headrace.data.synthetic import synthetic_image

REPO = Path(__file__).resolve().parent.parent
MODEL_REPOSITORY = REPO / "model_repository"
PREPROCESS_FILE = MODEL_REPOSITORY / "preprocess" / "1" / "pipeline.json"
SIZES = [(240, 320), (300, 200), (256, 256), (333, 500), (427, 640), (200, 300), (281, 375), (320, 240)]


def jpegs(count: int = len(SIZES), seed: int = 0, quality: int = 90) -> list[np.ndarray]:
    """Encoded JPEGs of different sizes (so of different lengths), as 1-D uint8 arrays."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        height, width = SIZES[i % len(SIZES)]
        ok, buf = cv2.imencode(".jpg", synthetic_image(rng, height, width)[..., ::-1],
                               [cv2.IMWRITE_JPEG_QUALITY, quality])
        assert ok
        out.append(buf.ravel())
    return out


def distinct_jpegs(count: int, seed: int = 0) -> list[np.ndarray]:
    """`count` synthetic q90 JPEGs, each of its own size (height 320-600, width 400-800)."""
    rng = np.random.default_rng(seed)
    sizes = sorted({(int(h), int(w)) for h, w in zip(rng.integers(320, 601, 4 * count),
                                                     rng.integers(400, 801, 4 * count), strict=True)})
    picked = [sizes[i] for i in rng.permutation(len(sizes))[:count]]
    return [cv2.imencode(".jpg", synthetic_image(rng, h, w)[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])[1].ravel()
            for h, w in picked]


def padded(images: list[np.ndarray]) -> np.ndarray:
    """A batch of encoded images as one (n, longest) uint8 array, zeros after each image's end: the JPEG decoder
    stops at the end-of-image marker, so the padding changes nothing (as DALI's Triton examples send batches)."""
    batch = np.zeros((len(images), max(len(j) for j in images)), np.uint8)
    for row, image in zip(batch, images, strict=True):
        row[:len(image)] = image
    return batch
