"""A folder-per-class tree of synthetic JPEGs: smooth colour fields with shapes, so they compress like photos."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def synthetic_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """An RGB uint8 image with gradients, blobs and a little noise."""
    import cv2

    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.empty((height, width, 3), np.float32)
    for c in range(3):
        fy, fx, phase = rng.uniform(0.5, 4, 2).tolist() + [rng.uniform(0, 6.3)]
        image[..., c] = 127 + 100 * np.sin(fy * yy / height * 3.1 + phase) * np.cos(fx * xx / width * 3.1)
    for _ in range(int(rng.integers(3, 9))):
        center = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        axes = (int(rng.integers(8, max(9, width // 3))), int(rng.integers(8, max(9, height // 3))))
        color = rng.uniform(0, 255, 3).tolist()
        cv2.ellipse(image, center, axes, float(rng.uniform(0, 180)), 0, 360, color, -1)
    image += rng.normal(0, 6, image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def make_image_folder(root: str | Path, num_images: int = 1000, num_classes: int = 10,
                      size: tuple[int, int] = (400, 500),
                      quality: int = 90, seed: int = 0, progress: bool = False) -> Path:
    """Write `num_images` JPEGs of about `size` (height, width), spread over `num_classes` class folders."""
    import cv2

    root = Path(root)
    rng = np.random.default_rng(seed)
    items = range(num_images)
    if progress:
        from tqdm import tqdm

        items = tqdm(items, desc=f"writing {num_images} JPEGs", unit="img")
    for i in items:
        height = int(size[0] * rng.uniform(0.85, 1.15))
        width = int(size[1] * rng.uniform(0.85, 1.15))
        folder = root / f"class_{i % num_classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        image = synthetic_image(rng, height, width)
        ok, encoded = cv2.imencode(".jpg", image[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality])
        if not ok:
            raise RuntimeError("OpenCV could not encode a JPEG")
        (folder / f"img_{i:06d}.jpg").write_bytes(encoded.tobytes())
    return root
