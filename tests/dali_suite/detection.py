"""DALI's detection examples: the COCO reader notebook (docs/examples/general/data_loading/coco_reader.ipynb), the
SSD training pipeline (docs/examples/use_cases/pytorch/single_stage_detector/src/coco_pipeline.py), the bounding
box notebooks (bbox_flip / bbox_paste / box_encoder / random_bbox_crop) and the segmentation ops' tests."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, batch_source, case, expect, samples_of

COCO = "DALI docs/examples/general/data_loading/coco_reader.ipynb"
SSD = "DALI docs/examples/use_cases/pytorch/single_stage_detector/src/coco_pipeline.py"


def _boxes(seed: int) -> list[np.ndarray]:
    """ltrb boxes in [0, 1], 1 to 4 per sample."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(4):
        lt = rng.uniform(0, 0.5, (1 + i, 2))
        out.append(np.concatenate([lt, lt + rng.uniform(0.1, 0.5, (1 + i, 2))], axis=1).astype(np.float32))
    return out


def anchors() -> list[float]:
    """A 4x4 grid of two anchor sizes, ltrb, flattened as box_encoder takes them."""
    boxes = []
    for y in range(4):
        for x in range(4):
            for size in (0.2, 0.4):
                cx, cy = (x + 0.5) / 4, (y + 0.5) / 4
                boxes += [cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2]
    return boxes


@case(COCO, atol=1e-5)
def coco_reader_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        jpegs, bboxes, labels, ids = fn.readers.coco(file_root=data.coco_images,
                                                     annotations_file=data.coco_annotations, ratio=True, ltrb=True,
                                                     image_ids=True)
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        return images, bboxes, labels, ids

    return pipe()


@case(COCO + " (pixel boxes, xywh, skip_empty)", atol=1e-4, iterations=2)
def coco_reader_pixels(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        jpegs, bboxes, labels = fn.readers.coco(file_root=data.coco_images, annotations_file=data.coco_annotations,
                                                skip_empty=True)
        return fn.peek_image_shape(jpegs), bboxes, labels

    return pipe()


def _ssd_check(outputs) -> None:
    num_anchors = len(anchors()) // 4
    for image in samples_of(outputs, 0):
        expect(image.shape == (3, 32, 32) and image.dtype == np.float32, "CHW 32x32 float")
    for boxes in samples_of(outputs, 1):
        expect(boxes.shape == (num_anchors, 4), f"one encoded box per anchor: {boxes.shape}")
    for labels in samples_of(outputs, 2):
        expect(labels.shape == (num_anchors,) and labels.dtype == np.int32, "one label per anchor")
        expect(set(np.unique(labels)) <= {0, 1, 2, 3}, "labels are the classes or background 0")


@case(SSD, random=True, check=_ssd_check, iterations=2)
def ssd_training_pipeline(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        inputs, bboxes, labels = fn.readers.coco(file_root=data.coco_images, annotations_file=data.coco_annotations,
                                                 skip_empty=True, shard_id=0, num_shards=1, ratio=True, ltrb=True,
                                                 random_shuffle=False, shuffle_after_epoch=True, name="Reader")
        crop_begin, crop_size, bboxes, labels = fn.random_bbox_crop(
            bboxes, labels, device="cpu", aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9],
            scaling=[0.3, 1.0], bbox_layout="xyXY", allow_no_crop=True, num_attempts=50)
        images = fn.decoders.image_slice(inputs, crop_begin, crop_size, device="cpu", output_type=types.RGB)
        flip_coin = fn.random.coin_flip(probability=0.5)
        bboxes = fn.bb_flip(bboxes, device="cpu", ltrb=True, horizontal=flip_coin)
        images = fn.resize(images, resize_x=32, resize_y=32, min_filter=types.DALIInterpType.INTERP_TRIANGULAR)
        saturation = fn.random.uniform(range=[0.5, 1.5])
        contrast = fn.random.uniform(range=[0.5, 1.5])
        brightness = fn.random.uniform(range=[0.875, 1.125])
        hue = fn.random.uniform(range=[-0.5, 0.5])
        images = fn.hsv(images, dtype=types.FLOAT, hue=hue, saturation=saturation)
        images = fn.brightness_contrast(images, brightness=brightness, contrast_center=128, contrast=contrast)
        images = fn.crop_mirror_normalize(images, crop=(32, 32), mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255], mirror=flip_coin,
                                          dtype=types.FLOAT, output_layout="CHW", pad_output=False)
        bboxes, labels = fn.box_encoder(bboxes, labels, criteria=0.5, anchors=anchors())
        return images, bboxes, labels

    return pipe()


@case("DALI docs/examples/general/bbox_flip / bbox_paste notebooks (operator tests test_bb_flip.py, "
      "test_bbox_paste.py)", atol=1e-6)
def bbox_flip_paste(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    boxes = _boxes(1)

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        b = fn.external_source(source=batch_source(boxes), batch=True)
        xywh = fn.external_source(source=batch_source([np.concatenate([x[:, :2], x[:, 2:] - x[:, :2]], 1)
                                                       for x in boxes]), batch=True)
        return (fn.bb_flip(b, ltrb=True, horizontal=1), fn.bb_flip(xywh, vertical=1, horizontal=0),
                fn.bbox_paste(b, ratio=2.0, paste_x=0.3, paste_y=0.6, ltrb=True),
                fn.bbox_paste(xywh, ratio=1.5, paste_x=0.0, paste_y=1.0))

    return pipe()


@case("DALI dali/test/python/operator_1/test_box_encoder.py", atol=1e-5)
def box_encoder_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    boxes = _boxes(2)
    labels = [np.arange(1, len(b) + 1, dtype=np.int32) for b in boxes]

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        b = fn.external_source(source=batch_source(boxes), batch=True)
        lb = fn.external_source(source=batch_source(labels), batch=True)
        enc_boxes, enc_labels = fn.box_encoder(b, lb, criteria=0.4, anchors=anchors())
        off_boxes, _ = fn.box_encoder(b, lb, criteria=0.4, anchors=anchors(), offset=True, scale=2.0,
                                      stds=[0.1, 0.1, 0.2, 0.2])
        return enc_boxes, enc_labels, off_boxes

    return pipe()


@case("DALI dali/test/python/operator_1/test_bbox_rotate.py (boxes only)", atol=1e-4)
def bbox_rotate_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    boxes = _boxes(3)

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        b = fn.external_source(source=batch_source(boxes), batch=True)
        return (fn.bbox_rotate(b, angle=30.0, input_shape=[60, 80], bbox_layout="xyXY"),
                fn.bbox_rotate(b, angle=90.0, input_shape=[60, 80], keep_size=True, bbox_layout="xyXY"))

    return pipe()


@case("DALI dali/test/python/operator_1/test_bbox_rotate.py (boxes with labels)", atol=1e-4)
def bbox_rotate_with_labels(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    boxes = _boxes(5)
    labels = [np.arange(len(b), dtype=np.int32) for b in boxes]

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        b = fn.external_source(source=batch_source(boxes), batch=True)
        lb = fn.external_source(source=batch_source(labels), batch=True)
        rotated, rotated_labels = fn.bbox_rotate(b, lb, angle=30.0, input_shape=[60, 80], bbox_layout="xyXY")
        kept, kept_labels = fn.bbox_rotate(b, lb, angle=-45.0, input_shape=[60, 80], keep_size=True,
                                           bbox_layout="xyXY", mode="halfway")
        return rotated, rotated_labels, kept, kept_labels

    return pipe()


def _bbox_crop_check(outputs) -> None:
    for anchor, shape, boxes in zip(samples_of(outputs, 0), samples_of(outputs, 1), samples_of(outputs, 2),
                                    strict=True):
        expect(anchor.shape == (2,) and shape.shape == (2,), "a 2-D window")
        expect(np.all(anchor >= 0) and np.all(anchor + shape <= 1 + 1e-5), "window inside the image")
        expect(np.all((boxes >= 0) & (boxes <= 1)), "boxes relative to the window")


@case("DALI docs/examples/general/random_bbox_crop (operator test test_random_bbox_crop.py)", random=True,
      same_shapes=False, check=_bbox_crop_check, iterations=2)
def random_bbox_crop_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    boxes = _boxes(4)
    labels = [np.arange(len(b), dtype=np.int32) for b in boxes]

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=9)
    def pipe():
        b = fn.external_source(source=batch_source(boxes), batch=True)
        lb = fn.external_source(source=batch_source(labels), batch=True)
        anchor, shape, out_boxes, out_labels = fn.random_bbox_crop(
            b, lb, aspect_ratio=[0.5, 2.0], thresholds=[0.1, 0.3, 0.5], scaling=[0.3, 1.0], bbox_layout="xyXY")
        return anchor, shape, out_boxes, out_labels

    return pipe()


def _masks() -> list[np.ndarray]:
    masks = []
    for i in range(3):
        m = np.zeros((20, 24), np.int32)
        m[2 + i: 8 + i, 3:10] = 1
        m[12:18, 14 - i: 22] = 2
        masks.append(m)
    return masks


def _object_bbox_check(outputs) -> None:
    for mask, anchor, shape in zip(samples_of(outputs, 3), samples_of(outputs, 0), samples_of(outputs, 1),
                                   strict=True):
        expect(anchor.shape == (2,) and shape.shape == (2,), "2-D box")
        region = mask[anchor[0]: anchor[0] + shape[0], anchor[1]: anchor[1] + shape[1]]
        expect(region.size > 0 and np.all(region > 0) or np.all(shape == mask.shape), "box of one object")
    for pixel, mask in zip(samples_of(outputs, 2), samples_of(outputs, 3), strict=True):
        expect(mask[tuple(pixel)] > 0, "random_mask_pixel picks a foreground pixel")


@case("DALI dali/test/python/operator_1/test_random_object_bbox.py / test_random_mask_pixel.py", random=True,
      same_shapes=False, check=_object_bbox_check, iterations=2)
def segmentation_object_bbox(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=4)
    def pipe():
        mask = fn.external_source(source=batch_source(_masks()), batch=True, layout="HW")
        anchor, shape = fn.segmentation.random_object_bbox(mask, format="anchor_shape", foreground_prob=1.0)
        pixel = fn.segmentation.random_mask_pixel(mask, foreground=1)
        return anchor, shape, pixel, mask

    return pipe()


@case("DALI dali/test/python/operator_1/test_select_masks.py", atol=1e-6)
def segmentation_select_masks(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    polygons = [np.array([[0, 0, 3], [1, 3, 7], [2, 7, 10]], np.int32)] * 2
    vertices = [np.arange(20, dtype=np.float32).reshape(10, 2)] * 2
    wanted = [np.array([0, 2], np.int32), np.array([1], np.int32)]

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        ids = fn.external_source(source=batch_source(wanted), batch=True)
        polys = fn.external_source(source=batch_source(polygons), batch=True)
        verts = fn.external_source(source=batch_source(vertices), batch=True)
        p1, v1 = fn.segmentation.select_masks(ids, polys, verts)
        p2, v2 = fn.segmentation.select_masks(ids, polys, verts, reindex_masks=True)
        return p1, v1, p2, v2

    return pipe()


def _roi_crop_check(outputs) -> None:
    for start in samples_of(outputs, 0):
        expect(start.shape == (2,), "one start per dimension")
        # crop 10x10 must contain the ROI [5, 8] .. [12, 14] where it fits: start <= roi_start, start + 10 >= roi_end
        expect(start[0] <= 5 and start[0] + 10 >= 12 and start[1] <= 8 and start[1] + 10 >= 14, f"start {start}")


@case("DALI dali/test/python/operator_1/test_roi_random_crop.py", random=True, check=_roi_crop_check, iterations=2)
def roi_random_crop_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=6)
    def pipe():
        return fn.roi_random_crop(crop_shape=[10, 10], roi_start=[5, 8], roi_end=[12, 14], in_shape=[40, 40])

    return pipe()
