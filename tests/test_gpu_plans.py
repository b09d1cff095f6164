"""The GPU stage's host-side planning, checked without a GPU: the fused resize + crop_mirror_normalize planned on a
decoder's packed output records (addresses and shapes as arrays) gives the same kernel records and tap tables as
planned image by image, and `adopt_inputs` points a plan at the images the decoder really produced (a CPU
fallback elsewhere in memory) or refuses when one differs in layout. Exact comparisons: both are integer and
float32 tables built by the same code. The records are packed uint8 HWC, so the planning never converts an image
and never needs CuPy; `image_ops.cupy` is replaced by a function that fails if it is called for anything."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import types
from headrace.schema import get_schema
from headrace_kernels.gpu import image_ops
from headrace_kernels.gpu.decode import DeviceImage


@pytest.fixture(autouse=True)
def _no_cupy_needed(monkeypatch):
    """as_hwc looks CuPy up before it knows whether it converts; these records never make it convert."""
    class _Unused:
        def __getattr__(self, name):
            raise AssertionError(f"planning packed uint8 records used cupy.{name}")

    monkeypatch.setattr(image_ops, "cupy", _Unused)


def _args(op: str, given: dict) -> dict:
    return get_schema(op).resolve(given)


def _records(shapes: list[tuple[int, int, int]]) -> tuple[list, np.ndarray, np.ndarray]:
    """Decoder-style records at made-up addresses in one allocation (nothing is read: no GPU needed)."""
    shapes_array = np.array(shapes, np.int64)
    sizes = (shapes_array.prod(axis=1) + 255) // 256 * 256
    addresses = np.uint64(1 << 40) + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64)
    images = [DeviceImage.at(None, int(a), s) for a, s in zip(addresses.tolist(), shapes, strict=True)]
    return images, addresses, shapes_array


@pytest.mark.parametrize("mirror", [[0, 1, 1, 0, 1], [0] * 5])
def test_packed_plan_equals_the_per_image_plan(mirror):
    images, addresses, shapes = _records([(375, 500, 3), (120, 80, 3), (224, 224, 3), (97, 301, 3), (33, 50, 3)])
    cmn = [_args("crop_mirror_normalize", {"dtype": types.FLOAT16, "output_layout": "CHW", "mirror": m,
                                           "mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4]})
           for m in mirror]
    resize = [_args("resize", {"resize_x": 224, "resize_y": 224})] * len(images)
    packed = image_ops.plan_crop_mirror_normalize(images, cmn, False, resize, (addresses, shapes))
    single = image_ops.plan_crop_mirror_normalize(images, cmn, False, resize)
    assert packed[1:] == single[1:]
    np.testing.assert_array_equal(packed[0].rec.view(np.uint8), single[0].rec.view(np.uint8))
    which_p, tables_p, starts_p = packed[0].tables.on_host()
    which_s, tables_s, starts_s = single[0].tables.on_host()
    np.testing.assert_array_equal(which_p, which_s)
    for a, b in zip(tables_p + starts_p, tables_s + starts_s, strict=True):
        np.testing.assert_array_equal(a, b)
    assert packed[0].rec["mirror_x"].tolist() == mirror


def test_adopt_inputs_follows_a_fallback_and_refuses_another_layout():
    images, addresses, shapes = _records([(64, 48, 3), (40, 40, 3)])
    cmn = [_args("crop_mirror_normalize", {"dtype": types.FLOAT, "output_layout": "CHW"})] * 2
    plan = image_ops.plan_crop_mirror_normalize(images, cmn, False, None, (addresses, shapes))
    fallback = DeviceImage.at(None, 12345 * 256, (40, 40, 3))  # image 1 decoded on the CPU and uploaded elsewhere
    assert image_ops.adopt_inputs(plan, [images[0], fallback])
    assert plan[0].rec["in"].tolist() == [int(addresses[0]), 12345 * 256]
    assert not image_ops.adopt_inputs(plan, [images[0], DeviceImage.at(None, 0, (40, 41, 3))])
    assert not image_ops.adopt_inputs(plan, images[:1])
