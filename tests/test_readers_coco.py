"""readers.coco against DALI's CPU build on COCO sets generated here (JSON as pycocotools reads it; image files of
arbitrary bytes, which the reader does not decode): images, boxes, labels, ids, polygons and vertices, pixelwise
masks, every box option, skip_empty, size_threshold, include_iscrowd and class remapping, sharding and padding
(exact, sample for sample), shuffling (the same samples per epoch), checkpoints, bad annotation files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali
from test_readers_numpy import (
    SHARDINGS,
    assert_resumes,
    assert_same,
    assert_same_epochs,
    assert_same_meta,
    read_dali,
    read_reader,
)

from headrace.errors import HeadraceError, SchemaError


def rle_to_string(counts: list[int]) -> str:
    """COCO's compressed RLE string of `counts` (pycocotools' rleToString), to write crowd segmentations."""
    out = []
    for i, count in enumerate(counts):
        x = count - counts[i - 2] if i > 2 else count
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | 0x20 if more else c) + 48))
    return "".join(out)


def random_rle(rng: np.random.Generator, height: int, width: int) -> list[int]:
    """Run lengths (zeros first) of a random blob covering part of a height x width image."""
    mask = np.zeros((height, width), bool)
    y, x = rng.integers(0, height), rng.integers(0, width)
    mask[y:y + rng.integers(1, 5), x:x + rng.integers(1, 6)] = True
    flat = mask.T.ravel()
    changes = np.flatnonzero(np.diff(np.concatenate([[False], flat, [False]]).astype(np.int8)))
    bounds = np.concatenate([[0], changes, [flat.size]])
    return np.diff(bounds).tolist()


def make_coco(root: Path, seed: int, images: int = 11, crowd_rate: float = 0.25) -> Path:
    """A COCO set: images of unsorted ids and random sizes, 0 to 4 annotations each (polygons with float vertices,
    some of two parts; crowd RLEs, compressed or not; a few boxes below size_threshold), categories listed out of
    id order, and an annotation of an image the file does not list."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    ids = rng.permutation(np.arange(1, 1000))[:images].tolist()
    category_ids = [17, 3, 90, 8, 42]
    entries, annotations = [], []
    for n, image_id in enumerate(ids):
        name = f"img_{n:03d}.jpg"
        (root / "images" / name).write_bytes(rng.integers(0, 256, 20 + n, dtype=np.uint8).tobytes())
        width, height = int(rng.integers(8, 24)), int(rng.integers(8, 24))
        entries.append({"id": image_id, "file_name": name, "width": width, "height": height})
        for _ in range(int(rng.integers(0, 5))):
            x, y = float(rng.uniform(0, width - 3)), float(rng.uniform(0, height - 3))
            w, h = float(rng.uniform(0.05, width - x)), float(rng.uniform(0.05, height - y))
            crowd = rng.random() < crowd_rate
            if crowd:
                counts = random_rle(rng, height, width)
                segmentation = {"size": [height, width],
                                "counts": rle_to_string(counts) if rng.random() < 0.5 else counts}
            else:
                segmentation = [np.round(np.column_stack([rng.uniform(x, x + w, 4), rng.uniform(y, y + h, 4)]), 2)
                                .ravel().tolist() for _ in range(int(rng.integers(1, 3)))]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "iscrowd": int(crowd),
                                "category_id": int(rng.choice(category_ids)), "bbox": [x, y, w, h],
                                "area": w * h, "segmentation": segmentation})
    annotations.append({"id": 9999, "image_id": 5000, "category_id": 3, "bbox": [1, 1, 2, 2], "iscrowd": 0,
                        "segmentation": [[1, 1, 3, 1, 3, 3]]})
    categories = [{"id": c, "name": f"c{c}"} for c in category_ids]
    path = root / "annotations.json"
    path.write_text(json.dumps({"images": entries, "annotations": annotations, "categories": categories}))
    return path


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("coco")
    return {"file_root": str(root / "images"), "annotations_file": str(make_coco(root, seed=1))}


def both(batch_size: int, batches: int, **args) -> tuple[list, list, dict, dict]:
    ours, meta = read_reader("coco", batch_size, batches, **args)
    theirs, dali_meta = read_dali("coco", batch_size, batches, **args)
    return ours, theirs, meta, dali_meta


OPTIONS = [{}, dict(ltrb=True), dict(ratio=True), dict(ltrb=True, ratio=True, image_ids=True),
           dict(polygon_masks=True, image_ids=True), dict(polygon_masks=True, ratio=True),
           dict(skip_empty=True, size_threshold=2.5), dict(avoid_class_remapping=True, include_iscrowd=False),
           dict(masks=True, skip_empty=True)]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("options", OPTIONS)
def test_outputs_match_dali(coco, options):
    ours, theirs, meta, dali_meta = both(4, 4, **coco, **options)
    assert_same(ours, theirs)
    assert_same_meta(meta, dali_meta)


@pytest.mark.dali
@needs_dali
def test_images_pick_and_order_the_files_as_dali(coco):
    names = ["img_004.jpg", "img_001.jpg", "img_004.jpg", "img_009.jpg", "img_000.jpg"]
    ours, theirs, meta, dali_meta = both(3, 3, **coco, image_ids=True, polygon_masks=True, images=names)
    assert_same(ours, theirs)
    assert_same_meta(meta, dali_meta)
    assert meta["epoch_size"] == 5 and ours[0][0].tobytes() == ours[2][0].tobytes()


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("sharding", SHARDINGS)
def test_shards_match_dali(coco, sharding):
    ours, theirs, meta, dali_meta = both(3, 6, **coco, image_ids=True, **sharding)
    assert_same(ours, theirs)
    assert_same_meta(meta, dali_meta)


@pytest.mark.dali
@needs_dali
def test_pixelwise_masks_match_dali(tmp_path):
    """Masks of overlapping polygons (of one and two parts) and crowd RLEs, compressed or not: on two mixed sets and
    one of RLEs only (DALI ignores the RLEs of a label that has polygons)."""
    for seed, crowd_rate in ((2, 0.25), (3, 0.25), (4, 1.0)):
        root = tmp_path / str(seed)
        path = make_coco(root, seed, images=8, crowd_rate=crowd_rate)
        args = {"file_root": str(root / "images"), "annotations_file": str(path)}
        ours, theirs, _, _ = both(4, 2, **args, pixelwise_masks=True, image_ids=True)
        assert_same(ours, theirs)
        assert any(sample[3].max() > 0 for sample in ours)


@pytest.mark.dali
@needs_dali
def test_shuffled_epochs_hold_dalis_samples(coco):
    ours, theirs, _, _ = both(11, 3, **coco, random_shuffle=True, image_ids=True)
    assert_same_epochs(ours, theirs, 11)
    assert [int(s[3][0]) for s in ours[:11]] != [int(s[3][0]) for s in ours[11:22]]


@pytest.mark.dali
@needs_dali
def test_a_buffer_of_one_gives_dalis_shuffled_order_sample_for_sample(coco):
    ours, theirs, _, _ = both(4, 3, **coco, random_shuffle=True, initial_fill=1, image_ids=True)
    assert_same(ours, theirs)


def test_rle_strings_round_trip():
    from headrace.readers.coco import rle_from_string

    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = rng.integers(0, 5000, rng.integers(1, 12)).tolist()
        assert rle_from_string(rle_to_string(counts)) == counts


def test_checkpoints_resume_exactly(coco):
    assert_resumes("coco", 3, **coco, random_shuffle=True, polygon_masks=True, num_shards=2, shard_id=0)
    assert_resumes("coco", 4, **coco, shuffle_after_epoch=True, pixelwise_masks=True, pad_last_batch=True)


def _error(tmp_path: Path, content, **args) -> str:
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(HeadraceError) as info:
        read_reader("coco", 1, 1, file_root=str(tmp_path), annotations_file=str(path), **args)
    return str(info.value)


def test_bad_annotation_files_name_the_reader_the_file_and_the_record(tmp_path):
    image = {"id": 1, "file_name": "a.jpg", "width": 4, "height": 4}
    ann = {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2], "segmentation": [[0, 0, 2, 0, 2, 2]]}
    cats = [{"id": 1}]
    cases = [
        ('{"images": [', "cannot be read as JSON"),
        ({"annotations": []}, "no 'images' list"),
        ({"images": [image, {**image, "file_name": 3}], "categories": cats}, "image #1: 'file_name' must be"),
        ({"images": [image], "annotations": [ann, {**ann, "bbox": [1, 2]}], "categories": cats},
         "annotation #1: 'bbox' must be"),
        ({"images": [image], "annotations": [{**ann, "category_id": 7}], "categories": cats},
         "annotation #0: category_id 7 is not in 'categories'"),
        ({"images": [image], "annotations": [{**ann, "bbox": [0, True, 2, 2]}], "categories": cats},
         "annotation #0: a 'bbox' value must be a finite number"),
        ({"images": [image], "annotations": [ann, {**ann, "bbox": [0, "1", 2, 2]}], "categories": cats},
         "annotation #1: a 'bbox' value must be a finite number"),
        ({"images": [image], "annotations": [{**ann, "bbox": [0, 0, float("nan"), 2]}], "categories": cats},
         "annotation #0: a 'bbox' value must be a finite number"),
        ({"images": [image], "annotations": [ann, "not a record"], "categories": cats}, "annotation #1: not an object"),
        ({"images": [image], "annotations": [{**ann, "category_id": 1.0}], "categories": cats},
         "annotation #0: 'category_id' must be an integer"),
    ]
    for content, why in cases:
        message = _error(tmp_path, content)
        assert "readers.coco" in message and "bad.json" in message and why in message, message
    # segmentations are read only where masks are asked for (as DALI's parser)
    bad_rle = {"images": [image], "annotations": [{**ann, "segmentation": {"size": [4], "counts": []}}],
               "categories": cats}
    message = _error(tmp_path, bad_rle, polygon_masks=True)
    assert "bad.json" in message and "annotation #0: RLE 'size' must be" in message, message
    message = _error(tmp_path, {"images": [image], "annotations": [ann], "categories": cats})
    assert "image" in message and "a.jpg" in message and "id 1" in message, message  # the image file is missing
    (tmp_path / "a.jpg").write_bytes(b"jpeg")
    rle = {**ann, "segmentation": {"size": [4, 4], "counts": [3, 40]}}
    message = _error(tmp_path, {"images": [image], "annotations": [rle], "categories": cats}, pixelwise_masks=True)
    assert "a.jpg" in message and "bad segmentation" in message and "do not fit a 4x4 image" in message, message
    with pytest.raises(SchemaError, match="readers.coco .*annotations_file .*cannot be read"):
        read_reader("coco", 1, 1, file_root=str(tmp_path), annotations_file=str(tmp_path / "nowhere.json"))
    with pytest.raises(SchemaError, match=r"annotations_file .*`images` names 'b.jpg', which the file does not list"):
        read_reader("coco", 1, 1, file_root=str(tmp_path), annotations_file=str(tmp_path / "bad.json"),
                    images=["a.jpg", "b.jpg"])
    with pytest.raises(SchemaError, match="give annotations_file"):
        read_reader("coco", 1, 1, file_root=str(tmp_path))
