"""segmentation.random_object_bbox, segmentation.random_mask_pixel, segmentation.select_masks, roi_random_crop and
random_crop_generator against DALI's CPU build, OpenCV's connected components and numpy.

Tolerances: deterministic outputs (select_masks; a box, pixel or window that the arguments leave no choice about)
exact against DALI. Random ones cannot match DALI's generator draw for draw: they are checked by the choices they
made (every box, pixel or window that DALI or headrace gives is one the rules allow: a blob's box, a foreground
pixel, a window holding the ROI) and by statistics over a batch (every candidate drawn, frequencies within loose
bounds of the expected ones: batches of 64-256, bounds of several standard deviations). GPU against CPU exact:
the same choices from the same per-sample streams."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from oprun import needs_dali, run_dali, run_headrace

from headrace import fn, pipeline_def
from headrace.errors import SampleError, SchemaError


def _labels() -> np.ndarray:
    """Class 1: two blobs (a 1x1 pixel and a diagonal neighbour, not face-connected) and a 3x2 blob; class 2: one
    2x4 blob and one 1x3; class 3: one 4x1."""
    m = np.zeros((12, 14), np.int32)
    m[1, 1] = 1
    m[2, 2] = 1
    m[5:8, 1:3] = 1
    m[5:7, 5:9] = 2
    m[10, 9:12] = 2
    m[1:5, 12] = 3
    return m


def _blobs(mask: np.ndarray) -> set[tuple[int, ...]]:
    """(y0, x0, y1, x1) of the 4-connected blobs of a binary mask, by OpenCV."""
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=4)
    return {(int(s[1]), int(s[0]), int(s[1] + s[3]), int(s[0] + s[2])) for s in stats[1:count]}


def _boxes(outs: list) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in b) for b in outs[0]]


# random_object_bbox ------------------------------------------------------------------------------------------------

def test_object_boxes_are_blobs_of_the_drawn_class():
    m = _labels()
    outs = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", output_class=True), [m] * 128)
    boxes, classes = _boxes(outs), [int(c) for c in outs[1]]
    for box, label in zip(boxes, classes, strict=True):
        assert box in _blobs(m == label)
    assert set(boxes) == _blobs(m == 1) | _blobs(m == 2) | _blobs(m == 3)  # every blob is drawn
    counts = np.bincount(classes, minlength=4)[1:]
    assert all(25 <= c <= 60 for c in counts), counts  # classes uniform: 128 / 3 each


def test_object_formats_agree():
    m = _labels()
    box = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", seed=7), [m] * 8)[0]
    anchor, shape = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, seed=7), [m] * 8)
    start, end = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="start_end", seed=7), [m] * 8)
    for b, a, s, st, e in zip(box, anchor, shape, start, end, strict=True):
        assert b.dtype == a.dtype == s.dtype == np.int32
        np.testing.assert_array_equal(b, np.concatenate([a, a + s]))
        np.testing.assert_array_equal(b, np.concatenate([st, e]))


def test_object_class_weights_threshold_and_k_largest():
    m = _labels()
    outs = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, classes=[1, 2], class_weights=[1.0, 3.0],
                                                                      output_class=True), [m] * 256)
    share = np.mean([int(c) == 2 for c in outs[2]])
    assert 0.65 <= share <= 0.85  # 0.75 expected; sd 0.027
    boxes = _boxes(run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", classes=[1],
                                                                             threshold=[2, 2]), [m] * 16))
    assert set(boxes) == {(5, 1, 8, 3)}  # the one class-1 blob of at least 2x2
    boxes = _boxes(run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", classes=[2],
                                                                             k_largest=1), [m] * 16))
    assert set(boxes) == {(5, 5, 7, 9)}
    boxes = _boxes(run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", ignore_class=True,
                                                                             k_largest=2), [m] * 64))
    assert set(boxes) == {(5, 5, 7, 9), (5, 1, 8, 3)}  # volumes 8 and 6 (the 4x1 and 1x3 are 4 and 3)


def test_object_threshold_rejecting_a_class_moves_to_another_or_the_whole_input():
    m = _labels()
    outs = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", classes=[3, 2],
                                                                      threshold=[2, 3], output_class=True), [m] * 16)
    assert set(_boxes(outs)) == {(5, 5, 7, 9)} and {int(c) for c in outs[1]} == {2}
    outs = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", threshold=[20, 1],
                                                                      output_class=True), [m] * 4)
    assert set(_boxes(outs)) == {(0, 0, 12, 14)} and {int(c) for c in outs[1]} == {0}


def test_object_background_and_foreground_prob():
    m = _labels()
    outs = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", foreground_prob=0.0,
                                                                      output_class=True, classes=[0, 1]), [m] * 4)
    assert set(_boxes(outs)) == {(0, 0, 12, 14)} and {int(c) for c in outs[1]} == {-1}  # 0 is a class: bg -1
    outs = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", foreground_prob=0.5), [m] * 256)
    whole = np.mean([b == (0, 0, 12, 14) for b in _boxes(outs)])
    assert 0.38 <= whole <= 0.62


def test_object_volumes_and_bools():
    volume = np.zeros((4, 5, 6), np.uint8)
    volume[1:3, 2:5, 0:2] = 7
    volume[0, 0, 5] = 7
    outs = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", k_largest=1), [volume] * 4)
    assert set(_boxes(outs)) == {(1, 2, 0, 3, 5, 2)}
    mask = np.zeros((6, 6), bool)
    mask[2:4, 1:5] = True
    assert set(_boxes(run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box"), [mask] * 2))) == \
        {(2, 1, 4, 5)}


def test_object_bad_input_and_arguments_are_named():
    with pytest.raises(SampleError, match=r"segmentation.random_object_bbox .*sample 0.*integers or bools"):
        run_headrace(lambda x: fn.segmentation.random_object_bbox(x), [np.zeros((4, 4), np.float32)])
    with pytest.raises(SampleError, match=r"random_object_bbox .*argument 'classes'.*coincides with the background"):
        run_headrace(lambda x: fn.segmentation.random_object_bbox(x, classes=[1, 2], background=2), [_labels()])
    with pytest.raises(SampleError, match=r"random_object_bbox .*argument 'threshold': one value or one per dim"):
        run_headrace(lambda x: fn.segmentation.random_object_bbox(x, threshold=[1, 2, 3]), [_labels()])
    with pytest.raises(SampleError, match=r"random_object_bbox .*argument 'class_weights': 1 weights for 2"):
        run_headrace(lambda x: fn.segmentation.random_object_bbox(x, classes=[1, 2], class_weights=[1.0]),
                     [_labels()])
    with pytest.raises(SchemaError, match=r"random_object_bbox .*ignore_class excludes classes"):
        run_headrace(lambda x: fn.segmentation.random_object_bbox(x, ignore_class=True, classes=[1]), [_labels()])


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("kwargs", [
    dict(format="box", classes=[2], k_largest=1, output_class=True),
    dict(classes=[1], threshold=[2, 2]),
    dict(format="start_end", classes=[3, 2], threshold=[2, 3]),
    dict(format="box", threshold=[20, 1], output_class=True),
    dict(format="box", foreground_prob=0.0, output_class=True, classes=[0, 1]),
    dict(format="box", class_weights=[0.0, 0.0, 1.0], output_class=True),
])
def test_object_boxes_left_no_choice_match_dali(kwargs):
    m = _labels()
    ours = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, **kwargs), [m] * 4)
    dali = run_dali(lambda x, f: f.segmentation.random_object_bbox(x, **kwargs), [m] * 4)
    assert len(ours) == len(dali)
    for o, d in zip(ours, dali, strict=True):
        for a, b in zip(o, d, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


@pytest.mark.dali
@needs_dali
def test_object_random_choices_are_the_same_set_as_dalis():
    """Both draw among the same blobs (face connectivity: the diagonal pair is two blobs) with like frequencies."""
    m = _labels()
    build = dict(format="box", output_class=True)
    ours = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, **build), [m] * 128)
    dali = run_dali(lambda x, f: f.segmentation.random_object_bbox(x, **build), [m] * 128)
    assert set(_boxes(ours)) == set(_boxes(dali))
    for outs in (ours, dali):
        for box, label in zip(_boxes(outs), outs[1], strict=True):
            assert box in _blobs(m == int(label))
    ours = run_headrace(lambda x: fn.segmentation.random_object_bbox(x, format="box", ignore_class=True), [m] * 128)
    dali = run_dali(lambda x, f: f.segmentation.random_object_bbox(x, format="box", ignore_class=True), [m] * 128)
    assert set(_boxes(ours)) == set(_boxes(dali)) == _blobs(m == 1) | _blobs(m == 2) | _blobs(m == 3)


# random_mask_pixel -------------------------------------------------------------------------------------------------

def _mask() -> np.ndarray:
    mask = np.zeros((9, 11), np.uint8)
    mask[[1, 4, 7, 8], [2, 10, 0, 5]] = [3, 3, 5, 200]
    return mask


def test_mask_pixels_are_foreground_and_uniform():
    mask = _mask()
    pixels = run_headrace(lambda x: fn.segmentation.random_mask_pixel(x, foreground=1, value=3), [mask] * 128)[0]
    assert all(p.dtype == np.int64 and mask[tuple(p)] == 3 for p in pixels)
    share = np.mean([tuple(p) == (1, 2) for p in pixels])
    assert 0.35 <= share <= 0.65
    pixels = run_headrace(lambda x: fn.segmentation.random_mask_pixel(x, foreground=1, threshold=4.0), [mask] * 64)[0]
    assert {tuple(int(v) for v in p) for p in pixels} == {(7, 0), (8, 5)}
    pixels = run_headrace(lambda x: fn.segmentation.random_mask_pixel(x, foreground=1), [mask] * 256)[0]
    assert {tuple(int(v) for v in p) for p in pixels} == {(1, 2), (4, 10), (7, 0), (8, 5)}


def test_mask_pixels_anywhere_without_foreground():
    mask = _mask()
    for kwargs in (dict(), dict(foreground=1, value=300), dict(foreground=1, value=9)):
        pixels = np.array(run_headrace(lambda x, k=kwargs: fn.segmentation.random_mask_pixel(x, **k),
                                       [mask] * 256)[0])
        assert (pixels >= 0).all() and (pixels < mask.shape).all()
        assert len({tuple(p) for p in pixels.tolist()}) > 80  # spread over the 99 pixels
        assert abs(pixels[:, 0].mean() - 4) < 1 and abs(pixels[:, 1].mean() - 5) < 1.2


def test_mask_pixel_errors():
    with pytest.raises(SchemaError, match="random_mask_pixel .*value and threshold exclude each other"):
        run_headrace(lambda x: fn.segmentation.random_mask_pixel(x, value=1, threshold=0.5), [_mask()])
    with pytest.raises(SampleError, match=r"random_mask_pixel .*sample 0.*argument 'value': meant for integer"):
        run_headrace(lambda x: fn.segmentation.random_mask_pixel(x, foreground=1, value=1),
                     [np.zeros((3, 3), np.float32)])


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("kwargs", [dict(foreground=1, value=3), dict(foreground=1, threshold=4.0),
                                    dict(foreground=1)])
def test_mask_pixels_are_the_same_set_as_dalis(kwargs):
    mask = _mask()
    ours = run_headrace(lambda x: fn.segmentation.random_mask_pixel(x, **kwargs), [mask] * 128)[0]
    dali = run_dali(lambda x, f: f.segmentation.random_mask_pixel(x, **kwargs), [mask] * 128)[0]
    assert ours[0].dtype == dali[0].dtype and ours[0].shape == dali[0].shape
    assert {tuple(p.tolist()) for p in ours} == {tuple(p.tolist()) for p in dali}


# select_masks ------------------------------------------------------------------------------------------------------

POLYGONS = np.array([[0, 0, 3], [1, 3, 7], [2, 7, 10], [4, 10, 13]], np.int32)


@pytest.mark.parametrize("vertices", [np.arange(26, dtype=np.float32).reshape(13, 2),
                                      np.arange(39, dtype=np.int16).reshape(13, 3)])
def test_select_masks_keeps_the_listed_masks(vertices):
    ids = np.array([4, 1], np.int32)
    polygons, out = run_headrace(lambda a, b, c: fn.segmentation.select_masks(a, b, c), [ids], [POLYGONS],
                                 [vertices])
    np.testing.assert_array_equal(polygons[0], [[4, 0, 3], [1, 3, 7]])
    np.testing.assert_array_equal(out[0], np.concatenate([vertices[10:13], vertices[3:7]]))
    assert out[0].dtype == vertices.dtype and polygons[0].dtype == np.int32
    polygons, _ = run_headrace(lambda a, b, c: fn.segmentation.select_masks(a, b, c, reindex_masks=True), [ids],
                               [POLYGONS], [vertices])
    np.testing.assert_array_equal(polygons[0][:, 0], [0, 1])


def test_select_masks_keeps_every_polygon_of_a_mask():
    polygons = np.array([[1, 0, 3], [2, 3, 6], [1, 6, 10]], np.int32)
    vertices = np.arange(20, dtype=np.float32).reshape(10, 2)
    out_polygons, out_vertices = run_headrace(lambda a, b, c: fn.segmentation.select_masks(a, b, c),
                                              [np.array([1], np.int32)], [polygons], [vertices])
    np.testing.assert_array_equal(out_polygons[0], [[1, 0, 3], [1, 3, 7]])
    np.testing.assert_array_equal(out_vertices[0], np.concatenate([vertices[0:3], vertices[6:10]]))


def test_select_masks_errors():
    vertices = np.zeros((13, 2), np.float32)
    with pytest.raises(SampleError, match=r"select_masks .*sample 0.*mask id 7 is not present"):
        run_headrace(lambda a, b, c: fn.segmentation.select_masks(a, b, c), [np.array([7], np.int32)], [POLYGONS],
                     [vertices])
    with pytest.raises(SampleError, match=r"select_masks .*must not repeat an id"):
        run_headrace(lambda a, b, c: fn.segmentation.select_masks(a, b, c), [np.array([1, 1], np.int32)],
                     [POLYGONS], [vertices])
    with pytest.raises(SampleError, match=r"select_masks .*polygon 3 \[4, 10, 13\] has a vertex range outside"):
        run_headrace(lambda a, b, c: fn.segmentation.select_masks(a, b, c), [np.array([1], np.int32)],
                     [POLYGONS], [vertices[:12]])


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("reindex", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_select_masks_matches_dali(reindex, dtype):
    vertices = [np.arange(26, dtype=dtype).reshape(13, 2), np.arange(39, dtype=dtype).reshape(13, 3)]
    ids = [np.array([2, 0], np.int32), np.array([4, 1, 0], np.int32)]
    polygons = [POLYGONS, POLYGONS]
    ours = run_headrace(lambda a, b, c: fn.segmentation.select_masks(a, b, c, reindex_masks=reindex), ids, polygons,
                        vertices)
    dali = run_dali(lambda a, b, c, f: f.segmentation.select_masks(a, b, c, reindex_masks=reindex), ids, polygons,
                    vertices)
    for o, d in zip(ours, dali, strict=True):
        for a, b in zip(o, d, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


# roi_random_crop ---------------------------------------------------------------------------------------------------

def _check_roi_window(start, crop, roi_start, roi_end, shape=None) -> None:
    for d, s in enumerate(np.asarray(start).tolist()):
        if roi_end[d] - roi_start[d] >= crop[d]:
            assert roi_start[d] <= s and s + crop[d] <= roi_end[d]
        else:
            assert s <= roi_start[d] and roi_end[d] <= s + crop[d]
        if shape is not None:
            assert 0 <= s and s + crop[d] <= shape[d]


ROI = dict(crop_shape=[4, 5, 3], roi_start=[1, 2, 0], roi_end=[3, 9, 3])


def test_roi_windows_hold_the_roi():
    data = [np.zeros((10, 12, 3), np.uint8)] * 128
    starts = np.array(run_headrace(lambda x: fn.roi_random_crop(x, **ROI), data)[0])
    assert starts.dtype == np.int64 and starts.shape == (128, 3)
    for s in starts:
        _check_roi_window(s, ROI["crop_shape"], ROI["roi_start"], ROI["roi_end"], (10, 12, 3))
    assert set(starts[:, 0].tolist()) == {0, 1} and set(starts[:, 1].tolist()) == {2, 3, 4}
    assert set(starts[:, 2].tolist()) == {0}
    unbounded = np.array(run_headrace(lambda x: fn.roi_random_crop(crop_shape=[4, 5], roi_start=[1, 2],
                                                                   roi_shape=[2, 7]), data)[0])
    assert set(unbounded[:, 0].tolist()) == {-1, 0, 1} and set(unbounded[:, 1].tolist()) == {2, 3, 4}


def test_roi_errors():
    data = [np.zeros((10, 12), np.uint8)]
    with pytest.raises(SchemaError, match=r"roi_random_crop .*exactly one of roi_end and roi_shape"):
        run_headrace(lambda x: fn.roi_random_crop(x, crop_shape=[2, 2], roi_start=[0, 0], roi_end=[1, 1],
                                                  roi_shape=[1, 1]), data)
    with pytest.raises(SampleError, match=r"roi_random_crop .*sample 0.*argument 'crop_shape'.*larger than"):
        run_headrace(lambda x: fn.roi_random_crop(x, crop_shape=[20, 2], roi_start=[0, 0], roi_end=[1, 1]), data)
    with pytest.raises(SampleError, match=r"roi_random_crop .*the ROI .* is outside the input's shape"):
        run_headrace(lambda x: fn.roi_random_crop(x, crop_shape=[2, 2], roi_start=[0, 0], roi_end=[1, 13]), data)
    with pytest.raises(SampleError, match=r"roi_random_crop .*argument 'roi_start': needs 2 values"):
        run_headrace(lambda x: fn.roi_random_crop(x, crop_shape=[2, 2], roi_start=[0], roi_end=[1, 1]), data)


@pytest.mark.dali
@needs_dali
def test_roi_windows_match_dalis():
    data = [np.zeros((10, 12, 3), np.uint8)] * 128
    ours = np.array(run_headrace(lambda x: fn.roi_random_crop(x, **ROI), data)[0])
    dali = np.array(run_dali(lambda x, f: f.roi_random_crop(x, **ROI), data)[0])
    assert ours.dtype == dali.dtype and ours.shape == dali.shape
    for d in range(3):
        assert set(ours[:, d].tolist()) == set(dali[:, d].tolist())
    exact = dict(crop_shape=[2, 5], roi_start=[3, 10], roi_shape=[2, 2])  # no choice left: 3, and 12 - 5
    ours = run_headrace(lambda x: fn.roi_random_crop(in_shape=[10, 12], **exact), data[:4])[0]
    dali = run_dali(lambda x, f: f.roi_random_crop(in_shape=[10, 12], **exact), data[:4])[0]
    for o, d in zip(ours, dali, strict=True):
        np.testing.assert_array_equal(o, d)


# random_crop_generator ---------------------------------------------------------------------------------------------

SHAPES = [np.array(s, np.int64) for s in ([100, 80], [1000, 1000, 3], [60, 200])]


def _check_generated(anchors, shapes, image_shapes, area=(0.08, 1.0), aspect=(0.75, 1.333333)) -> np.ndarray:
    fractions = []
    for a, s, image in zip(anchors, shapes, image_shapes, strict=True):
        height, width = int(image[0]), int(image[1])
        assert a.dtype == s.dtype == np.int32 and a.shape == s.shape == (2,)
        assert 0 <= a[0] and 0 <= a[1] and a[0] + s[0] <= height and a[1] + s[1] <= width and (s > 0).all()
        ratio = s[1] / s[0]
        assert aspect[0] - 0.05 <= ratio <= aspect[1] + 0.05
        fractions.append(s[0] * s[1] / (height * width))
        assert area[0] - 0.05 <= fractions[-1] <= area[1] + 0.01
    return np.array(fractions)


def test_generated_windows_are_in_range():
    batch = SHAPES * 40
    anchors, shapes = run_headrace(lambda x: fn.random_crop_generator(x), batch)
    fractions = _check_generated(anchors, shapes, batch)
    assert 0.25 <= fractions.mean() <= 0.65 and fractions.std() > 0.15  # below 0.54: large areas fail more often


def test_generated_windows_of_a_too_wide_image_and_bad_input():
    anchors, shapes = run_headrace(lambda x: fn.random_crop_generator(x), [np.array([50, 1000], np.int32)] * 64)
    assert {tuple(s.tolist()) for s in shapes} == {(50, 66)}  # the widest window in range: 50 * 1.333333
    assert len({int(a[1]) for a in anchors}) > 20  # placed anywhere along the width
    with pytest.raises(SampleError, match=r"random_crop_generator .*sample 0.*an image's shape"):
        run_headrace(lambda x: fn.random_crop_generator(x), [np.zeros((2, 2), np.int32)])


@pytest.mark.dali
@needs_dali
def test_generated_windows_agree_with_dalis():
    batch = SHAPES * 40
    ours = run_headrace(lambda x: fn.random_crop_generator(x, random_area=[0.2, 0.6]), batch)
    dali = run_dali(lambda x, f: f.random_crop_generator(x, random_area=[0.2, 0.6]), batch)
    ours_f = _check_generated(*ours, batch, area=(0.2, 0.6))
    dali_f = _check_generated(*dali, batch, area=(0.2, 0.6))
    assert abs(ours_f.mean() - dali_f.mean()) < 0.05  # sd of a mean of 120: 0.011
    for shape in ([50, 1000], [1000, 40, 3]):  # no choice but the extent: exact
        data = [np.array(shape, np.int64)] * 4
        ours = run_headrace(lambda x: fn.random_crop_generator(x), data)[1]
        dali = run_dali(lambda x, f: f.random_crop_generator(x), data)[1]
        for o, d in zip(ours, dali, strict=True):
            np.testing.assert_array_equal(o, d)


# GPU ---------------------------------------------------------------------------------------------------------------

def _constant(batch: list):
    """A batch source with no parameters."""
    return lambda: batch


def _cpu_and_gpu(build, *batches) -> tuple[list, list]:
    """build(device, *inputs) on the CPU and on the GPU (inputs uploaded); per output, the samples as numpy."""
    results = []
    for device in ("cpu", "gpu"):
        @pipeline_def(batch_size=len(batches[0]), num_threads=2, device_id=0, seed=5)
        def pipe(device=device):
            nodes = [fn.external_source(source=_constant(b)) for b in batches]
            outs = build(device, *[n.gpu() if device == "gpu" else n for n in nodes])
            return tuple(outs) if isinstance(outs, tuple | list) else (outs,)

        p = pipe()
        outs = p.run()
        results.append([[np.asarray(o.as_cpu().at(i) if o.device == "gpu" else o.at(i)) for i in range(len(o))]
                        for o in outs])
        p.close()
    return results[0], results[1]


GPU_CASES = [
    ("bbox", lambda d, x: fn.segmentation.random_object_bbox(x, device=d, output_class=True, seed=9), [_labels()] * 32),
    ("bbox_box", lambda d, x: fn.segmentation.random_object_bbox(x, device=d, format="box", ignore_class=True,
                                                                  seed=9), [_labels()] * 16),
    ("pixel", lambda d, x: fn.segmentation.random_mask_pixel(x, device=d, foreground=1, seed=9), [_mask()] * 32),
    ("pixel_any", lambda d, x: fn.segmentation.random_mask_pixel(x, device=d, seed=9), [_mask()] * 8),
    ("roi", lambda d, x: fn.roi_random_crop(x, device=d, seed=9, **ROI), [np.zeros((10, 12, 3), np.uint8)] * 16),
    ("generator", lambda d, x: fn.random_crop_generator(x, device=d, seed=9), SHAPES * 8),
]


@pytest.mark.gpu
@pytest.mark.parametrize("name, build, batch", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_matches_cpu(name, build, batch):
    cpu, gpu = _cpu_and_gpu(build, batch)
    for c_out, g_out in zip(cpu, gpu, strict=True):
        for c, g in zip(c_out, g_out, strict=True):
            assert c.dtype == g.dtype
            np.testing.assert_array_equal(c, g)


@pytest.mark.gpu
def test_gpu_select_masks_matches_cpu():
    vertices = [np.arange(26, dtype=np.float32).reshape(13, 2)] * 2
    ids = [np.array([2, 0], np.int32), np.array([4], np.int32)]
    cpu, gpu = _cpu_and_gpu(lambda d, a, b, c: fn.segmentation.select_masks(a, b, c, device=d, reindex_masks=True),
                            ids, [POLYGONS] * 2, vertices)
    for c_out, g_out in zip(cpu, gpu, strict=True):
        for c, g in zip(c_out, g_out, strict=True):
            np.testing.assert_array_equal(c, g)


def test_output_specs_agree_with_the_outputs():
    """What the schemas declare (element type, dimensions) is what the CPU kernels give."""
    from headrace import types

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        labels = fn.external_source(source=_constant([_labels()] * 2), ndim=2, dtype=types.INT32)
        ids = fn.external_source(source=_constant([np.array([1], np.int32)] * 2), ndim=1, dtype=types.INT32)
        polygons = fn.external_source(source=_constant([POLYGONS] * 2), ndim=2, dtype=types.INT32)
        vertices = fn.external_source(source=_constant([np.zeros((13, 2), np.float32)] * 2), ndim=2,
                                      dtype=types.FLOAT)
        shape = fn.external_source(source=_constant([np.array([30, 40, 3], np.int64)] * 2), ndim=1,
                                   dtype=types.INT64)
        return (*fn.segmentation.random_object_bbox(labels, output_class=True),
                fn.segmentation.random_object_bbox(labels, format="box"), fn.segmentation.random_mask_pixel(labels),
                *fn.segmentation.select_masks(ids, polygons, vertices),
                fn.roi_random_crop(labels, crop_shape=[2, 2], roi_start=[1, 1], roi_end=[3, 3]),
                *fn.random_crop_generator(shape))

    p = pipe()
    for out, batch in zip(p.outputs, p.run(), strict=True):
        spec = out.spec
        assert batch.dtype == spec.dtype, (out.op.schema.name, spec)
        for i in range(len(batch)):
            sample = np.asarray(batch.at(i))
            assert sample.ndim == len(spec.dims)
            assert all(want in (-1, got) for want, got in zip(spec.dims, sample.shape, strict=True))
    p.close()
