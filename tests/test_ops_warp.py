"""rotate and warp_affine against DALI's CPU operators (exact: the same float32 matrix, the same row-wise position
accumulation, nearest = the pixel the position falls in, DALI's bilinear blend, rounding half away from zero), against
a float64 numpy resampler written here (within one level: float32 against float64 positions and weights), and the
GPU kernel against the CPU one (exact: the same float32 steps, no FMA)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ops_support import HAS_DALI, max_abs_diff, needs_dali, run_dali, run_headrace

from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(6)
IMAGES = [RNG.integers(0, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
FLOATS = [RNG.uniform(0, 1, (10, 13)).astype(np.float32)]
# the canvases DALI's rotate tests met: a square rotated bounding box (45 / 135 degrees), odd and even extents
DIAGONAL = [RNG.integers(0, 256, (52, 69, 3), dtype=np.uint8), RNG.integers(0, 256, (48, 66, 3), dtype=np.uint8)]
WIDE = [RNG.integers(0, 256, (6, 600, 2), dtype=np.uint8)]  # rows longer than DALI's 256-pixel accumulation tiles


def resample(image: np.ndarray, out_to_in: np.ndarray, out_h: int, out_w: int, fill: float | None,
             nearest: bool = False) -> np.ndarray:
    """Sample `image` at out_to_in @ (x + 0.5, y + 0.5, 1) - 0.5 for every output pixel (bilinear or nearest);
    outside the image: `fill`, or the nearest edge pixel when fill is None."""
    img = image.astype(np.float64)
    if img.ndim == 2:
        img = img[..., None]
    h, w = img.shape[:2]
    ys, xs = np.mgrid[0:out_h, 0:out_w].astype(np.float64)
    sx = out_to_in[0, 0] * (xs + 0.5) + out_to_in[0, 1] * (ys + 0.5) + out_to_in[0, 2] - 0.5
    sy = out_to_in[1, 0] * (xs + 0.5) + out_to_in[1, 1] * (ys + 0.5) + out_to_in[1, 2] - 0.5

    def pixel(yi, xi):
        inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
        values = img[np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]
        return values if fill is None else np.where(inside[..., None], values, fill)

    if nearest:
        out = pixel(np.floor(sy + 0.5).astype(int), np.floor(sx + 0.5).astype(int))
    else:
        x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
        fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
        out = ((1 - fy) * ((1 - fx) * pixel(y0, x0) + fx * pixel(y0, x0 + 1))
               + fy * ((1 - fx) * pixel(y0 + 1, x0) + fx * pixel(y0 + 1, x0 + 1)))
    return out.reshape((out_h, out_w) + image.shape[2:])


def rotation(h: int, w: int, out_h: int, out_w: int, degrees: float) -> np.ndarray:
    a = math.radians(degrees)
    linear = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    shift = np.array([w / 2, h / 2]) - linear @ np.array([out_w / 2, out_h / 2])
    return np.hstack([linear, shift[:, None]])


def to_uint8(values):
    return np.clip(np.floor(values + 0.5), 0, 255).astype(np.uint8)


def test_quarter_turns_are_exact_rotations():
    for k, angle in ((1, 90.0), (2, 180.0), (3, 270.0)):
        for got, image in zip(run_headrace("rotate", IMAGES, angle=angle), IMAGES, strict=True):
            np.testing.assert_array_equal(got, np.rot90(image, k))  # counter-clockwise, as displayed


@pytest.mark.parametrize("kwargs", [dict(angle=30.0), dict(angle=-75.0, fill_value=7.0),
                                    dict(angle=45.0, keep_size=True), dict(angle=10.0, size=[20, 30])])
def test_rotate_matches_numpy_resampler(kwargs):
    for got, image in zip(run_headrace("rotate", IMAGES, **kwargs), IMAGES, strict=True):
        h, w = image.shape[:2]
        out_h, out_w = got.shape[:2]
        if "size" in kwargs:
            assert (out_h, out_w) == (20, 30)
        elif kwargs.get("keep_size"):
            assert (out_h, out_w) == (h, w)
        else:  # holds the whole rotated image, at most one pixel (parity) more
            a = math.radians(kwargs["angle"])
            need_w = w * abs(math.cos(a)) + h * abs(math.sin(a))
            need_h = w * abs(math.sin(a)) + h * abs(math.cos(a))
            assert need_h - 0.01 <= out_h <= need_h + 2 and need_w - 0.01 <= out_w <= need_w + 2
        expected = resample(image, rotation(h, w, out_h, out_w, kwargs["angle"]), out_h, out_w,
                            kwargs.get("fill_value"))
        assert max_abs_diff(got, to_uint8(expected)) <= 1


@pytest.mark.parametrize("degrees", [0.0, 10.0, 44.0, 45.0, 46.0, 90.0, 135.0, 170.0, -45.0])
def test_canvas_keeps_the_parity_of_the_dominant_extent(degrees):
    for image in DIAGONAL + IMAGES:
        (got,) = run_headrace("rotate", [image], angle=degrees)
        h, w = image.shape[:2]
        # DALI decides "mostly from" on the float32 angle, where 45 degrees is a little past 45
        a = float(np.float32(degrees) * np.float32(math.pi / 180))
        past = abs(math.sin(a)) > abs(math.cos(a))
        assert got.shape[0] % 2 == (w if past else h) % 2 and got.shape[1] % 2 == (h if past else w) % 2


def test_per_sample_angle_from_data():
    angles = [np.float32(90.0), np.float32(-90.0)]
    got = run_headrace("rotate", IMAGES, arg_inputs={"angle": angles})
    np.testing.assert_array_equal(got[0], np.rot90(IMAGES[0], 1))
    np.testing.assert_array_equal(got[1], np.rot90(IMAGES[1], -1))


@pytest.mark.parametrize("matrix, kwargs", [
    ([1, 0.2, 3.5, -0.1, 0.9, 1.25], {}),
    ([0.8, 0.2, 3.5, -0.1, 1.1, 1.25], {"inverse_map": False, "fill_value": 9.0, "size": [15, 11]}),
    ([1.3, 0, -2.1, 0, 0.7, 4.2], {"interp_type": types.INTERP_NN, "fill_value": 0.0}),
])
def test_warp_affine_matches_numpy_resampler(matrix, kwargs):
    for images, tolerance in ((IMAGES, 1), (FLOATS, 1e-4)):
        for got, image in zip(run_headrace("warp_affine", images, matrix=matrix, **kwargs), images, strict=True):
            m = np.array(matrix, np.float64).reshape(2, 3)
            if not kwargs.get("inverse_map", True):
                m = np.linalg.inv(np.vstack([m, [0, 0, 1]]))[:2]
            out_h, out_w = kwargs.get("size", image.shape[:2])
            expected = resample(image, m, out_h, out_w, kwargs.get("fill_value"),
                                nearest=kwargs.get("interp_type") == types.INTERP_NN)
            if image.dtype == np.uint8:
                expected = to_uint8(expected)
            assert got.dtype == image.dtype and max_abs_diff(got, expected) <= tolerance


def test_nearest_ties_go_to_the_next_pixel():
    """A source position exactly between two pixels takes the right / lower one (DALI's floor of the centre)."""
    image = np.arange(5 * 6, dtype=np.uint8).reshape(5, 6)
    (got,) = run_headrace("warp_affine", [image], matrix=[1, 0, 0.5, 0, 1, 1.5], interp_type=types.INTERP_NN,
                          fill_value=255.0)
    np.testing.assert_array_equal(got[:3, :5], image[2:5, 1:6])
    assert (got[3:] == 255).all() and (got[:, 5] == 255).all()


def test_warp_affine_identity_and_matrix_as_second_input():
    assert max_abs_diff(run_headrace("warp_affine", IMAGES, matrix=[1, 0, 0, 0, 1, 0])[0], IMAGES[0]) == 0
    shift = [np.array([[1, 0, 2], [0, 1, 1]], np.float32)] * 2
    got = run_headrace("warp_affine", IMAGES, shift, fill_value=0.0)[0]
    np.testing.assert_array_equal(got[:-1, :-2], IMAGES[0][1:, 2:])  # output(x, y) = input(x + 2, y + 1)
    assert not got[-1].any() and not got[:, -2:].any()


def test_size_rounds_half_away_from_zero():
    assert run_headrace("rotate", IMAGES[:1], angle=10.0, size=[20.5, 30.5])[0].shape == (21, 31, 3)
    assert run_headrace("warp_affine", IMAGES[:1], matrix=[1, 0, 0, 0, 1, 0], size=[2.5, 3.49])[0].shape == (3, 3, 3)


def test_bad_arguments_are_errors():
    with pytest.raises(SampleError, match="not invertible"):
        run_headrace("warp_affine", IMAGES, matrix=[1, 2, 0, 2, 4, 0], inverse_map=False)
    with pytest.raises(SampleError, match="rotate.*size"):
        run_headrace("rotate", IMAGES, angle=10.0, size=[0.0, 5.0])


# ---- against DALI's CPU operators: exact ----

ROTATIONS = [
    dict(angle=45.0), dict(angle=135.0), dict(angle=-45.0), dict(angle=30.0), dict(angle=-75.0, fill_value=7.0),
    dict(angle=90.0), dict(angle=45.0, keep_size=True), dict(angle=12.5, size=[20.5, 30.2]),
    dict(angle=45.0, size=[50, 60], interp_type=types.INTERP_NN, fill_value=128.0),
    dict(angle=30.0, interp_type=types.INTERP_NN), dict(angle=-17.3, fill_value=300.0, dtype=types.FLOAT),
    dict(angle=200.0, dtype=types.FLOAT), dict(angle=7.0, fill_value=3.4, interp_type=types.INTERP_NN),
]
AFFINES = [
    dict(matrix=[1.0, 0.0, 5.5, 0.0, 1.0, -3.25], interp_type=types.INTERP_NN),
    dict(matrix=[1.0, 0.0, 0.5, 0.0, 1.0, 0.0], interp_type=types.INTERP_NN),
    dict(matrix=[1.0, 0.0, 0.5, 0.0, 1.0, 0.5], interp_type=types.INTERP_NN, inverse_map=False, fill_value=9.6),
    dict(matrix=[0.9, 0.2, 3.0, -0.1, 1.1, -2.0], size=[30, 40], fill_value=255.0),
    dict(matrix=[0.8, 0.2, 3.5, -0.1, 1.1, 1.25], inverse_map=False, fill_value=9.0, size=[15, 11]),
    dict(matrix=[0.5, 0.0, 0.0, 0.0, 0.5, 0.0], size=[100, 120], inverse_map=False),
    dict(matrix=[0.7, -0.7, 10.0, 0.7, 0.7, -5.0], inverse_map=False, interp_type=types.INTERP_NN),
]


def _assert_same(ours: list[np.ndarray], theirs: list[np.ndarray], what) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
        assert max_abs_diff(a, b) == 0, what


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", ROTATIONS, ids=range(len(ROTATIONS)))
def test_rotate_matches_dali(kwargs):
    for images in (IMAGES, DIAGONAL, WIDE, [image.astype(np.float32) for image in IMAGES],
                   [image.astype(np.int16) * 7 - 300 for image in IMAGES]):
        _assert_same(run_headrace("rotate", images, layout="HWC", **kwargs),
                     run_dali("rotate", images, layout="HWC", **kwargs), kwargs)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("kwargs", AFFINES, ids=range(len(AFFINES)))
def test_warp_affine_matches_dali(kwargs):
    for images in (IMAGES, DIAGONAL, WIDE):
        _assert_same(run_headrace("warp_affine", images, layout="HWC", **kwargs),
                     run_dali("warp_affine", images, layout="HWC", **kwargs), kwargs)
    matrix = kwargs["matrix"]
    rest = {k: v for k, v in kwargs.items() if k != "matrix"}
    per_sample = [np.array(matrix, np.float32).reshape(2, 3)] * len(IMAGES)
    _assert_same(run_headrace("warp_affine", IMAGES, per_sample, layout="HWC", **rest),
                 run_dali("warp_affine", IMAGES, per_sample, layout="HWC", **rest), ("second input", kwargs))
    _assert_same(run_headrace("warp_affine", IMAGES, layout="HWC", arg_inputs={"matrix": per_sample}, **rest),
                 run_dali("warp_affine", IMAGES, layout="HWC", arg_inputs={"matrix": per_sample}, **rest),
                 ("argument input", kwargs))


@needs_dali[0]
@needs_dali[1]
def test_rotate_canvas_sweep_matches_dali():
    """Angles every 0.5 degrees over a turn and around each multiple of 45, odd and even extents: the canvas (and
    the pixels) as DALI's."""
    rng = np.random.default_rng(2)
    angles = list(np.arange(-180, 180.01, 0.5)) + [45 * k + e for k in range(-4, 5) for e in (1e-4, -1e-4, 0.01)]
    for start in range(0, len(angles), 128):
        chunk = [np.float32(a) for a in angles[start:start + 128]]
        images = [rng.integers(0, 256, (int(rng.integers(1, 40)), int(rng.integers(1, 40)), 1), dtype=np.uint8)
                  for _ in chunk]
        _assert_same(run_headrace("rotate", images, layout="HWC", arg_inputs={"angle": chunk}),
                     run_dali("rotate", images, layout="HWC", arg_inputs={"angle": chunk}), "sweep")


def _transformed(api, images, inverse_map: bool):
    """transforms.translation / scale matrices (exact in float32) fed to nearest-neighbour warp_affine, which then
    meets exact ties."""
    fn = api.fn

    @api.pipeline_def(batch_size=len(images), num_threads=1, device_id=None, seed=3)
    def pipe():
        x = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        moved = fn.transforms.translation(offset=[0.5, 5.5])
        scaled = fn.transforms.scale(scale=[2.0, 0.5], center=[0.25, 3.0])
        return tuple(fn.warp_affine(x, m, inverse_map=inverse_map, interp_type=api.types.INTERP_NN, fill_value=0)
                     for m in (moved, scaled, fn.transforms.combine(moved, scaled)))

    p = pipe()
    if hasattr(p, "build"):
        p.build()
    outs = [[np.array(o.at(i)) for i in range(len(images))] for o in p.run()]
    if hasattr(p, "close"):
        p.close()
    return outs


@pytest.mark.skipif(not HAS_DALI, reason="nvidia-dali is not installed")
@pytest.mark.dali
@pytest.mark.parametrize("inverse_map", [True, False])
def test_transforms_then_nearest_warp_matches_dali(inverse_map):
    from nvidia import dali

    import headrace

    for ours, theirs in zip(_transformed(headrace, IMAGES, inverse_map), _transformed(dali, IMAGES, inverse_map),
                            strict=True):
        _assert_same(ours, theirs, inverse_map)


# ---- the GPU kernel ----

def test_gpu_records_carry_the_cpu_matrices_and_borders():
    from headrace_kernels.cpu.warp_ops import rotation_geometry
    from headrace_kernels.gpu.warp_ops import records

    args = dict(angle=30.0, size=None, keep_size=False, interp_type=1, fill_value=300.0, dtype=None)
    rec, shapes = records("rotate", [(17, 23, 3)], [args], np.dtype(np.uint8), np.dtype(np.float32))
    matrix, out_h, out_w = rotation_geometry(17, 23, args)
    assert shapes == [(out_h, out_w, 3)] and (rec["m"][0] == matrix.ravel()).all()
    assert rec["fill"][0] == 255.0  # linear: fill in the output type (float), then the input's (uint8)
    rec, _ = records("rotate", [(17, 23)], [{**args, "interp_type": 0}], np.dtype(np.uint8), np.dtype(np.float32))
    assert rec["fill"][0] == 300.0 and rec["channels"][0] == 1  # nearest: fill in the output type


GPU_SHAPES = [(1, 1, 3), (33, 517, 3), (17, 5, 3), (64, 64, 3), (40, 300, 3)]


@pytest.mark.gpu
@pytest.mark.parametrize("interp", [types.INTERP_NN, types.INTERP_LINEAR, types.INTERP_CUBIC],
                         ids=["nn", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["u8", "f32"])
def test_gpu_equals_cpu(interp, dtype):
    from gpu_helpers import cpu_and_gpu, max_level_difference

    from headrace import fn

    rng = np.random.default_rng(0)
    batch = [rng.integers(0, 256, shape).astype(dtype) for shape in GPU_SHAPES]
    gray = [image[..., 0].copy() for image in batch]
    cases = [lambda d, dev: fn.rotate(d, angle=45.0, interp_type=interp),
             lambda d, dev: fn.rotate(d, angle=-17.3, fill_value=7.6, interp_type=interp),
             lambda d, dev: fn.rotate(d, angle=30.0, size=[50, 41], fill_value=300.0, dtype=types.FLOAT,
                                      interp_type=interp),
             lambda d, dev: fn.warp_affine(d, matrix=[1.0, 0.0, 5.5, 0.0, 1.0, -3.25], interp_type=interp),
             lambda d, dev: fn.warp_affine(d, matrix=[0.9, 0.2, 3.5, -0.15, 1.1, -2.25], inverse_map=False,
                                           fill_value=255.0, size=[20, 370], dtype=types.UINT8, interp_type=interp)]
    for graph in cases:
        for data in (batch, gray):
            cpu, gpu_out = cpu_and_gpu(data, graph)
            assert max_level_difference(cpu, gpu_out) == 0
