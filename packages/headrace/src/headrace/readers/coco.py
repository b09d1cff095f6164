"""`readers.coco`: a COCO detection data set -- each image's file with its boxes and labels, and as asked its
polygons, a pixelwise mask of labels and its id -- in DALI's order and with DALI's outputs.

The rules, as DALI's CPU build applies them (tests/test_readers_coco.py checks them against it):

* Images are taken in the order of their ids, or as `images` lists them (repeats included); with skip_empty, those
  left without an annotation are left out.
* An image's annotations keep the file's order. An annotation whose box is narrower or lower than size_threshold
  (compared in float32) is left out, and so is a crowd one (iscrowd=1) with include_iscrowd=False.
* Labels are 1..C in the order of the file's `categories` list, or the category ids with avoid_class_remapping.
* Boxes are float32 (x, y, w, h), or (x1, y1, x2, y2) with ltrb; ratio divides x by the width, y by the height.
* polygons: one row (annotation index among the image's kept ones, first vertex, end vertex) per polygon of a
  polygon segmentation (crowd RLE segmentations have none); vertices: their (x, y) points, float32. With the
  deprecated `masks` instead of polygon_masks, the rows count coordinates (twice the vertices), as DALI's.
* pixelwise masks: (H, W, 1) int32, each pixel the largest label whose objects cover it, 0 where none; the objects
  of a label are its polygons when it has any, else its RLEs (DALI ignores the RLEs of a label with polygons).
  Polygons are rasterised as pycocotools' frPoly does (the boundary upsampled 5x); RLE segmentations, compressed
  (COCO's string) or not (a list of counts), are decoded column-major as COCO stores them.

Epochs, shards, padding, shuffling and checkpoints are readers.file's (IndexedReader over the images).
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from headrace.errors import SampleError, SchemaError
from headrace.readers.file import MAX_SAMPLE_BYTES
from headrace.readers.numpy_files import IndexedReader
from headrace.schema import short_repr
from headrace_kernels.bounded_io import read_bounded
from headrace_kernels.registry import reader

OP = "readers.coco"
MAX_ANNOTATIONS_BYTES = 1 << 31
"""The largest annotation file read (2 GiB; COCO 2017's train instances are 450 MB)."""


class Annotation(NamedTuple):
    """One kept annotation: its box (x, y, w, h, float32), label, polygons (flat x, y lists) and RLE (h, w, counts)."""

    box: np.ndarray
    label: int
    polygons: list[np.ndarray]
    rle: tuple[int, int, Any] | None


class Image(NamedTuple):
    """One image of the data set: its file (relative to file_root), id, size and kept annotations."""

    file_name: str
    image_id: int
    width: int
    height: int
    annotations: list[Annotation]


def _fail(where: str, what: str) -> SchemaError:
    return SchemaError(f"{where}: {what}")


def _number(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(where, f"{what} must be a finite number, got {short_repr(value)}")
    return value


def _int(value: Any, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, f"{what} must be an integer, got {short_repr(value)}")
    return value


def _segmentation(segmentation: Any, where: str) -> tuple[list[np.ndarray], tuple[int, int, Any] | None]:
    """(polygons, rle) of an annotation's segmentation: a list of flat polygons, or an RLE dict."""
    if segmentation is None:
        return [], None
    if isinstance(segmentation, dict):
        size, counts = segmentation.get("size"), segmentation.get("counts")
        if not (isinstance(size, list) and len(size) == 2 and all(isinstance(s, int) and s >= 0 for s in size)):
            raise _fail(where, f"RLE 'size' must be [height, width], got {short_repr(size)}")
        if not isinstance(counts, str | list):
            raise _fail(where, f"RLE 'counts' must be a string or a list, got {short_repr(counts)}")
        return [], (size[0], size[1], counts)
    if not isinstance(segmentation, list):
        raise _fail(where, f"'segmentation' must be a list of polygons or an RLE, got {short_repr(segmentation)}")
    polygons = []
    for polygon in segmentation:
        if not isinstance(polygon, list) or len(polygon) % 2:
            raise _fail(where, "a polygon must be a flat list of x, y coordinates")
        polygons.append(np.asarray([_number(v, where, "a polygon coordinate") for v in polygon], np.float32))
    return polygons, None


def _boxes(annotations: list, where: str) -> np.ndarray:
    """Every annotation's 'bbox' as one (N, 4) float32 array, checked: a record that is not an object, or a box
    that is not four finite numbers, is an error naming the annotation (found by the per-record checks, which run
    only when the whole-array conversion fails)."""
    try:
        values = [entry["bbox"] for entry in annotations]
        boxes = np.array(values, np.float64).reshape(len(annotations), 4)
        numbers = all(type(v) is float or type(v) is int for box in values for v in box)  # not bools, not text
        if numbers and np.isfinite(boxes).all():
            return boxes.astype(np.float32)
    except (TypeError, ValueError, KeyError, IndexError):
        pass
    for number, entry in enumerate(annotations):  # the first bad record, by name
        at = f"{where}, annotation #{number}"
        if not isinstance(entry, dict):
            raise _fail(at, "not an object")
        box = entry.get("bbox")
        if not isinstance(box, list) or len(box) != 4:
            raise _fail(at, f"'bbox' must be [x, y, width, height], got {short_repr(box)}")
        for v in box:
            _number(v, at, "a 'bbox' value")
    raise _fail(where, "an annotation's 'bbox' is not four finite numbers")


def parse_annotations(path: str, node: str, args: dict) -> list[Image]:
    """The images of a COCO annotation file with their kept annotations (the rules are in the module docstring)."""
    where = f"{OP} (node '{node}'): annotations_file {short_repr(path)}"
    try:
        data = json.loads(read_bounded(path, MAX_ANNOTATIONS_BYTES))
    except ValueError as exc:  # read_bounded's reasons and json's JSONDecodeError (line and column) alike
        raise _fail(where, f"cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise _fail(where, "is not a COCO annotation file (no 'images' list)")
    categories = data.get("categories", [])
    annotations = data.get("annotations", [])
    if not isinstance(categories, list) or not isinstance(annotations, list):
        raise _fail(where, "'categories' and 'annotations' must be lists")
    labels = {}
    for number, category in enumerate(categories):
        if not isinstance(category, dict):
            raise _fail(f"{where}, category #{number}", "not an object")
        category_id = _int(category.get("id"), f"{where}, category #{number}", "'id'")
        labels[category_id] = category_id if args["avoid_class_remapping"] else number + 1
    images: dict[int, Image] = {}
    for number, entry in enumerate(data["images"]):
        at = f"{where}, image #{number}"
        if not isinstance(entry, dict):
            raise _fail(at, "not an object")
        image_id = _int(entry.get("id"), at, "'id'")
        name = entry.get("file_name")
        if not isinstance(name, str) or not name or "\x00" in name:
            raise _fail(at, f"'file_name' must be a file name, got {short_repr(name)}")
        width, height = _int(entry.get("width"), at, "'width'"), _int(entry.get("height"), at, "'height'")
        if image_id in images:
            raise _fail(at, f"image id {image_id} appears twice")
        images[image_id] = Image(name, image_id, width, height, [])
    threshold = np.float32(args["size_threshold"])
    # segmentations are read (and checked) only where masks are asked for, as DALI's parser does
    masks = bool(args.get("polygon_masks") or args.get("masks") or args.get("pixelwise_masks"))
    boxes = _boxes(annotations, where)
    for number, entry in enumerate(annotations):
        image_id = entry.get("image_id")  # checked by _int (which names the annotation) only where not a plain int
        image = images.get(image_id if type(image_id) is int else _int(image_id, f"{where}, annotation #{number}",
                                                                       "'image_id'"))
        if image is None:
            continue  # an annotation of an image the file does not list
        if entry.get("iscrowd", 0) and not args["include_iscrowd"]:
            continue
        box = boxes[number]
        if box[2] < threshold or box[3] < threshold:
            continue
        category = entry.get("category_id")
        if type(category) is not int or category not in labels:
            category = _int(category, f"{where}, annotation #{number}", "'category_id'")
            raise _fail(f"{where}, annotation #{number}", f"category_id {category} is not in 'categories'")
        polygons, rle = _segmentation(entry.get("segmentation"), f"{where}, annotation #{number}") if masks \
            else ([], None)
        image.annotations.append(Annotation(box, labels[category], polygons, rle))
    ordered = [images[i] for i in sorted(images)]
    if args.get("images") is not None:  # these files, in this order (repeats included)
        by_name = {image.file_name: image for image in ordered}
        missing = next((name for name in args["images"] if name not in by_name), None)
        if missing is not None:
            raise _fail(where, f"`images` names {short_repr(missing)}, which the file does not list")
        ordered = [by_name[name] for name in args["images"]]
    return [image for image in ordered if image.annotations] if args["skip_empty"] else ordered


# Masks: COCO's RLE (column-major run lengths, starting with a run of zeros) and pycocotools' polygon rasteriser.

def rle_from_string(text: str) -> list[int]:
    """The counts of COCO's compressed RLE string (LEB128-like, 5 bits a character, deltas after the second)."""
    counts: list[int] = []
    position = 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            if position >= len(text):
                raise ValueError("the compressed RLE string ends inside a number")
            c = ord(text[position]) - 48
            value |= (c & 0x1F) << shift
            more = bool(c & 0x20)
            position += 1
            shift += 5
            if not more and c & 0x10:
                value |= -1 << shift
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts


def rle_decode(height: int, width: int, counts: list[int]) -> np.ndarray:
    """The (height, width) bool mask of run lengths `counts` (column-major, zeros first)."""
    counts = np.asarray(counts, np.int64)
    if (counts < 0).any() or counts.sum() > height * width:
        raise ValueError(f"the RLE's runs ({int(counts.sum())} pixels) do not fit a {height}x{width} image")
    flat = np.zeros(height * width, bool)
    ends = np.cumsum(counts)
    for start, end in zip(ends[0::2], ends[1::2], strict=False):
        flat[start:end] = True
    return flat.reshape(width, height).T


def polygon_counts(xy: np.ndarray, height: int, width: int) -> list[int]:
    """pycocotools' rleFrPoly: the RLE counts of polygon `xy` (flat x, y) in a height x width image."""
    scale = 5.0
    k = len(xy) // 2
    if k == 0:
        return [height * width]
    x = np.trunc(scale * xy[0::2].astype(np.float64) + 0.5).astype(np.int64)
    y = np.trunc(scale * xy[1::2].astype(np.float64) + 0.5).astype(np.int64)
    x, y = np.append(x, x[0]), np.append(y, y[0])
    us, vs = [], []
    for j in range(k):
        xs, xe, ys, ye = int(x[j]), int(x[j + 1]), int(y[j]), int(y[j + 1])
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            s = (ye - ys) / dx if dx else 0.0
            t = np.arange(dx + 1)[::-1] if flip else np.arange(dx + 1)
            us.append(t + xs)
            vs.append(np.trunc(ys + s * t + 0.5).astype(np.int64))
        else:
            s = (xe - xs) / dy
            t = np.arange(dy + 1)[::-1] if flip else np.arange(dy + 1)
            vs.append(t + ys)
            us.append(np.trunc(xs + s * t + 0.5).astype(np.int64))
    u, v = np.concatenate(us), np.concatenate(vs)
    change = np.nonzero(u[1:] != u[:-1])[0] + 1
    uj, up, vj, vp = u[change], u[change - 1], v[change], v[change - 1]
    xd = (np.where(uj < up, uj, uj - 1) + 0.5) / scale - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= width - 1)
    yd = (np.where(vj < vp, vj, vp) + 0.5) / scale - 0.5
    yd = np.ceil(np.clip(yd, 0, height))
    a = np.sort(np.append(xd[keep].astype(np.int64) * height + yd[keep].astype(np.int64), height * width))
    a = np.diff(a, prepend=0)
    counts = [int(a[0])]
    j = 1
    while j < len(a):
        if a[j] > 0:
            counts.append(int(a[j]))
            j += 1
        else:
            j += 1
            if j < len(a):
                counts[-1] += int(a[j])
                j += 1
    return counts


def pixelwise_mask(image: Image) -> np.ndarray:
    """The (H, W, 1) int32 mask: each pixel the largest label whose objects cover it, 0 where none. As DALI, the
    objects of a label are its polygons when it has any, else its RLEs."""
    height, width = image.height, image.width
    polygons: dict[int, list[np.ndarray]] = {}
    rles: dict[int, list[tuple[int, int, Any]]] = {}
    for annotation in image.annotations:
        polygons.setdefault(annotation.label, []).extend(annotation.polygons)
        if annotation.rle is not None:
            rles.setdefault(annotation.label, []).append(annotation.rle)
    mask = np.zeros((height, width), np.int32)
    for label in sorted(set(polygons) | set(rles)):
        covered = np.zeros((height, width), bool)
        if polygons.get(label):
            for polygon in polygons[label]:
                covered |= rle_decode(height, width, polygon_counts(polygon, height, width))
        else:
            for rle_height, rle_width, counts in rles.get(label, []):
                if (rle_height, rle_width) != (height, width):
                    raise ValueError(f"an RLE of size {rle_height}x{rle_width} on an image of {height}x{width}")
                covered |= rle_decode(height, width, rle_from_string(counts) if isinstance(counts, str) else counts)
        mask[covered] = label
    return mask[..., None]


@reader(OP)
class CocoReader(IndexedReader):
    """Reads one shard of the images of a COCO annotation file (readers.file's epochs and order)."""

    op = OP

    def __init__(self, node: str, args: dict, batch_size: int, seed: int, pool: ThreadPoolExecutor | None):
        if not args.get("annotations_file"):
            raise SchemaError(f"{OP} (node '{node}'): give annotations_file")
        self.images = parse_annotations(args["annotations_file"], node, args)
        root = args["file_root"]
        names = [f"{root.rstrip('/')}/{image.file_name}" if root else image.file_name for image in self.images]
        super().__init__(node, args, names, batch_size, seed, pool)
        self.ltrb, self.ratio = bool(args["ltrb"]), bool(args["ratio"])
        self.wanted = (bool(args["polygon_masks"] or args["masks"]), bool(args["pixelwise_masks"]),
                       bool(args["image_ids"]))
        self.legacy_polygons = bool(args["masks"] and not args["polygon_masks"])  # rows count coordinates
        self._annotation_arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        """(boxes, labels) of each image read so far, made once (read-only): every epoch hands out the same."""

    def source_info_of(self, index: int) -> str:
        """DALI's source_info: the image's file_name, as the annotation file has it (relative to file_root)."""
        return self.images[index].file_name

    def _error(self, index: int, why: str) -> SampleError:
        path = self.paths[index]
        return SampleError(f"{OP} (node '{self.node}'): image {short_repr(path)} (id {self.images[index].image_id}, "
                           f"sample {index} of the data set): {why}", node=self.node, op=OP, sample=index,
                           source=path)

    def _boxes(self, image: Image) -> np.ndarray:
        boxes = np.stack([a.box for a in image.annotations]) if image.annotations else np.zeros((0, 4), np.float32)
        if self.ltrb:
            boxes = np.concatenate([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], axis=1)
        if self.ratio:
            boxes = boxes / np.asarray([image.width, image.height] * 2, np.float32)
        return boxes.astype(np.float32)

    def _polygons(self, image: Image) -> tuple[np.ndarray, np.ndarray]:
        rows, points, count = [], [], 0
        for number, annotation in enumerate(image.annotations):
            for polygon in annotation.polygons:
                pairs = polygon.reshape(-1, 2)
                rows.append((number, count, count + len(pairs)))
                points.append(pairs)
                count += len(pairs)
        vertices = np.concatenate(points).astype(np.float32) if points else np.zeros((0, 2), np.float32)
        if self.ratio:
            vertices = vertices / np.asarray([image.width, image.height], np.float32)
        rows = np.asarray(rows, np.int32).reshape(-1, 3)
        if self.legacy_polygons:
            rows[:, 1:] *= 2
        return rows, vertices

    def _read_image(self, index: int) -> np.ndarray:
        """The image file's bytes, read alone (bounded; an error names the image)."""
        try:
            return np.frombuffer(read_bounded(self.paths[index], MAX_SAMPLE_BYTES), np.uint8)
        except ValueError as exc:
            raise self._error(index, str(exc)) from None

    def _read_all(self, indices: list[int]) -> list[tuple]:
        """The items of these images, their files mapped (or read: dont_use_mmap) as one batch with the GIL released
        once (the same reader as readers.file's, headrace_kernels.batch_read); a file it cannot take is read alone,
        for its error."""
        images = self.batch_files(indices, self._read_image)
        if images is None:
            return [self.read_item(i) for i in indices]
        return [self._item(i, data) for i, data in zip(indices, images, strict=True)]

    def read_item(self, index: int) -> tuple[np.ndarray, ...]:
        return self._item(index, self._read_image(index))

    def _item(self, index: int, data: np.ndarray) -> tuple[np.ndarray, ...]:
        """The outputs of image `index` with its file's bytes."""
        image = self.images[index]
        arrays = self._annotation_arrays.get(index)
        if arrays is None:
            arrays = (self._boxes(image), np.asarray([a.label for a in image.annotations], np.int32))
            for array in arrays:
                array.flags.writeable = False
            self._annotation_arrays[index] = arrays
        outputs = [data, *arrays]
        polygons, pixelwise, ids = self.wanted
        if polygons:
            outputs += self._polygons(image)
        if pixelwise:
            try:
                outputs.append(pixelwise_mask(image))
            except ValueError as exc:
                raise self._error(index, f"bad segmentation: {exc}") from None
        if ids:
            outputs.append(np.asarray([image.image_id], np.int32))
        return tuple(outputs)
