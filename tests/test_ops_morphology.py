"""experimental.median_blur / dilate / erode and equalize.

DALI has median_blur, dilate and erode on the GPU only (CV-CUDA), so its CPU build cannot run them: they are tested
against OpenCV, as DALI's own tests test them (cv2.medianBlur; cv2.dilate / cv2.erode with a rectangular element of
mask_size as (width, height), anchor (x, y), OpenCV's border types), and against a numpy window written here for the
cases OpenCV does not cover (non-square median windows, wrap borders): exact, as these ops only pick input values.
equalize against DALI's CPU operator and cv2.equalizeHist per channel: exact. GPU kernels against the CPU ones: exact.
"""

from __future__ import annotations

from collections.abc import Callable

import cv2
import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import assert_specs_agree, needs_dali, run_once

import headrace
from headrace.errors import SampleError
from headrace_kernels.cpu.morphology_ops import equalize_lut

RNG = np.random.default_rng(18)
IMAGES = [RNG.integers(0, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
FLOATS = [RNG.uniform(0, 1, (15, 21)).astype(np.float32), RNG.uniform(-1, 1, (8, 6)).astype(np.float32)]
WIDE = [RNG.integers(0, 65535, (10, 11, 6), dtype=np.uint16)]
OPENCV_BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT,
                  "reflect_101": cv2.BORDER_REFLECT_101}
NUMPY_PADS = {"replicate": "edge", "reflect": "symmetric", "reflect_101": "reflect", "wrap": "wrap"}


def _source(samples: list) -> Callable[[], list]:
    return lambda: list(samples)


def run(api, op: str, samples: list, layout: str | None = None, arg_inputs: dict | None = None,
        **kwargs) -> list[np.ndarray]:
    """`op` over one batch in `api` (headrace or nvidia.dali)."""
    fn = api.fn

    @api.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None, seed=3)
    def pipe():
        args = {k: fn.external_source(source=_source(v), batch=True) for k, v in (arg_inputs or {}).items()}
        target = fn
        for part in op.split("."):
            target = getattr(target, part)
        data = fn.external_source(source=_source(samples), batch=True, **({"layout": layout} if layout else {}))
        return target(data, **args, **kwargs)

    out = run_once(pipe())
    return [np.array(out.at(i)) for i in range(len(out))]


def numpy_window(image: np.ndarray, size_wh, anchor_xy, border: str, reduce: Callable) -> np.ndarray:
    """reduce() over every window of size (w, h) placed with `anchor` (x, y), borders per `border`."""
    w, h = size_wh
    ax, ay = (w // 2 if anchor_xy[0] < 0 else anchor_xy[0]), (h // 2 if anchor_xy[1] < 0 else anchor_xy[1])
    img = image if image.ndim == 3 else image[..., None]
    widths = [(ay, h - 1 - ay), (ax, w - 1 - ax), (0, 0)]
    if border == "constant":
        padded = np.pad(img.astype(np.float64), widths, mode="constant", constant_values=np.nan)
    else:
        padded = np.pad(img, widths, mode=NUMPY_PADS[border]).astype(np.float64)
    stack = np.stack([padded[i:i + img.shape[0], j:j + img.shape[1]] for i in range(h) for j in range(w)])
    return reduce(stack).astype(image.dtype).reshape(image.shape)


def opencv_morphology(image, op: str, size_wh, anchor_xy=(-1, -1), border="constant", iterations=1):
    element = cv2.getStructuringElement(cv2.MORPH_RECT, tuple(size_wh))
    apply = cv2.dilate if op == "dilate" else cv2.erode
    planes = [image] if image.ndim == 2 else [image[..., c] for c in range(image.shape[2])]
    out = [apply(np.ascontiguousarray(p), element, anchor=tuple(anchor_xy), iterations=iterations,
                 borderType=OPENCV_BORDERS[border]) for p in planes]
    return out[0] if image.ndim == 2 else np.stack(out, axis=-1)


MORPHOLOGY_CASES = [
    dict(),
    dict(mask_size=[5, 3]),
    dict(mask_size=[4, 6], anchor=[0, 5]),
    dict(mask_size=[3, 3], border_mode="replicate"),
    dict(mask_size=[5, 5], anchor=[1, 3], border_mode="reflect"),
    dict(mask_size=[3, 5], border_mode="reflect_101"),
    dict(mask_size=[3, 3], iterations=3),
]


@pytest.mark.parametrize("op", ["dilate", "erode"])
@pytest.mark.parametrize("kwargs", MORPHOLOGY_CASES)
def test_dilate_and_erode_match_opencv(op, kwargs):
    for images in (IMAGES, FLOATS, WIDE):
        got = run(headrace, f"experimental.{op}", images, **kwargs)
        for out, image in zip(got, images, strict=True):
            expected = opencv_morphology(image, op, kwargs.get("mask_size", [3, 3]), kwargs.get("anchor", [-1, -1]),
                                         kwargs.get("border_mode", "constant"), kwargs.get("iterations", 1))
            assert out.dtype == image.dtype
            np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("op, reduce", [("dilate", np.nanmax), ("erode", np.nanmin)])
@pytest.mark.parametrize("kwargs", [dict(mask_size=[3, 5], border_mode="wrap"), dict(mask_size=[2, 4]),
                                    dict(mask_size=[5, 3], anchor=[4, 0], border_mode="reflect")])
def test_dilate_and_erode_match_numpy(op, reduce, kwargs):
    for out, image in zip(run(headrace, f"experimental.{op}", IMAGES, **kwargs), IMAGES, strict=True):
        expected = numpy_window(image, kwargs["mask_size"], kwargs.get("anchor", (-1, -1)),
                                kwargs.get("border_mode", "constant"), lambda s, r=reduce: r(s, axis=0))
        np.testing.assert_array_equal(out, expected)


def test_per_sample_mask_size_from_data_nodes():
    sizes = [np.array([3, 5], np.int32), np.array([7, 1], np.int32)]
    got = run(headrace, "experimental.dilate", IMAGES, arg_inputs={"mask_size": sizes})
    for out, image, size in zip(got, IMAGES, sizes, strict=True):
        np.testing.assert_array_equal(out, opencv_morphology(image, "dilate", size.tolist()))


@pytest.mark.parametrize("window", [3, 5, 7])
def test_median_blur_matches_opencv(window):
    got = run(headrace, "experimental.median_blur", IMAGES, window_size=[window, window])
    for out, image in zip(got, IMAGES, strict=True):
        np.testing.assert_array_equal(out, cv2.medianBlur(image, window))
    for images in (FLOATS, WIDE):
        got = run(headrace, "experimental.median_blur", images, window_size=window)
        for out, image in zip(got, images, strict=True):
            if window <= 5:  # OpenCV's medianBlur takes float32 / uint16 up to 5
                planes = [image] if image.ndim == 2 else [image[..., c] for c in range(image.shape[2])]
                expected = [cv2.medianBlur(np.ascontiguousarray(p), window) for p in planes]
                np.testing.assert_array_equal(out, expected[0] if image.ndim == 2 else np.stack(expected, -1))
            else:
                median = numpy_window(image, (window, window), (-1, -1), "replicate",
                                      lambda s: np.median(s, axis=0))
                np.testing.assert_array_equal(out, median)


def test_non_square_median_matches_numpy():
    for images in (IMAGES, FLOATS):
        got = run(headrace, "experimental.median_blur", images, window_size=[5, 3])
        for out, image in zip(got, images, strict=True):
            np.testing.assert_array_equal(out, numpy_window(image, (5, 3), (-1, -1), "replicate",
                                                            lambda s: np.median(s, axis=0)))


def test_bad_arguments_name_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"median_blur .*sample 0.*'window_size' must be odd and positive"):
        run(headrace, "experimental.median_blur", IMAGES, window_size=[4, 3])
    with pytest.raises(SampleError, match=r"dilate .*sample 0.*'anchor' \[3, 0\] must lie within the mask"):
        run(headrace, "experimental.dilate", IMAGES, anchor=[3, 0])
    with pytest.raises(SampleError, match=r"equalize .*sample 0.*expects uint8 images, got float32"):
        run(headrace, "equalize", FLOATS)


def test_equalize_matches_opencv_and_the_table_the_gpu_uses():
    flat = [np.full((4, 5), 9, np.uint8), (RNG.integers(0, 30, (10, 12)) * 5 + 40).astype(np.uint8)]
    for images in (IMAGES, flat):
        for op in ("equalize", "experimental.equalize"):
            for out, image in zip(run(headrace, op, images), images, strict=True):
                planes = [image] if image.ndim == 2 else [image[..., c] for c in range(image.shape[2])]
                expected = [cv2.equalizeHist(p.copy()) for p in planes]
                expected = expected[0] if image.ndim == 2 else np.stack(expected, axis=-1)
                np.testing.assert_array_equal(out, expected)
                tables = [equalize_lut(np.bincount(p.ravel(), minlength=256))[p] for p in planes]
                np.testing.assert_array_equal(out, tables[0] if image.ndim == 2 else np.stack(tables, axis=-1))


@needs_dali[0]
@needs_dali[1]
def test_equalize_matches_dali():
    import nvidia.dali

    grays = [RNG.integers(0, 256, (9, 13), dtype=np.uint8), np.full((3, 3), 200, np.uint8)]
    for images, layout in ((IMAGES, "HWC"), (grays, "HW")):
        for op in ("equalize", "experimental.equalize"):
            ours, theirs = run(headrace, op, images, layout=layout), run(nvidia.dali, op, images, layout=layout)
            for a, b in zip(ours, theirs, strict=True):
                np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("op, kwargs", [("experimental.dilate", c) for c in MORPHOLOGY_CASES]
                         + [("experimental.erode", c) for c in MORPHOLOGY_CASES]
                         + [("experimental.erode", dict(mask_size=[3, 5], border_mode="wrap")),
                            ("experimental.median_blur", dict()), ("experimental.median_blur", dict(window_size=7)),
                            ("experimental.median_blur", dict(window_size=[5, 3])), ("equalize", dict())])
def test_gpu_matches_cpu(op, kwargs):
    target = headrace.fn
    for part in op.split("."):
        target = getattr(target, part)
    for images in (IMAGES, FLOATS, WIDE) if op != "equalize" else (IMAGES,):
        cpu, gpu = cpu_and_gpu(images, lambda data, device: target(data, device=device, **kwargs))
        for a, b in zip(cpu, gpu, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)




def test_output_specs_agree_with_the_outputs():
    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        images = fn.external_source(name="images", dtype=headrace.types.UINT8, ndim=3, layout="HWC")
        return (fn.experimental.median_blur(images), fn.experimental.dilate(images), fn.experimental.erode(images),
                fn.equalize(images), fn.experimental.equalize(images))

    assert_specs_agree(pipe(), images=IMAGES)
