"""random_bbox_crop's whole-batch kernel (one compiled call per batch) against its per-sample kernel, bit for bit:
the same windows drawn from the same per-sample streams, the same boxes, labels and indices; the batches it leaves
to the per-sample kernel (and its errors); and the executor's use of it."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import fn, pipeline_def
from headrace.engine.context import node_seed
from headrace.errors import SampleError
from headrace.schema import get_schema
from headrace_kernels.columns import BatchColumns
from headrace_kernels.cpu import bbox_crop_ops
from headrace_kernels.rng import sample_rng

F32 = np.float32
RNG = np.random.default_rng(7)
SEED, FIRST = 1234567, 96


def boxes_2d(count: int, layout: str = "xyXY") -> np.ndarray:
    lo = RNG.uniform(0, 0.7, (count, 2))
    hi = np.minimum(lo + RNG.uniform(0.0, 0.4, (count, 2)), 1.0)
    return np.concatenate([lo, hi - lo if layout == "xyWH" else hi], axis=1).astype(F32)


def boxes_3d(count: int) -> np.ndarray:
    lo = RNG.uniform(0, 0.6, (count, 3))
    return np.concatenate([lo, lo + RNG.uniform(0.05, 0.4, (count, 3))], axis=1).astype(F32)


EDGES = np.array([[0.0, 0.0, 1.0, 1.0], [0.0, 0.3, 0.2, 1.0], [0.4, 0.4, 0.4, 0.7], [0.5, 0.5, 0.5, 0.5]], F32)


def batch(count: int, make=boxes_2d) -> list[np.ndarray]:
    samples = [make(int(RNG.integers(0, 9))) for _ in range(count)]
    samples[0] = make(0)  # no boxes
    return samples


CASES = [
    ({"scaling": [0.3, 1.0], "aspect_ratio": [0.5, 2.0], "thresholds": [0, 0.1, 0.3, 0.5, 0.7, 0.9],
      "bbox_layout": "xyXY", "allow_no_crop": True, "num_attempts": 1}, boxes_2d),  # the SSD example's
    ({"scaling": [0.3, 1.0], "thresholds": [0.0], "bbox_prune_threshold": 0.0}, boxes_2d),
    ({"scaling": [0.3, 1.0], "aspect_ratio": [0.5, 2.0], "bbox_prune_threshold": 0.5,
      "threshold_type": "overlap", "output_bbox_indices": True}, boxes_2d),
    ({"scaling": [0.5, 0.9], "aspect_ratio": [1.0, 1.0], "input_shape": [200, 100], "num_attempts": 4,
      "all_boxes_above_threshold": False, "thresholds": [0.2]}, boxes_2d),  # fixed aspect ratio: permutation draws
    ({"crop_shape": [30, 40], "input_shape": [100, 80], "output_bbox_indices": True}, boxes_2d),
    ({"bbox_layout": "xyWH", "thresholds": [0.3, 0.9], "total_num_attempts": 5},
     lambda n: boxes_2d(n, "xyWH")),
    ({"aspect_ratio": [0.5, 2.0, 0.5, 2.0, 0.5, 2.0], "thresholds": [0.1, 0.5]}, boxes_3d),
]


def per_sample(inputs: list[list], args: dict) -> list[tuple]:
    return [bbox_crop_ops.bbox_crop_sample([column[i] for column in inputs], args, sample_rng(SEED, FIRST + i))
            for i in range(len(inputs[0]))]


def assert_same_results(got, expected: list[tuple]) -> None:
    """The twin's columns (BatchColumns) against the per-sample kernel's tuples, sample by sample."""
    assert isinstance(got, BatchColumns)
    got = list(zip(*got, strict=True))
    assert len(got) == len(expected)
    for sample, (ours, theirs) in enumerate(zip(got, expected, strict=True)):
        assert len(ours) == len(theirs), sample
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape, (sample, a.dtype, a.shape, b.dtype, b.shape)
            np.testing.assert_array_equal(a, b, err_msg=f"sample {sample}")


@pytest.mark.parametrize("kwargs, make", CASES)
@pytest.mark.parametrize("with_labels", [True, False])
def test_batch_kernel_is_the_per_sample_kernel(kwargs, make, with_labels):
    args = get_schema("random_bbox_crop").resolve(kwargs)
    boxes = batch(40, make)
    inputs = [boxes]
    if with_labels:
        inputs.append([RNG.integers(0, 80, (len(b), 2) if i % 3 == 1 else len(b)).astype(np.int32)
                       for i, b in enumerate(boxes)])
    got = bbox_crop_ops.random_bbox_crop_batch(inputs, args, SEED, FIRST, len(boxes))
    assert got is not None
    assert_same_results(got, per_sample(inputs, args))


def test_batch_kernel_keeps_edge_and_degenerate_boxes_as_the_per_sample_kernel():
    args = get_schema("random_bbox_crop").resolve({"scaling": [0.3, 1.0], "thresholds": [0.0, 0.5]})
    inputs = [[EDGES] * 16, [np.arange(4, dtype=np.int32)] * 16]
    got = bbox_crop_ops.random_bbox_crop_batch(inputs, args, SEED, FIRST, 16)
    assert_same_results(got, per_sample(inputs, args))


@pytest.mark.parametrize("boxes, labels", [
    ([boxes_2d(3), boxes_2d(2).astype(np.float64)], None),  # not float32
    ([boxes_2d(3), boxes_3d(2)], None),  # 2D and 3D boxes in one batch
    ([boxes_2d(3), np.array([[-0.5, 0.2, 0.4, 0.6]], F32)], None),  # a box outside [0, 1]
    ([boxes_2d(3), boxes_2d(2)], [np.zeros(3, np.int32), np.zeros(5, np.int32)]),  # labels do not match
    ([np.zeros((2, 5), F32)], None),  # neither 4 nor 6 coordinates
])
def test_batch_kernel_leaves_bad_batches_to_the_per_sample_kernel(boxes, labels):
    args = get_schema("random_bbox_crop").resolve({})
    inputs = [boxes] + ([labels] if labels is not None else [])
    assert bbox_crop_ops.random_bbox_crop_batch(inputs, args, SEED, FIRST, len(boxes)) is None


def boxes_source(samples):
    return lambda: list(samples)


def test_pipeline_uses_the_batch_kernel_and_draws_the_per_sample_streams():
    boxes = batch(12)
    labels = [np.arange(len(b), dtype=np.int32) for b in boxes]
    kwargs = CASES[0][0]

    @pipeline_def(batch_size=12, num_threads=3, device_id=None, seed=5)
    def crop():
        b = fn.external_source(source=boxes_source(boxes))
        lab = fn.external_source(source=boxes_source(labels))
        return tuple(fn.random_bbox_crop(b, lab, name="crop", **kwargs))

    pipe = crop()
    pipe.build()
    op = next(op for kind, step in pipe._executor.cpu.steps if kind == "samples" for op in step
              if op.node.name == "crop")
    assert op.batch_kernel is not None
    seed = node_seed(5, op.node)
    args = get_schema("random_bbox_crop").resolve(kwargs)
    for iteration in range(2):
        outputs = pipe.run()
        for i in range(12):
            expected = bbox_crop_ops.bbox_crop_sample([boxes[i], labels[i]], args, sample_rng(seed, iteration * 12 + i))
            for out, value in zip(outputs, expected, strict=True):
                np.testing.assert_array_equal(out.at(i), value)


def test_pipeline_bad_sample_is_named_by_the_per_sample_kernel():
    boxes = [boxes_2d(3), np.array([[0.1, 0.2, 1.5, 0.6]], F32), boxes_2d(1)]

    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=5)
    def crop():
        return fn.random_bbox_crop(fn.external_source(source=boxes_source(boxes)))[0]

    pipe = crop()
    pipe.build()
    with pytest.raises(SampleError, match=r"random_bbox_crop .*sample 1.*box 0 .*outside \[0, 1\]"):
        pipe.run()
