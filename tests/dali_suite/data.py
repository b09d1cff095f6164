"""The suite's inputs, generated once per session: small JPEGs in class folders, WAV files, .npy files, a TFRecord
file with its index and a COCO-style annotated image set (small, so the whole suite runs in seconds)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np

from dali_suite import SuiteData
from headrace.data.synthetic import make_image_folder, synthetic_image

SAMPLE_RATE = 16000


def _jpeg(image: np.ndarray, quality: int = 90) -> np.ndarray:
    ok, buf = cv2.imencode(".jpg", image[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.ravel()


def _signal(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """A tone with harmonics and noise, with silence at both ends (for nonsilent_region)."""
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    tone = sum(0.3 / k * np.sin(2 * np.pi * rng.uniform(200, 900) * k * t) for k in (1, 2, 3))
    tone = tone + rng.normal(0, 0.01, n)
    envelope = np.zeros(n)
    envelope[n // 5: n - n // 6] = 1.0
    return (tone * envelope).astype(np.float32)


def _audio(root: Path, rng: np.random.Generator) -> None:
    import soundfile

    folder = root / "class_000"
    folder.mkdir(parents=True)
    for i, seconds in enumerate((0.30, 0.45, 0.25, 0.5)):
        pcm = np.round(_signal(rng, seconds) * 32767).astype(np.int16)
        buffer = io.BytesIO()
        soundfile.write(buffer, pcm, SAMPLE_RATE, format="WAV", subtype="PCM_16")
        (folder / f"clip_{i}.wav").write_bytes(buffer.getvalue())


def _tfrecord(root: Path, jpegs: list[np.ndarray]) -> tuple[list[str], list[str]]:
    from headrace import tfrecord
    from headrace.cli import main as cli_main

    records = []
    for i, jpeg in enumerate(jpegs):
        example = tfrecord.example_class()()
        feature = example.features.feature
        feature["image/encoded"].bytes_list.value.append(jpeg.tobytes())
        feature["image/class/label"].int64_list.value.append(i % 3)
        feature["image/object/bbox/xmin"].float_list.value.extend([0.1, 0.3][: 1 + i % 2])
        records.append(tfrecord.encode_record(example.SerializeToString()))
    path, index = root / "data.tfrecord", root / "data.idx"
    path.write_bytes(b"".join(records))
    assert cli_main(["tfrecord2idx", str(path), str(index)]) == 0
    return [str(path)], [str(index)]


def _coco(root: Path, rng: np.random.Generator) -> tuple[str, str]:
    """Four images with one to three boxes each, in COCO's JSON (xywh in pixels)."""
    images_dir = root / "coco_images"
    images_dir.mkdir()
    images, annotations = [], []
    for i in range(4):
        h, w = 48 + 4 * i, 64 - 4 * i
        name = f"{i:04d}.jpg"
        (images_dir / name).write_bytes(_jpeg(synthetic_image(rng, h, w)).tobytes())
        images.append({"id": i + 1, "file_name": name, "height": h, "width": w})
        for k in range(1 + i % 3):
            x, y = float(rng.uniform(0, w / 2)), float(rng.uniform(0, h / 2))
            bw, bh = float(rng.uniform(4, w / 2)), float(rng.uniform(4, h / 2))
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": 1 + k,
                                "bbox": [x, y, bw, bh], "area": bw * bh, "iscrowd": 0})
    categories = [{"id": c, "name": f"cat{c}"} for c in (1, 2, 3)]
    ann = root / "instances.json"
    ann.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    return str(images_dir), str(ann)


def make_suite_data(root: Path) -> SuiteData:
    """Writes every input under `root`."""
    rng = np.random.default_rng(18)
    images = make_image_folder(root / "images", num_images=12, num_classes=3, size=(48, 64), seed=5)
    files = sorted(images.rglob("*.jpg"))
    file_list = root / "file_list.txt"
    file_list.write_text("".join(f"{f.relative_to(images)} {i % 4}\n" for i, f in enumerate(files)))
    rgb = [synthetic_image(rng, 40 + 6 * i, 56 - 4 * i) for i in range(4)]
    jpegs = [_jpeg(image) for image in rgb]
    _audio(root / "audio", rng)
    numpy_dir = root / "npy"
    numpy_dir.mkdir()
    for i in range(5):
        np.save(numpy_dir / f"a{i}.npy", rng.standard_normal((3 + i, 4)).astype(np.float32))
    tf_paths, tf_index = _tfrecord(root, jpegs)
    coco_images, coco_ann = _coco(root, rng)
    return SuiteData(images=str(images), file_list=str(file_list), jpegs=jpegs, audio=str(root / "audio"),
                     numpy_dir=str(numpy_dir), tfrecord=tf_paths, tfrecord_index=tf_index, coco_images=coco_images,
                     coco_annotations=coco_ann)
