"""filter (and experimental.filter) and laplacian against a float64 numpy correlation written here (float outputs
within 1e-4 relative; uint8 within one level: float32 sums round either way at .5) and DALI's CPU operators
(uint8 within one level, float within 1e-4 relative). The GPU kernels against the CPU ones (same tolerances)."""

from __future__ import annotations

from collections.abc import Callable
from math import comb

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import assert_specs_agree, max_abs_diff, needs_dali, run_once

import headrace
from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(18)
IMAGES = [RNG.integers(0, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
GRAYS = [RNG.uniform(-1, 1, (15, 21)).astype(np.float32), RNG.uniform(0, 1, (8, 6)).astype(np.float32)]
WINDOWS = [RNG.normal(0, 0.3, (3, 4)).astype(np.float32), RNG.normal(0, 0.2, (5, 3)).astype(np.float32)]
NUMPY_MODES = {"reflect_101": "reflect", "reflect_1001": "symmetric", "wrap": "wrap", "clamp": "edge"}


def _source(samples: list) -> Callable[[], list]:
    return lambda: list(samples)


def run(api, op: str, *inputs: list, layout: str | None = None, arg_inputs: dict | None = None,
        **kwargs) -> list[np.ndarray]:
    """`op` over one batch of `inputs` in `api` (headrace or nvidia.dali)."""
    fn = api.fn

    @api.pipeline_def(batch_size=len(inputs[0]), num_threads=1, device_id=None, seed=3)
    def pipe():
        nodes = [fn.external_source(source=_source(s), batch=True, **({"layout": layout} if layout and not i else {}))
                 for i, s in enumerate(inputs)]
        args = {k: fn.external_source(source=_source(v), batch=True) for k, v in (arg_inputs or {}).items()}
        target = fn
        for part in op.split("."):
            target = getattr(target, part)
        return target(*nodes, **args, **kwargs)

    out = run_once(pipe())
    return [np.array(out.at(i)) for i in range(len(out))]


def correlate(image: np.ndarray, window: np.ndarray, border: str = "reflect_101", anchor=(-1, -1),
              mode: str = "same", fill: float = 0.0) -> np.ndarray:
    """float64 out[y, x] = sum window[i, j] * padded[y + i, x + j], the padding given by anchor and border."""
    img = image.astype(np.float64)
    if img.ndim == 2:
        img = img[..., None]
    r, s = window.shape
    if mode == "valid":
        src = img
    else:
        a = [e // 2 if v == -1 else v for v, e in zip(anchor, (r, s), strict=True)]
        widths = [(a[0], r - 1 - a[0]), (a[1], s - 1 - a[1]), (0, 0)]
        src = np.pad(img, widths, mode="constant", constant_values=fill) if border == "constant" else \
            np.pad(img, widths, mode=NUMPY_MODES[border])
    out_h, out_w = src.shape[0] - r + 1, src.shape[1] - s + 1
    out = np.zeros((out_h, out_w, img.shape[2]))
    for i in range(r):
        for j in range(s):
            out += float(window[i, j]) * src[i:i + out_h, j:j + out_w]
    return out.reshape((out_h, out_w) + image.shape[2:])


def to_type(values: np.ndarray, dtype) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.where(values >= 0, np.floor(values + 0.5), np.ceil(values - 0.5)), info.min, info.max).astype(
        dtype)


def close(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(expected).max())))
    else:
        assert max_abs_diff(got, expected) <= 1


FILTER_CASES = [dict(), dict(border="reflect_1001"), dict(border="wrap"), dict(border="clamp"),
                dict(border="constant"), dict(anchor=[0, 2]), dict(anchor=[2, 0], border="wrap"), dict(mode="valid"),
                dict(dtype=types.FLOAT)]


@pytest.mark.parametrize("kwargs", FILTER_CASES)
def test_filter_matches_numpy(kwargs):
    for images in (IMAGES, GRAYS):
        got = run(headrace, "filter", images, WINDOWS, **kwargs)
        for out, image, window in zip(got, images, WINDOWS, strict=True):
            expected = correlate(image, window, kwargs.get("border", "reflect_101"),
                                 tuple(kwargs.get("anchor", (-1, -1))), kwargs.get("mode", "same"))
            close(out, to_type(expected, np.float32 if "dtype" in kwargs else image.dtype))


def test_fill_value_input_pads_the_constant_border_and_the_alias_is_the_same_op():
    fills = [np.array(200, np.uint8), np.array(7, np.uint8)]
    got = run(headrace, "experimental.filter", IMAGES, WINDOWS, fills, border="constant")
    for out, image, window, fill in zip(got, IMAGES, WINDOWS, fills, strict=True):
        close(out, to_type(correlate(image, window, "constant", fill=float(fill)), np.uint8))


def test_per_sample_anchor_from_data_nodes():
    anchors = [np.array([0, 0], np.int32), np.array([4, 2], np.int32)]
    got = run(headrace, "filter", GRAYS, WINDOWS, arg_inputs={"anchor": anchors})
    for out, image, window, anchor in zip(got, GRAYS, WINDOWS, anchors, strict=True):
        close(out, correlate(image, window, anchor=tuple(anchor)).astype(np.float32))


def test_filter_errors_name_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"filter .*sample 0.*'anchor' must lie within the filter's extents"):
        run(headrace, "filter", IMAGES, WINDOWS, anchor=[3, 0])
    with pytest.raises(SampleError, match=r"filter .*sample 0.*must be a non-empty 2D array"):
        run(headrace, "filter", IMAGES, [np.ones(3, np.float32)] * 2)
    with pytest.raises(SampleError, match=r"filter .*sample 1.*'valid': the filter \(5, 3\) is larger"):
        run(headrace, "filter", [IMAGES[0], IMAGES[1][:4]], WINDOWS, mode="valid")
    with pytest.raises(SampleError, match=r"filter .*sample 0.*'dtype' must be the input's type"):
        run(headrace, "filter", IMAGES, WINDOWS, dtype=types.INT16)


def binomial(size: int) -> np.ndarray:
    return np.array([comb(size - 1, k) for k in range(size)], float)


def second_derivative(size: int) -> np.ndarray:
    return np.convolve([1.0, -2.0, 1.0], binomial(size - 2))


def laplacian_reference(image: np.ndarray, windows=(3, 3), smoothing=None, scale=(1.0, 1.0),
                        normalized=False) -> np.ndarray:
    """d2/dy2 + d2/dx2 with windows per DALI's documentation: derivative along the axis, binomial smoothing (size:
    smoothing_size of the other axis, default the derivative's size) along the other; reflect-101 borders."""
    total = 0.0
    for axis in (0, 1):
        smooth = smoothing[1 - axis] if smoothing else windows[axis]
        d, s = second_derivative(windows[axis]), binomial(smooth)
        window = np.outer(d, s) if axis == 0 else np.outer(s, d)
        factor = 2.0 ** (-(windows[axis] + smooth) + 4) if normalized else scale[axis]
        total = total + factor * correlate(image, window)
    return total


LAPLACIAN_CASES = [
    (dict(), {}),
    (dict(window_size=5), dict(windows=(5, 5))),
    (dict(window_size=[3, 7]), dict(windows=(3, 7))),
    (dict(window_size=[5, 3], smoothing_size=1), dict(windows=(5, 3), smoothing=(1, 1))),
    (dict(window_size=5, smoothing_size=[3, 7]), dict(windows=(5, 5), smoothing=(3, 7))),
    (dict(window_size=5, normalized_kernel=True), dict(windows=(5, 5), normalized=True)),
    (dict(scale=[0.5, 2.0]), dict(scale=(0.5, 2.0))),
]


@pytest.mark.parametrize("kwargs, reference", LAPLACIAN_CASES)
def test_laplacian_matches_numpy(kwargs, reference):
    for images, dtype in ((GRAYS, None), (IMAGES, None), (IMAGES, types.FLOAT)):
        extra = {"dtype": dtype} if dtype is not None else {}
        for out, image in zip(run(headrace, "laplacian", images, **kwargs, **extra), images, strict=True):
            close(out, to_type(laplacian_reference(image, **reference), np.float32 if dtype else image.dtype))


def test_laplacian_errors_name_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"laplacian .*sample 0.*'window_size' must be odd and in \[3, 23\], got 4"):
        run(headrace, "laplacian", GRAYS, window_size=4)
    with pytest.raises(SampleError, match=r"laplacian .*sample 0.*'scale' cannot be used with normalized_kernel"):
        run(headrace, "laplacian", GRAYS, scale=[2.0], normalized_kernel=True)


@pytest.mark.parametrize("kwargs", FILTER_CASES)
@needs_dali[0]
@needs_dali[1]
def test_filter_matches_dali(kwargs):
    import nvidia.dali

    for images, layout in ((IMAGES, "HWC"), (GRAYS, "HW")):
        for op in ("filter", "experimental.filter"):
            ours = run(headrace, op, images, WINDOWS, layout=layout, **kwargs)
            theirs = run(nvidia.dali, op, images, WINDOWS, layout=layout, **kwargs)
            for a, b in zip(ours, theirs, strict=True):
                close(a, b)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16])
@needs_dali[0]
@needs_dali[1]
def test_16_bit_images_match_dali(dtype):
    import nvidia.dali

    info = np.iinfo(dtype)
    images = [RNG.integers(info.min, info.max, (9, 10, 2)).astype(dtype) for _ in range(2)]
    for op, inputs in (("filter", (images, WINDOWS)), ("laplacian", (images,))):
        ours, theirs = run(headrace, op, *inputs, layout="HWC"), run(nvidia.dali, op, *inputs, layout="HWC")
        for a, b in zip(ours, theirs, strict=True):
            close(a, b)


@needs_dali[0]
@needs_dali[1]
def test_filter_fill_value_matches_dali():
    import nvidia.dali

    fills = [np.array(200, np.uint8), np.array(7, np.uint8)]
    ours = run(headrace, "filter", IMAGES, WINDOWS, fills, layout="HWC", border="constant")
    theirs = run(nvidia.dali, "filter", IMAGES, WINDOWS, fills, layout="HWC", border="constant")
    for a, b in zip(ours, theirs, strict=True):
        close(a, b)


@pytest.mark.parametrize("kwargs", [c[0] for c in LAPLACIAN_CASES] + [dict(dtype=types.FLOAT)])
@needs_dali[0]
@needs_dali[1]
def test_laplacian_matches_dali(kwargs):
    import nvidia.dali

    for images, layout in ((IMAGES, "HWC"), (GRAYS, "HW")):
        ours = run(headrace, "laplacian", images, layout=layout, **kwargs)
        theirs = run(nvidia.dali, "laplacian", images, layout=layout, **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            close(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", FILTER_CASES)
def test_gpu_filter_matches_cpu(kwargs):
    for images in (IMAGES, GRAYS):
        def graph(data, device, images=images):
            filters = headrace.fn.external_source(source=_source(WINDOWS), batch=True)
            return headrace.fn.filter(data, filters.gpu() if device == "gpu" else filters, device=device, **kwargs)

        cpu, gpu = cpu_and_gpu(images, graph)
        for a, b in zip(cpu, gpu, strict=True):
            close(b, a)


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", [c[0] for c in LAPLACIAN_CASES])
def test_gpu_laplacian_matches_cpu(kwargs):
    for images in (IMAGES, GRAYS):
        cpu, gpu = cpu_and_gpu(images, lambda data, device: headrace.fn.laplacian(data, device=device, **kwargs))
        for a, b in zip(cpu, gpu, strict=True):
            close(b, a)




def test_output_specs_agree_with_the_outputs():
    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        images = fn.external_source(name="images", dtype=types.UINT8, ndim=3, layout="HWC")
        windows = fn.external_source(name="windows", dtype=types.FLOAT, ndim=2)
        return (fn.filter(images, windows), fn.filter(images, windows, mode="valid", dtype=types.FLOAT),
                fn.experimental.filter(images, windows), fn.laplacian(images), fn.laplacian(images, dtype=types.FLOAT))

    assert_specs_agree(pipe(), images=IMAGES, windows=WINDOWS)
