"""The bounding-box ops against DALI's CPU build on the same inputs, and the GPU kernels against the CPU ones.

Tolerances: bb_flip, coord_flip, bbox_paste, bbox_rotate and box_encoder (boxes) are exact (float32 arithmetic in
DALI's order); box_encoder's offsets are within 1e-5 absolute + 1e-6 relative (numpy's log against logf: one ulp,
7e-7 measured). random_bbox_crop draws from headrace's streams, not DALI's, so it is checked on the windows DALI
chose (given DALI's window, the same boxes kept, the same indices and labels, coordinates within 2e-6: the window's
far corner is rebuilt as anchor + shape) and by statistics of the windows both choose. ssd_random_crop (DALI's
deprecated crop, which outputs no window) is checked on the window its cropped image shows: the boxes follow from
it to within 2 pixels of the crop's extent (the window is known to a pixel). The GPU kernels give the CPU's results
exactly (random_bbox_crop, ssd_random_crop and bbox_rotate choose on the host from the same streams; box_encoder's
offsets within 1e-5); their batch logic also runs here with numpy standing in for CuPy. The compiled (numba)
random_bbox_crop search and box_encoder matching are pinned to their numpy references bit for bit (the same draws,
the stream's state after them included).
"""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import cpu_kernel_outputs, needs_dali

from headrace.errors import SampleError, SchemaError
from headrace_kernels.cpu.bbox_crop_ops import crop_boxes
from headrace_kernels.cpu.bbox_ops import read_corners, write_corners

RNG = np.random.default_rng(20)
F32 = np.float32


def ltrb_boxes(count: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """`count` random ltrb boxes inside [low, high]."""
    a = RNG.uniform(low, high, (count, 2))
    b = RNG.uniform(low, high, (count, 2))
    return np.concatenate([np.minimum(a, b), np.maximum(a, b)], axis=1).astype(F32)


EDGE_BOXES = np.array([[0.0, 0.0, 1.0, 1.0],  # the whole image, touching every border
                       [0.0, 0.3, 0.2, 1.0],  # touching left and bottom
                       [0.4, 0.4, 0.4, 0.7],  # degenerate: zero width
                       [0.5, 0.5, 0.5, 0.5]],  # a point
                      dtype=F32)
OUTSIDE = np.array([[-0.5, 1.2, 2.0, 3.0], [0.9, -0.1, 1.3, 0.2]], dtype=F32)
BOXES = [ltrb_boxes(7), np.zeros((0, 4), F32), EDGE_BOXES, OUTSIDE]
INSIDE = [ltrb_boxes(7), np.zeros((0, 4), F32), EDGE_BOXES, ltrb_boxes(3, 0.2, 0.6)]


def as_xywh(boxes: np.ndarray) -> np.ndarray:
    return np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1).astype(F32)


def labels_for(boxes: list[np.ndarray], column: bool = False) -> list[np.ndarray]:
    out = [RNG.integers(1, 80, len(b)).astype(np.int32) for b in boxes]
    return [label[:, None] for label in out] if column else out


def _source(samples):
    return lambda: list(samples)  # no parameter: DALI reads one as a request for batch info


def run_op(api, op: str, *inputs, arg_inputs: dict | None = None, device: str = "cpu", seed: int = 3,
           **kwargs) -> list[list[np.ndarray]]:
    """Every output of `op` (a list of samples each) over one batch, in headrace or DALI (`api`)."""
    gpu = device == "gpu"

    @api.pipeline_def(batch_size=len(inputs[0]), num_threads=1, device_id=0 if gpu else None, seed=seed)
    def pipe():
        nodes = [api.fn.external_source(source=_source(samples), batch=True) for samples in inputs]
        nodes = [n.gpu() for n in nodes] if gpu else nodes
        args = {name: api.fn.external_source(source=_source(samples), batch=True)
                for name, samples in (arg_inputs or {}).items()}
        out = getattr(api.fn, op)(*nodes, **args, **kwargs)
        return tuple(out) if isinstance(out, list | tuple) else out

    p = pipe()
    if hasattr(p, "build"):
        p.build()
    outputs = p.run()
    result = []
    for out in outputs:
        out = out.as_cpu() if getattr(out, "device", "cpu") == "gpu" else out
        result.append([np.array(out.at(i)) for i in range(len(out))])
    if hasattr(p, "close"):
        p.close()
    return result


def headrace_run(op: str, *inputs, **kwargs) -> list[list[np.ndarray]]:
    import headrace

    return run_op(headrace, op, *inputs, **kwargs)


def dali_run(op: str, *inputs, **kwargs) -> list[list[np.ndarray]]:
    from nvidia import dali

    return run_op(dali, op, *inputs, **kwargs)


def assert_same(ours: list[list[np.ndarray]], theirs: list[list[np.ndarray]], atol: float = 0.0,
                rtol: float = 0.0) -> None:
    assert len(ours) == len(theirs)
    for out_a, out_b in zip(ours, theirs, strict=True):
        for a, b in zip(out_a, out_b, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
            if atol or rtol:
                np.testing.assert_allclose(a, b, atol=atol, rtol=rtol)
            else:
                np.testing.assert_array_equal(a, b)


# bb_flip

@pytest.mark.parametrize("kwargs", [dict(ltrb=True), dict(ltrb=False, vertical=1), dict(horizontal=0, vertical=1),
                                    dict(ltrb=True, horizontal=0)])
@needs_dali[0]
@needs_dali[1]
def test_bb_flip_matches_dali(kwargs):
    boxes = BOXES if kwargs.get("ltrb") else [as_xywh(b) for b in BOXES]
    assert_same(headrace_run("bb_flip", boxes, **kwargs), dali_run("bb_flip", boxes, **kwargs))


@needs_dali[0]
@needs_dali[1]
def test_bb_flip_per_sample_flags_and_flat_samples_match_dali():
    boxes = [BOXES[0].reshape(-1), BOXES[2].reshape(-1), BOXES[3].reshape(-1)]  # DALI: one ndim per batch
    flags = {"horizontal": [np.array(v, np.int32) for v in (0, 1, 1)],
             "vertical": [np.array(v, np.int32) for v in (1, 0, 1)]}
    ours = headrace_run("bb_flip", boxes, arg_inputs=flags, ltrb=True)
    assert [o.shape for o in ours[0]] == [b.shape for b in boxes]
    assert_same(ours, dali_run("bb_flip", boxes, arg_inputs=flags, ltrb=True))


def test_bb_flip_mirrors_ltrb_corners():
    (out,) = headrace_run("bb_flip", [EDGE_BOXES], ltrb=True)
    np.testing.assert_allclose(out[0][:, 0], 1 - EDGE_BOXES[:, 2], atol=1e-7)
    np.testing.assert_allclose(out[0][:, 2], 1 - EDGE_BOXES[:, 0], atol=1e-7)
    np.testing.assert_array_equal(out[0][:, 1::2], EDGE_BOXES[:, 1::2])


@pytest.mark.parametrize("bad, message", [(np.zeros((2, 3), F32), r"input 0 \(boxes\).*multiple of 4.*\(2, 3\)"),
                                          (np.zeros((2, 4), np.float64), r"input 0 \(boxes\) must be float32")])
def test_bb_flip_bad_boxes_name_op_sample_and_input(bad, message):
    with pytest.raises(SampleError, match=r"bb_flip .*sample 1.*" + message):
        headrace_run("bb_flip", [EDGE_BOXES, bad])


# coord_flip

POINTS = [RNG.uniform(-0.5, 1.5, (5, 2)).astype(F32), np.zeros((0, 2), F32), RNG.uniform(0, 1, (3, 2)).astype(F32)]


@pytest.mark.parametrize("kwargs", [dict(), dict(center_x=0.3, flip_y=1, center_y=0.71), dict(flip_x=0, flip_y=1)])
@needs_dali[0]
@needs_dali[1]
def test_coord_flip_matches_dali(kwargs):
    assert_same(headrace_run("coord_flip", POINTS, **kwargs), dali_run("coord_flip", POINTS, **kwargs))


@needs_dali[0]
@needs_dali[1]
def test_coord_flip_3d_layout_and_per_sample_centers_match_dali():
    points = [RNG.uniform(0, 1, (4, 3)).astype(F32), RNG.uniform(0, 1, (2, 3)).astype(F32)]
    centers = {"center_z": [np.array(0.37, F32), np.array(0.9, F32)], "flip_z": [np.array(1, np.int32)] * 2}
    kwargs = dict(layout="zxy", flip_y=1)
    assert_same(headrace_run("coord_flip", points, arg_inputs=centers, **kwargs),
                dali_run("coord_flip", points, arg_inputs=centers, **kwargs))


def test_coord_flip_bad_layout_and_shape_are_named():
    with pytest.raises(SampleError, match=r"coord_flip .*sample 0.*argument 'layout' 'xx'"):
        headrace_run("coord_flip", POINTS, layout="xx")
    with pytest.raises(SampleError, match=r"coord_flip .*sample 0.*input 0 \(coordinates\).*\[N, D\]"):
        headrace_run("coord_flip", [np.zeros(6, F32)])


# bbox_paste

@pytest.mark.parametrize("kwargs", [dict(ratio=2.0), dict(ratio=1.7, paste_x=1.0, paste_y=0.3, ltrb=True),
                                    dict(ratio=3.3, paste_x=0.0, paste_y=1.0), dict(ratio=1.0, ltrb=True)])
@needs_dali[0]
@needs_dali[1]
def test_bbox_paste_matches_dali(kwargs):
    boxes = BOXES if kwargs.get("ltrb") else [as_xywh(b) for b in BOXES]
    assert_same(headrace_run("bbox_paste", boxes, **kwargs), dali_run("bbox_paste", boxes, **kwargs))


@needs_dali[0]
@needs_dali[1]
def test_bbox_paste_per_sample_ratio_matches_dali_and_keeps_boxes_inside():
    ratios = {"ratio": [np.array(r, F32) for r in (1.0, 2.5, 7.3, 1.01)],
              "paste_x": [np.array(p, F32) for p in (0.0, 1.0, 0.999, 0.5)]}
    ours = headrace_run("bbox_paste", INSIDE, arg_inputs=ratios, ltrb=True)
    assert_same(ours, dali_run("bbox_paste", INSIDE, arg_inputs=ratios, ltrb=True))
    for out in ours[0]:
        assert out.size == 0 or (out.min() >= 0 and out.max() <= 1)


def test_bbox_paste_ratio_below_one_is_an_error():
    with pytest.raises(SampleError, match=r"bbox_paste .*sample 0.*argument 'ratio' must be at least 1"):
        headrace_run("bbox_paste", INSIDE, ratio=0.5)


# box_encoder

ANCHORS = ltrb_boxes(40, 0.0, 1.0)


def encoder_batch() -> tuple[list[np.ndarray], list[np.ndarray]]:
    boxes = [ltrb_boxes(6), np.zeros((0, 4), F32), np.concatenate([ANCHORS[3:5], EDGE_BOXES[:2]]), ltrb_boxes(12)]
    return boxes, labels_for(boxes)


@pytest.mark.parametrize("kwargs", [dict(), dict(criteria=0.2), dict(criteria=0.0)])
@needs_dali[0]
@needs_dali[1]
def test_box_encoder_matches_dali(kwargs):
    boxes, labels = encoder_batch()
    anchors = ANCHORS.reshape(-1).tolist()
    assert_same(headrace_run("box_encoder", boxes, labels, anchors=anchors, **kwargs),
                dali_run("box_encoder", boxes, labels, anchors=anchors, **kwargs))


@needs_dali[0]
@needs_dali[1]
def test_box_encoder_offsets_match_dali():
    boxes, labels = encoder_batch()
    kwargs = dict(anchors=ANCHORS.reshape(-1).tolist(), offset=True, scale=300.0, means=[0.1, 0.2, 0.3, 0.4],
                  stds=[0.1, 0.1, 0.2, 0.2], criteria=0.3)
    assert_same(headrace_run("box_encoder", boxes, labels, **kwargs), dali_run("box_encoder", boxes, labels, **kwargs),
                atol=1e-5, rtol=1e-6)


def test_box_encoder_gives_an_anchor_its_identical_box_and_label():
    boxes = [ANCHORS[[7]]]
    labels = [np.array([42], np.int32)]
    encoded, classes = headrace_run("box_encoder", boxes, labels, anchors=ANCHORS.reshape(-1).tolist())
    assert classes[0][7] == 42 and encoded[0].shape == (40, 4)
    center = (ANCHORS[7, :2] + ANCHORS[7, 2:]) / 2
    np.testing.assert_allclose(encoded[0][7], [*center, *(ANCHORS[7, 2:] - ANCHORS[7, :2])], atol=1e-7)


@pytest.mark.parametrize("kwargs", [
    dict(), dict(criteria=0.0), dict(criteria=0.9), dict(offset=True, criteria=0.1),
    dict(offset=True, scale=300.0, means=[0.1, 0.2, 0.3, 0.4], stds=[0.1, 0.1, 0.2, 0.2])])
def test_box_encoder_compiled_matching_matches_the_numpy_reference(kwargs):
    """The compiled matching (numba, GIL released) gives the numpy reference's outputs bit for bit: ties between
    anchors (duplicated ones) and between boxes (duplicated ones, a box equal to an anchor) included."""
    from headrace.schema import get_schema
    from headrace_kernels.cpu.bbox_ops import cached_anchor_boxes, encode_boxes, encode_boxes_reference

    duplicated = np.concatenate([ANCHORS, ANCHORS[:9]])  # ties between anchors
    args = get_schema("box_encoder").resolve(dict(kwargs, anchors=duplicated.ravel().tolist()))
    anchors = cached_anchor_boxes(args["anchors"])
    rng = np.random.default_rng(5)
    batches = [ltrb_boxes(int(rng.integers(1, 9))) for _ in range(12)]
    batches += [np.zeros((0, 4), F32), np.concatenate([ANCHORS[3:6], ANCHORS[3:5], EDGE_BOXES[:2]]), EDGE_BOXES]
    for boxes in batches:
        labels = rng.integers(1, 80, (len(boxes), 1 + len(boxes) % 2)).astype(np.int32)
        want, got = encode_boxes_reference(boxes, labels, anchors, args), encode_boxes(boxes, labels, anchors, args)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def test_box_encoder_bad_inputs_are_named():
    with pytest.raises(SampleError, match=r"box_encoder .*sample 0.*input 0 \(boxes\) must be \[N, 4\]"):
        headrace_run("box_encoder", [np.zeros((2, 5), F32)], [np.zeros(2, np.int32)], anchors=[0, 0, 1, 1])
    with pytest.raises(SampleError, match=r"box_encoder .*sample 0.*input 1 \(labels\).*one row per box"):
        headrace_run("box_encoder", [EDGE_BOXES], [np.zeros(3, np.int32)], anchors=[0, 0, 1, 1])
    with pytest.raises(SchemaError, match=r"box_encoder: argument 'anchors'.*multiple of 4"):
        headrace_run("box_encoder", [EDGE_BOXES], [np.zeros(4, np.int32)], anchors=[0, 0, 1])


# bbox_rotate

ROTATIONS = [dict(angle=30.0, input_shape=[100, 80]),
             dict(angle=-70.0, input_shape=[60, 90, 3], shape_layout="HWC", keep_size=True),
             dict(angle=100.0, input_shape=[50, 70], mode="fixed"),
             dict(angle=20.0, input_shape=[50, 70], mode="halfway", keep_size=True, remove_threshold=0.5),
             dict(angle=45.0, input_shape=[64, 64], size=[80.5, 90.0]),
             dict(angle=33.0, input_shape=[41, 57], bbox_layout="xyWH"),
             dict(angle=25.0, input_shape=[2, 3], bbox_normalized=False, keep_size=True)]  # boxes in pixels


@pytest.mark.parametrize("kwargs", ROTATIONS)
@needs_dali[0]
@needs_dali[1]
def test_bbox_rotate_matches_dali(kwargs):
    boxes = INSIDE if kwargs.get("bbox_layout") != "xyWH" else [as_xywh(b) for b in INSIDE]
    labels = labels_for(boxes, column=kwargs["angle"] > 50)
    assert_same(headrace_run("bbox_rotate", boxes, labels, **kwargs), dali_run("bbox_rotate", boxes, labels, **kwargs))


@needs_dali[0]
@needs_dali[1]
def test_bbox_rotate_per_sample_angle_matches_dali():
    angles = {"angle": [np.array(a, F32) for a in (10.0, -135.0, 90.0, 0.0)]}
    labels = labels_for(INSIDE)
    kwargs = dict(input_shape=[30, 50], keep_size=True)
    assert_same(headrace_run("bbox_rotate", INSIDE, labels, arg_inputs=angles, **kwargs),
                dali_run("bbox_rotate", INSIDE, labels, arg_inputs=angles, **kwargs))


@needs_dali[0]
@needs_dali[1]
def test_bbox_rotate_without_labels_has_one_output():
    ours = headrace_run("bbox_rotate", INSIDE, angle=30.0, input_shape=[40, 40])
    assert_same(ours, dali_run("bbox_rotate", INSIDE, angle=30.0, input_shape=[40, 40]))


# random_bbox_crop

def kept_by_window(boxes: np.ndarray, anchor: np.ndarray, shape: np.ndarray, layout: str = "xyXY",
                   prune: float | None = None, input_shape=None):
    """What headrace keeps of `boxes` for the window (anchor, shape) a random_bbox_crop output gives (all of them,
    unchanged, for no crop)."""
    if not anchor.any() and np.array_equal(shape, input_shape if input_shape is not None else [1.0] * len(shape)):
        return boxes, np.arange(len(boxes), dtype=np.int32)
    if input_shape is not None:  # crop_shape: a window in pixels
        scale = np.asarray(input_shape, F32)
        lo = anchor / scale
        hi = shape / scale + lo
    else:
        lo, hi = anchor, (anchor + shape).astype(F32)
    box_lo, box_hi = read_corners(boxes, layout)
    kept_lo, kept_hi, indices = crop_boxes(box_lo, box_hi, lo, hi, prune)
    return write_corners(kept_lo, kept_hi, layout), indices


def crop_batch(count: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    boxes = []
    for _ in range(count):
        lo = RNG.uniform(0, 0.7, (int(RNG.integers(1, 9)), 2))
        boxes.append(np.concatenate([lo, lo + RNG.uniform(0.001, 0.3, lo.shape)], axis=1).astype(F32))
    boxes[0] = EDGE_BOXES
    return boxes, labels_for(boxes)


CROPS = [dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], thresholds=[0.1, 0.3, 0.5]),
         dict(scaling=[0.3, 1.0], thresholds=[0.0], bbox_prune_threshold=0.0),
         dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], bbox_prune_threshold=0.5, threshold_type="overlap"),
         dict(scaling=[0.5, 0.9], aspect_ratio=[1.0, 1.0], input_shape=[200, 100], num_attempts=4,
              all_boxes_above_threshold=False, thresholds=[0.2]),
         dict(crop_shape=[30, 40], input_shape=[100, 80])]


@pytest.mark.parametrize("kwargs", CROPS)
@needs_dali[0]
@needs_dali[1]
def test_random_bbox_crop_keeps_the_boxes_dali_keeps_for_its_windows(kwargs):
    boxes, labels = crop_batch(24)
    pixels = kwargs.get("input_shape") if "crop_shape" in kwargs else None
    prune = kwargs.get("bbox_prune_threshold")
    anchors, shapes, kept, kept_labels, indices = dali_run("random_bbox_crop", boxes, labels,
                                                           output_bbox_indices=True, **kwargs)
    for i, box in enumerate(boxes):
        mine, mine_indices = kept_by_window(box, anchors[i], shapes[i], prune=prune, input_shape=pixels)
        np.testing.assert_array_equal(mine_indices, indices[i])
        np.testing.assert_array_equal(labels[i][mine_indices], kept_labels[i])
        assert mine.shape == kept[i].shape
        np.testing.assert_allclose(mine, kept[i], atol=2e-6, rtol=0)


@needs_dali[0]
@needs_dali[1]
def test_random_bbox_crop_xywh_boxes_on_dalis_windows():
    boxes, _ = crop_batch(16)
    boxes = [as_xywh(b) for b in boxes]
    anchors, shapes, kept, indices = dali_run("random_bbox_crop", boxes, bbox_layout="xyWH", scaling=[0.3, 1.0],
                                              output_bbox_indices=True)
    for i, box in enumerate(boxes):
        mine, mine_indices = kept_by_window(box, anchors[i], shapes[i], layout="xyWH")
        np.testing.assert_array_equal(mine_indices, indices[i])
        np.testing.assert_allclose(mine, kept[i], atol=2e-6, rtol=0)


@pytest.mark.parametrize("kwargs", CROPS)
def test_random_bbox_crop_outputs_follow_from_its_own_windows(kwargs):
    boxes, labels = crop_batch(24)
    pixels = kwargs.get("input_shape") if "crop_shape" in kwargs else None
    anchors, shapes, kept, kept_labels, indices = headrace_run("random_bbox_crop", boxes, labels,
                                                               output_bbox_indices=True, **kwargs)
    for i, box in enumerate(boxes):
        assert anchors[i].dtype == np.float32 and anchors[i].shape == (2,) and shapes[i].shape == (2,)
        mine, mine_indices = kept_by_window(box, anchors[i], shapes[i], prune=kwargs.get("bbox_prune_threshold"),
                                            input_shape=pixels)
        np.testing.assert_array_equal(mine_indices, indices[i])
        np.testing.assert_array_equal(labels[i][mine_indices], kept_labels[i])
        np.testing.assert_allclose(mine, kept[i], atol=2e-6, rtol=0)
        if pixels is None:
            assert np.all(anchors[i] >= 0) and np.all(anchors[i] + shapes[i] <= 1 + 1e-6)
        else:
            np.testing.assert_array_equal(shapes[i], [30, 40])
            assert np.all(anchors[i] == np.round(anchors[i])) and np.all(anchors[i] <= [70, 40])


def window_statistics(run, kwargs: dict, count: int = 96) -> dict:
    boxes, labels = crop_batch(count)
    anchors, shapes, *_ = run("random_bbox_crop", boxes, labels, **kwargs)
    shapes = np.array(shapes)
    whole = np.all(shapes == 1, axis=1)
    cropped = shapes[~whole]
    return {"no_crop": whole.mean(), "mean_extent": cropped.mean() if cropped.size else 0.0,
            "min_extent": cropped.min() if cropped.size else 1.0, "ratios": cropped[:, 0] / cropped[:, 1]}


@needs_dali[0]
@needs_dali[1]
def test_random_bbox_crop_window_statistics_match_dali():
    kwargs = dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], thresholds=[0.0, 0.1])
    ours, theirs = window_statistics(headrace_run, kwargs, 200), window_statistics(dali_run, kwargs, 200)
    # no crop: a third of the draws, and every draw after a failed search (about 0.55 for these boxes)
    assert abs(ours["no_crop"] - theirs["no_crop"]) < 0.15 and 1 / 3 < ours["no_crop"] < 0.8
    assert abs(ours["mean_extent"] - theirs["mean_extent"]) < 0.08
    assert ours["min_extent"] >= 0.3 - 1e-6
    assert ours["ratios"].min() >= 0.5 - 1e-5 and ours["ratios"].max() <= 2.0 + 1e-5


def test_random_bbox_crop_fixed_aspect_ratio_is_in_pixels_with_input_shape():
    stats = window_statistics(headrace_run, dict(scaling=[0.3, 1.0], aspect_ratio=[1.0, 1.0], input_shape=[200, 100],
                                                 allow_no_crop=False), count=32)
    np.testing.assert_allclose(stats["ratios"], 0.5, rtol=1e-5)  # 200 wide, 100 high: square in pixels


def test_random_bbox_crop_is_reproducible_and_depends_on_the_seed():
    boxes, labels = crop_batch(8)
    kwargs = dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], allow_no_crop=False, total_num_attempts=20)
    first = headrace_run("random_bbox_crop", boxes, labels, seed=11, **kwargs)
    assert_same(first, headrace_run("random_bbox_crop", boxes, labels, seed=11, **kwargs))
    other = headrace_run("random_bbox_crop", boxes, labels, seed=12, **kwargs)
    assert any(not np.array_equal(a, b) for a, b in zip(first[0], other[0], strict=True))


def test_random_bbox_crop_without_boxes():
    empty = [np.zeros((0, 4), F32)] * 4
    labels = [np.zeros(0, np.int32)] * 4
    anchors, shapes, kept, kept_labels = headrace_run("random_bbox_crop", empty, labels, scaling=[0.3, 1.0])
    for anchor, shape, boxes in zip(anchors, shapes, kept, strict=True):  # no window keeps a box: no crop
        np.testing.assert_array_equal(anchor, [0, 0])
        np.testing.assert_array_equal(shape, [1, 1])
        assert boxes.shape == (0, 4)
    anchors, shapes, kept, _ = headrace_run("random_bbox_crop", empty, labels, scaling=[0.3, 1.0],
                                            allow_no_crop=False, total_num_attempts=5)
    for shape, boxes in zip(shapes, kept, strict=True):  # the best (first) window, with no boxes
        assert np.all((shape >= 0.3 - 1e-6) & (shape <= 1)) and boxes.shape == (0, 4)


@needs_dali[0]
@needs_dali[1]
def test_random_bbox_crop_without_boxes_matches_dali():
    empty = [np.zeros((0, 4), F32)] * 3
    labels = [np.zeros(0, np.int32)] * 3
    assert_same(headrace_run("random_bbox_crop", empty, labels), dali_run("random_bbox_crop", empty, labels))


def test_random_bbox_crop_bad_boxes_name_op_sample_and_input():
    boxes, labels = crop_batch(3)
    outside = [boxes[0], OUTSIDE, boxes[2]]
    with pytest.raises(SampleError, match=r"random_bbox_crop .*sample 1.*input 0 \(boxes\): box 0 .*outside \[0, 1\]"):
        headrace_run("random_bbox_crop", outside, labels_for(outside))
    wide = [np.zeros((2, 5), F32)]
    with pytest.raises(SampleError, match=r"random_bbox_crop .*sample 0.*input 0 \(boxes\).*4 \(2D\) or 6"):
        headrace_run("random_bbox_crop", wide, [np.zeros(2, np.int32)])
    with pytest.raises(SampleError, match=r"random_bbox_crop .*sample 0.*input 1 \(labels\).*one row per box"):
        headrace_run("random_bbox_crop", [EDGE_BOXES], [np.zeros(3, np.int32)])


@pytest.mark.parametrize("kwargs, message", [
    (dict(bbox_layout="xyXZ"), r"argument 'bbox_layout': 'xyXZ' is not a permutation"),
    (dict(crop_shape=[10, 10]), r"crop_shape needs input_shape"),
    (dict(crop_shape=[10, 10], input_shape=[20, 20], scaling=[0.5, 1.0]), r"aspect_ratio and scaling do not apply"),
    (dict(ltrb=True, bbox_layout="xyXY"), r"ltrb \(deprecated\) and bbox_layout exclude each other"),
])
def test_random_bbox_crop_bad_arguments_are_schema_errors(kwargs, message):
    boxes, labels = crop_batch(2)
    with pytest.raises(SchemaError, match=r"random_bbox_crop.*" + message):
        headrace_run("random_bbox_crop", boxes, labels, **kwargs)


def test_random_bbox_crop_bad_argument_values_name_the_argument():
    boxes, labels = crop_batch(2)
    with pytest.raises(SchemaError, match=r"random_bbox_crop .*argument 'thresholds'.*<= 1"):
        headrace_run("random_bbox_crop", boxes, labels, thresholds=[1.5])
    with pytest.raises(SampleError, match=r"random_bbox_crop .*sample 0.*argument 'scaling'.*min <= max"):
        headrace_run("random_bbox_crop", boxes, labels, scaling=[0.9, 0.5])
    with pytest.raises(SampleError, match=r"random_bbox_crop .*sample 0.*argument 'allow_no_crop'"):
        headrace_run("random_bbox_crop", boxes, labels, crop_shape=[5, 5], input_shape=[9, 9], allow_no_crop=True)


def test_random_bbox_crop_3d_boxes_keep_what_their_windows_keep():
    lo = RNG.uniform(0, 0.6, (5, 3))
    boxes = [np.concatenate([lo, lo + 0.3], axis=1).astype(F32)] * 4
    labels = labels_for(boxes)
    anchors, shapes, kept, _, indices = headrace_run("random_bbox_crop", boxes, labels, scaling=[0.4, 1.0],
                                                     aspect_ratio=[0.5, 2.0], output_bbox_indices=True)
    for i in range(4):
        assert anchors[i].shape == (3,) and kept[i].shape[1] == 6
        mine, mine_indices = kept_by_window(boxes[i], anchors[i], shapes[i], layout="xyzXYZ")
        np.testing.assert_array_equal(mine_indices, indices[i])
        np.testing.assert_allclose(mine, kept[i], atol=2e-6, rtol=0)


def test_random_bbox_crop_without_labels_has_three_outputs():
    boxes, _ = crop_batch(3)
    assert len(headrace_run("random_bbox_crop", boxes, scaling=[0.3, 1.0])) == 3


PINNED_CROPS = CROPS[:4] + [
    dict(crop_shape=[30, 40], input_shape=[100, 80], thresholds=[0.5], total_num_attempts=30),
    dict(crop_shape=[100, 40], input_shape=[100, 80], thresholds=[0.9], total_num_attempts=7, output_bbox_indices=True),
    dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], thresholds=[0, 0.1, 0.3, 0.5, 0.7, 0.9], allow_no_crop=True),
    dict(scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], allow_no_crop=False, total_num_attempts=20, thresholds=[0.99]),
    dict(scaling=[0.2, 1.0], aspect_ratio=[0.5, 2.0, 1.0, 1.0, 0.8, 1.25], input_shape=[50, 60, 70], num_attempts=3,
         thresholds=[0.1, 0.5], shape_layout="DWH"),
    dict(scaling=[0.2, 1.0], thresholds=[0.3], bbox_layout="xyzWHD", all_boxes_above_threshold=False),
    dict(scaling=[0.0, 1.0], aspect_ratio=[0.0, 3.0], thresholds=[0.5], allow_no_crop=False, total_num_attempts=50,
         threshold_type="overlap", bbox_layout="yXxY"),
    dict(crop_shape=[10, 10], input_shape=[2**33, 100], total_num_attempts=3),  # beyond 32-bit draws: the reference
]


def pinned_boxes(rng: np.random.Generator, ndim: int, shaped: bool) -> np.ndarray:
    """0-5 random boxes inside [0, 1] (one degenerate, of zero extent, at times), as start-end or start-extent."""
    lo = rng.uniform(0, 0.7, (int(rng.integers(0, 6)), ndim))
    hi = np.minimum(lo + rng.uniform(0.0, 0.4, lo.shape), 1.0)
    if len(lo) and rng.random() < 0.2:
        hi[0, 0] = lo[0, 0]
    return np.concatenate([lo, hi - lo if shaped else hi], axis=1).astype(F32)


@pytest.mark.parametrize("kwargs", PINNED_CROPS)
def test_random_bbox_crop_compiled_search_matches_the_numpy_reference(kwargs):
    """The compiled search (numba, GIL released) gives the numpy reference's outputs bit for bit, from the same
    draws of the same stream (its state after the search included); errors too."""
    from headrace.schema import get_schema
    from headrace_kernels.cpu.bbox_crop_ops import bbox_crop_sample, bbox_crop_sample_reference

    args = get_schema("random_bbox_crop").resolve(kwargs)
    layout = kwargs.get("bbox_layout") or ("xyzXYZ" if len(kwargs.get("input_shape", [])) == 3 else "xyXY")
    canonical = ("xyz"[:len(layout) // 2] + ("WHD" if "W" in layout else "XYZ")[:len(layout) // 2])
    rng = np.random.default_rng(len(layout) + 100 * PINNED_CROPS.index(kwargs))
    for case in range(60):
        boxes = pinned_boxes(rng, len(layout) // 2, "W" in layout)[:, [canonical.index(c) for c in layout]]
        if case % 20 == 7 and len(boxes):
            boxes[-1, 0] = 1.5  # outside [0, 1]: an error
        labels = rng.integers(0, 9, len(boxes)).astype(np.int32)
        results = []
        for run in (bbox_crop_sample_reference, bbox_crop_sample):
            stream = np.random.Generator(np.random.Philox(key=[case, 7]))
            try:
                out = run([boxes, labels], args, stream)
            except ValueError as exc:
                out = str(exc)
            results.append((out, stream.bit_generator.state))
        (want, want_state), (got, got_state) = results
        assert str(got_state) == str(want_state), case
        if isinstance(want, str):
            assert got == want
            continue
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, (case, a, b)
            np.testing.assert_array_equal(a, b, err_msg=f"case {case}")


# GPU against CPU

def _cpu_and_gpu(op: str, *inputs, **kwargs):
    return headrace_run(op, *inputs, **kwargs), headrace_run(op, *inputs, device="gpu", **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("op, kwargs", [("bb_flip", dict(ltrb=True)), ("bb_flip", dict(vertical=1)),
                                        ("bbox_paste", dict(ratio=2.5, paste_x=0.2, ltrb=True)),
                                        ("bbox_paste", dict(ratio=1.5))])
def test_gpu_box_transforms_match_cpu(op, kwargs):
    boxes = BOXES if kwargs.get("ltrb") else [as_xywh(b) for b in BOXES]
    assert_same(*_cpu_and_gpu(op, boxes, **kwargs))
    flags = {"horizontal": [np.array(v, np.int32) for v in (0, 1, 1, 0)]}
    assert_same(*_cpu_and_gpu("bb_flip", boxes, arg_inputs=flags, ltrb=True))
    flags["vertical"] = [np.array(v, np.int32) for v in (1, 1, 0, 0)]
    assert_same(*_cpu_and_gpu("bb_flip", [as_xywh(b) for b in BOXES], arg_inputs=flags, ltrb=False))


@pytest.mark.gpu
def test_gpu_coord_flip_matches_cpu():
    assert_same(*_cpu_and_gpu("coord_flip", POINTS, center_x=0.3, flip_y=1))


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", [dict(), dict(criteria=0.2),
                                    dict(offset=True, scale=300.0, means=[0.1, 0.2, 0.3, 0.4],
                                         stds=[0.1, 0.1, 0.2, 0.2])])
def test_gpu_box_encoder_matches_cpu(kwargs):
    boxes, labels = encoder_batch()
    tolerance = dict(atol=1e-5, rtol=1e-6) if kwargs.get("offset") else {}
    assert_same(*_cpu_and_gpu("box_encoder", boxes, labels, anchors=ANCHORS.reshape(-1).tolist(), **kwargs),
                **tolerance)


@pytest.mark.gpu
def test_gpu_bbox_rotate_and_random_bbox_crop_match_cpu():
    labels = labels_for(INSIDE)
    assert_same(*_cpu_and_gpu("bbox_rotate", INSIDE, labels, **ROTATIONS[1]))
    boxes, labels = crop_batch(8)
    assert_same(*_cpu_and_gpu("random_bbox_crop", boxes, labels, output_bbox_indices=True, **CROPS[0]))


# The GPU kernels' batch logic, run here with numpy standing in for CuPy (same array API): the same results as the
# CPU kernels, sample by sample. The device runs the real thing in the gpu-marked tests above.

class HostBatch:
    """What the GPU kernels read of a batch, over host arrays."""

    def __init__(self, inputs: list[list[np.ndarray]], args: dict, per_sample: list[dict] | None = None):
        self.inputs, self.args, self.size = inputs, args, len(inputs[0])
        self._per_sample = per_sample

    def num_inputs(self) -> int:
        return len(self.inputs)

    def value(self, k: int = 0) -> list[np.ndarray]:
        return self.inputs[k]

    def samples(self, k: int = 0) -> list[np.ndarray]:
        return self.inputs[k]

    def sample_args(self) -> list[dict]:
        return self._per_sample or [self.args] * self.size

    def rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng(index)


def resolved(op: str, **kwargs) -> dict:
    from headrace.schema import get_schema

    schema = get_schema(op)
    return schema.resolve(schema.validate_args("node", kwargs))


def outputs_of(result) -> list[list[np.ndarray]]:
    """A GPU kernel's result ((dense, list) or a tuple of them per output) as lists of samples."""
    parts = result if isinstance(result[0], tuple) else (result,)
    return [list(dense) if dense is not None else listed for dense, listed in parts]


@pytest.fixture
def numpy_gpu(monkeypatch):
    from headrace_kernels.gpu import bbox_ops

    monkeypatch.setattr(bbox_ops, "cupy", lambda: np)
    return bbox_ops


@pytest.mark.parametrize("op, kwargs, per_sample", [  # bb_flip is one kernels/bbox.cu launch: the device runs it
    ("bbox_paste", dict(ratio=2.5, ltrb=True), [dict(paste_x=p) for p in (0.0, 0.3, 1.0, 0.5)]),
    ("bbox_paste", dict(ratio=1.5), None),
])
def test_gpu_box_transforms_batch_logic_matches_cpu(numpy_gpu, op, kwargs, per_sample):
    args = resolved(op, **kwargs)
    args_list = [{**args, **extra} for extra in per_sample] if per_sample else [args] * len(BOXES)
    boxes = BOXES if args["ltrb"] else [as_xywh(b) for b in BOXES]
    kernel = getattr(numpy_gpu, f"{op}_kernel")
    assert_same(outputs_of(kernel(HostBatch([boxes], args, args_list))), cpu_kernel_outputs(op, [boxes], args_list))


def test_gpu_coord_flip_batch_logic_matches_cpu(numpy_gpu):
    args = resolved("coord_flip", flip_y=1)
    args_list = [{**args, "center_x": c} for c in (0.1, 0.5, 0.9)]
    got = outputs_of(numpy_gpu.coord_flip_kernel(HostBatch([POINTS], args, args_list)))
    assert_same(got, cpu_kernel_outputs("coord_flip", [POINTS], args_list))


def test_gpu_host_kernels_match_cpu(numpy_gpu):
    labels = labels_for(INSIDE)
    args = resolved("bbox_rotate", **ROTATIONS[3])
    got = outputs_of(numpy_gpu.bbox_rotate_kernel(HostBatch([INSIDE, labels], args)))
    assert_same(got, cpu_kernel_outputs("bbox_rotate", [INSIDE, labels], [args] * len(INSIDE)))
    boxes, labels = crop_batch(6)
    args = resolved("random_bbox_crop", output_bbox_indices=True, **CROPS[0])
    got = outputs_of(numpy_gpu.random_bbox_crop_kernel(HostBatch([boxes, labels], args)))
    assert_same(got, cpu_kernel_outputs("random_bbox_crop", [boxes, labels], [args] * len(boxes)))
    images, boxes, labels = ssd_batch(6)
    args = resolved("ssd_random_crop", num_attempts=3)
    got = outputs_of(numpy_gpu.ssd_random_crop_kernel(HostBatch([images, boxes, labels], args)))
    assert_same(got, cpu_kernel_outputs("ssd_random_crop", [images, boxes, labels], [args] * len(images)))


# Output specs and per-sample shapes

def test_output_specs_agree_with_the_outputs():
    import headrace
    from headrace import fn, types

    boxes, labels = crop_batch(4)
    pipe = headrace.Pipeline(batch_size=4, num_threads=1, device_id=None, seed=2)
    with pipe:
        b = fn.external_source(name="boxes", dtype=types.FLOAT, ndim=2)
        lab = fn.external_source(name="labels", dtype=types.INT32, ndim=1)
        anchor, shape, cropped, kept, indices = fn.random_bbox_crop(b, lab, scaling=[0.3, 1.0],
                                                                    output_bbox_indices=True)
        encoded, classes = fn.box_encoder(cropped, kept, anchors=ANCHORS.reshape(-1).tolist())
        rotated, rotated_labels = fn.bbox_rotate(b, lab, angle=20.0, input_shape=[30, 40])
        outs = (anchor, shape, cropped, kept, indices, encoded, classes, rotated, rotated_labels,
                fn.bb_flip(b), fn.bbox_paste(b, ratio=2.0), fn.coord_flip(fn.reshape(b, shape=[-1, 2])))
        pipe.set_outputs(*outs)
    loaded = headrace.Pipeline.load(pipe.serialize())  # the pipeline file keeps the ops and their specs
    assert [o.spec for o in loaded.outputs] == [o.spec for o in pipe.outputs]
    feed = {"boxes": boxes, "labels": labels}
    for ours, theirs in zip(pipe.run(**feed), loaded.run(**feed), strict=True):
        assert all(np.array_equal(ours.at(i), theirs.at(i)) for i in range(len(ours)))
    loaded.close()
    for node, batch in zip(outs, pipe.run(**feed), strict=True):
        spec = node.spec
        for i in range(len(batch)):
            sample = np.asarray(batch.at(i))
            assert sample.dtype == spec.dtype, (node.name, spec, sample.dtype)
            assert spec.dims is None or (len(spec.dims) == sample.ndim and all(
                d in (-1, n) for d, n in zip(spec.dims, sample.shape, strict=True))), (node.name, spec, sample.shape)
    pipe.close()


@needs_dali[0]
@needs_dali[1]
def test_random_bbox_crop_per_sample_shapes_on_dalis_windows():
    boxes, labels = crop_batch(6)
    shapes = {"input_shape": [np.array([w, h], np.int32) for w, h in ((100, 80), (50, 50), (64, 32)) * 2],
              "crop_shape": [np.array([30, 20], np.int32)] * 6}
    anchors, sizes, kept, _, indices = dali_run("random_bbox_crop", boxes, labels, arg_inputs=shapes,
                                                output_bbox_indices=True)
    ours = headrace_run("random_bbox_crop", boxes, labels, arg_inputs=shapes, output_bbox_indices=True)
    for i, box in enumerate(boxes):
        pixels = shapes["input_shape"][i]
        np.testing.assert_array_equal(sizes[i], [30, 20])
        np.testing.assert_array_equal(ours[1][i], [30, 20])
        assert np.all(ours[0][i] <= pixels - [30, 20])
        for anchor, out, index in ((anchors[i], kept[i], indices[i]), (ours[0][i], ours[2][i], ours[4][i])):
            mine, mine_indices = kept_by_window(box, anchor, np.array([30, 20], F32), input_shape=pixels)
            np.testing.assert_array_equal(mine_indices, index)
            np.testing.assert_allclose(mine, out, atol=2e-6, rtol=0)


# ssd_random_crop

def ssd_batch(count: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    images = [RNG.integers(0, 256, (int(RNG.integers(40, 90)), int(RNG.integers(40, 90)), 3), dtype=np.uint8)
              for _ in range(count)]
    boxes, _ = crop_batch(count)
    labels = [np.arange(1, len(b) + 1, dtype=np.int32) for b in boxes]  # a box's label is its index + 1
    return images, boxes, labels


def located(crop: np.ndarray, image: np.ndarray) -> tuple[int, int]:
    """(x0, y0) where `crop` sits in `image` (random pixels: one place)."""
    h, w = crop.shape[:2]
    for y in range(image.shape[0] - h + 1):
        for x in range(image.shape[1] - w + 1):
            if np.array_equal(image[y:y + h, x:x + w], crop):
                return x, y
    raise AssertionError("the crop is not a window of the image")


def check_ssd_outputs(images, boxes, labels, outputs) -> float:
    """Each sample's outputs against the window its cropped image shows; returns the fraction not cropped."""
    whole = 0
    for image, box, label, crop, kept, kept_labels in zip(images, boxes, labels, *outputs, strict=True):
        if crop.shape == image.shape:
            whole += 1
            np.testing.assert_array_equal(kept, box)
            np.testing.assert_array_equal(kept_labels, label)
            continue
        x0, y0 = located(crop, image)
        height, width = image.shape[:2]
        w, h = crop.shape[1] / width, crop.shape[0] / height
        assert 0.3 - 1.5 / width <= w <= 1 and 0.3 - 1.5 / height <= h <= 1
        left, top = x0 / width, y0 / height
        assert kept.shape == (len(kept_labels), 4) and len(kept_labels) > 0
        expected = np.clip((box[kept_labels - 1] - [left, top, left, top]) / [w, h, w, h], 0, 1)
        np.testing.assert_allclose(kept, expected, atol=2.0 / min(crop.shape[:2]))  # the window, to a pixel
    return whole / len(images)


@needs_dali[0]
@needs_dali[1]
def test_ssd_random_crop_boxes_follow_the_windows_in_dali_and_headrace():
    images, boxes, labels = ssd_batch(24)
    theirs = dali_run("ssd_random_crop", images, boxes, labels, num_attempts=4)  # DALI warns: deprecated
    ours = headrace_run("ssd_random_crop", images, boxes, labels, num_attempts=4)
    assert 0 < check_ssd_outputs(images, boxes, labels, ours) < 0.6
    assert check_ssd_outputs(images, boxes, labels, theirs) < 0.6


def test_ssd_random_crop_kernel_cuts_the_window_it_draws():
    from headrace_kernels.cpu.bbox_crop_ops import ssd_window
    from headrace_kernels.registry import get_cpu_kernel

    class Context:
        def __init__(self, seed: int):
            self.rng = np.random.default_rng(seed)

    images, boxes, labels = ssd_batch(12)
    kernel = get_cpu_kernel("ssd_random_crop")
    for seed, (image, box, label) in enumerate(zip(images, boxes, labels, strict=True)):
        crop, kept, kept_labels = kernel([image, box, label], {"num_attempts": 2}, Context(seed))
        chosen = ssd_window(box, 2, np.random.default_rng(seed))
        if chosen is None:
            assert crop.shape == image.shape and np.array_equal(kept, box)
            continue
        (left, top, w, h), inside = chosen
        height, width = image.shape[:2]
        x0, y0 = int(np.floor(left * width + 0.5)), int(np.floor(top * height + 0.5))
        x1, y1 = int(np.floor((left + w) * width + 0.5)), int(np.floor((top + h) * height + 0.5))
        np.testing.assert_array_equal(crop, image[y0:y1, x0:x1])
        np.testing.assert_array_equal(kept_labels, label[inside])
        np.testing.assert_allclose(kept, np.clip((box[inside] - [left, top, left, top]) / [w, h, w, h], 0, 1),
                                   atol=1e-7)


@pytest.mark.gpu
def test_gpu_ssd_random_crop_matches_cpu():
    images, boxes, labels = ssd_batch(6)
    # the same node name on both devices: the same random streams (a node's seed follows its name)
    cpu = headrace_run("ssd_random_crop", images, boxes, labels, num_attempts=3, name="ssd")
    assert_same(cpu, headrace_run("ssd_random_crop", images, boxes, labels, num_attempts=3, device="gpu",
                                  name="ssd"))


