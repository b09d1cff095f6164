"""transforms.* (translation, scale, rotation, shear, crop, combine) against DALI's CPU operators (float32 matrices:
within 1e-5, DALI builds them in float, headrace in float64), against what each transform must do to points
(numpy), and fed to warp_affine as its matrix (against DALI's warp_affine: one level, as tests/test_ops_warp.py).
The GPU kernels build the same matrices on the host: compared with the CPU exactly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import max_abs_diff, needs_dali

import headrace
from headrace.errors import SampleError, SchemaError

TOLERANCE = 1e-5
RNG = np.random.default_rng(18)
IMAGES = [RNG.integers(0, 256, (17, 23, 3), dtype=np.uint8), RNG.integers(0, 256, (12, 9, 3), dtype=np.uint8)]
INPUT_2D = [np.array([[1.0, 0.2, 3.0], [-0.1, 0.9, 4.0]], np.float32), np.array([[2, 0, 1], [0, 3, -1]], np.float32)]
INPUT_3D = [RNG.uniform(-1, 1, (3, 4)).astype(np.float32) for _ in range(2)]


def _source(samples: list) -> Callable[[], list]:
    return lambda: list(samples)


def run(api, build: Callable, *inputs: list, batch_size: int = 2, **arg_inputs: list) -> list[list[np.ndarray]]:
    """build(fn, *input nodes, **argument nodes) in a pipeline of `api` (headrace or nvidia.dali), one iteration;
    per output, its samples."""
    fn = api.fn

    @api.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def pipe():
        nodes = [fn.external_source(source=_source(s), batch=True) for s in inputs]
        args = {k: fn.external_source(source=_source(v), batch=True) for k, v in arg_inputs.items()}
        out = build(fn, *nodes, **args)
        return tuple(out) if isinstance(out, tuple | list) else (out,)

    p = pipe()
    if api is not headrace:
        p.build()
    outs = p.run()
    if api is headrace:
        p.close()
    return [[np.array(o.at(i)) for i in range(len(o))] for o in outs]


def dali():
    import nvidia.dali

    return nvidia.dali


def op(fn, name: str):
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


GENERATORS = [
    ("transforms.translation", dict(offset=[3.0, -4.5])),
    ("transforms.translation", dict(offset=[1.0, 2.0, 3.0])),
    ("transforms.scale", dict(scale=[2.0, 0.5])),
    ("transforms.scale", dict(scale=[2.0, 3.0], center=[10.0, 5.0])),
    ("transforms.scale", dict(scale=[1.5], ndim=3)),
    ("transforms.rotation", dict(angle=30.0)),
    ("transforms.rotation", dict(angle=-75.0, center=[12.0, 8.0])),
    ("transforms.rotation", dict(angle=40.0, axis=[1.0, 2.0, 0.5], center=[1.0, 0.0, -1.0])),
    ("transforms.shear", dict(shear=[0.5, -0.25])),
    ("transforms.shear", dict(angles=[10.0, -20.0], center=[4.0, 3.0])),
    ("transforms.shear", dict(shear=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])),
    ("transforms.crop", dict(from_start=[1.0, 2.0], from_end=[5.0, 10.0], to_start=[0.0, 0.0],
                             to_end=[1.0, 1.0])),
    ("transforms.crop", dict(from_start=[5.0, 2.0], from_end=[1.0, 10.0], to_start=[-1.0], to_end=[1.0],
                             absolute=True)),
    ("transforms.crop", dict()),
]


def homogeneous(matrix: np.ndarray) -> np.ndarray:
    n = matrix.shape[0]
    return np.vstack([matrix.astype(np.float64), np.eye(n + 1)[n:]])


def apply(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The matrix applied to points (one per row)."""
    return points @ matrix[:, :-1].T.astype(np.float64) + matrix[:, -1]


def single(name: str, **kwargs) -> np.ndarray:
    return run(headrace, lambda fn: op(fn, name)(**kwargs), batch_size=1)[0][0]


def test_each_transform_does_what_it_says_to_points():
    points = RNG.uniform(-10, 10, (5, 2))
    assert single("transforms.translation", offset=[3.0, -4.5]).dtype == np.float32
    np.testing.assert_allclose(apply(single("transforms.translation", offset=[3.0, -4.5]), points),
                               points + [3.0, -4.5], atol=TOLERANCE)
    scaled = single("transforms.scale", scale=[2.0, 3.0], center=[10.0, 5.0])
    np.testing.assert_allclose(apply(scaled, points), (points - [10, 5]) * [2, 3] + [10, 5], atol=1e-4)
    turned = single("transforms.rotation", angle=90.0, center=[1.0, 1.0])
    np.testing.assert_allclose(apply(turned, np.array([[2.0, 1.0]])), [[1.0, 2.0]], atol=TOLERANCE)  # x to y
    sheared = single("transforms.shear", angles=[45.0, 0.0])
    np.testing.assert_allclose(apply(sheared, np.array([[0.0, 2.0]])), [[2.0, 2.0]], atol=TOLERANCE)
    crop = single("transforms.crop", from_start=[1.0, 2.0], from_end=[5.0, 10.0], to_start=[-1.0, 0.0],
                  to_end=[1.0, 4.0])
    np.testing.assert_allclose(apply(crop, np.array([[1.0, 2.0], [5.0, 10.0]])), [[-1, 0], [1, 4]], atol=TOLERANCE)
    axis = np.array([1.0, 2.0, 0.5])
    spun = single("transforms.rotation", angle=40.0, axis=axis.tolist())
    np.testing.assert_allclose(apply(spun, axis[None]), axis[None], atol=TOLERANCE)  # the axis stays
    np.testing.assert_allclose(np.linalg.det(spun[:, :3]), 1.0, atol=TOLERANCE)


def test_chaining_and_combine_follow_matrix_products():
    shift = single("transforms.translation", offset=[3.0, 4.0])
    scale = single("transforms.scale", scale=[2.0, 0.5])
    after = run(headrace, lambda fn: fn.transforms.scale(fn.transforms.translation(offset=[3.0, 4.0]),
                                                         scale=[2.0, 0.5]), batch_size=1)[0][0]
    np.testing.assert_allclose(homogeneous(after), homogeneous(scale) @ homogeneous(shift), atol=TOLERANCE)
    combined = run(headrace, lambda fn, a, b: fn.transforms.combine(a, b, fn.transforms.rotation(angle=10.0),
                                                                     reverse_order=True), INPUT_2D, INPUT_2D[::-1])
    rotation = single("transforms.rotation", angle=10.0)
    for got, a, b in zip(combined[0], INPUT_2D, INPUT_2D[::-1], strict=True):
        expected = homogeneous(a) @ homogeneous(b) @ homogeneous(rotation)
        np.testing.assert_allclose(homogeneous(got), expected, atol=TOLERANCE)


def test_bad_arguments_name_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"transforms.translation .*sample 0.*'offset' needs 1 or 2 values"):
        run(headrace, lambda fn, m: fn.transforms.translation(m, offset=[1.0, 2.0, 3.0]), INPUT_2D)
    with pytest.raises(SampleError, match=r"transforms.shear .*sample 0.*'angles' must lie in \(-90, 90\)"):
        single("transforms.shear", angles=[90.0, 0.0])
    with pytest.raises(SampleError, match=r"transforms.rotation .*sample 0.*'axis' must have a non-zero length"):
        single("transforms.rotation", angle=5.0, axis=[0.0, 0.0, 0.0])
    with pytest.raises(SampleError, match=r"transforms.combine .*sample 1.*shape \(ndim, ndim \+ 1\)"):
        run(headrace, lambda fn, a, b: fn.transforms.combine(a, b), INPUT_2D, [INPUT_2D[0], np.eye(3)])
    with pytest.raises(SchemaError, match="give `shear` or `angles`, not both"):
        single("transforms.shear", shear=[1.0, 0.0], angles=[1.0, 0.0])


@pytest.mark.parametrize("name, kwargs", GENERATORS)
@needs_dali[0]
@needs_dali[1]
def test_generators_match_dali(name, kwargs):
    def build(fn):
        return op(fn, name)(**kwargs)

    ours, theirs = run(headrace, build)[0], run(dali(), build)[0]
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype == np.float32 and max_abs_diff(a, b) <= TOLERANCE


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("center", [None, [10.0, 20.0], [31.5, -7.25]])
def test_2d_rotation_is_dalis_float32_matrix_exactly(center):
    """DALI builds a 2D rotation in float32 (cosf / sinf of float32 radians): the same bits, so that a nearest warp
    by it picks DALI's pixels (90 degrees gives cos = -4.37e-08, not 0)."""
    angles = [0.0, 30.0, 45.0, 90.0, 135.0, 180.0, -77.3, 12.5, 270.0, 359.9, 1e-3]

    def build(fn):
        return tuple(fn.transforms.rotation(angle=a, **({} if center is None else {"center": center}))
                     for a in angles)

    for ours, theirs in zip(run(headrace, build, batch_size=1), run(dali(), build, batch_size=1), strict=True):
        np.testing.assert_array_equal(ours[0], theirs[0])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name, kwargs", [g for g in GENERATORS if g[0] != "transforms.crop" or g[1]])
@needs_dali[0]
@needs_dali[1]
def test_chained_onto_an_input_matrix_match_dali(name, kwargs, reverse):
    kwargs = {k: v for k, v in kwargs.items() if k != "ndim"}
    three_d = any(len(v) in (3, 6) for v in kwargs.values() if isinstance(v, list)) or "ndim" in kwargs
    if "scale" in kwargs and len(kwargs["scale"]) == 1:
        three_d = True  # broadcast to the input's dimensions

    def build(fn, matrix):
        return op(fn, name)(matrix, reverse_order=reverse, **kwargs)

    inputs = INPUT_3D if three_d else INPUT_2D
    for a, b in zip(run(headrace, build, inputs)[0], run(dali(), build, inputs)[0], strict=True):
        assert max_abs_diff(a, b) <= TOLERANCE


@needs_dali[0]
@needs_dali[1]
def test_combine_and_per_sample_arguments_match_dali():
    angles = [np.array(15.0, np.float32), np.array(-130.0, np.float32)]
    offsets = [np.array([1.0, 2.0], np.float32), np.array([-3.0, 0.5], np.float32)]

    def build(fn, a, b, angle, offset):
        turned = fn.transforms.rotation(angle=angle, center=[3.0, 4.0])
        return (fn.transforms.combine(a, b, turned), fn.transforms.combine(a, turned, b, reverse_order=True),
                fn.transforms.translation(turned, offset=offset))

    inputs = (INPUT_2D, INPUT_2D[::-1], angles, offsets)
    for ours, theirs in zip(run(headrace, build, *inputs), run(dali(), build, *inputs), strict=True):
        for a, b in zip(ours, theirs, strict=True):
            assert a.shape == b.shape and max_abs_diff(a, b) <= TOLERANCE


@needs_dali[0]
@needs_dali[1]
def test_coord_transform_takes_their_matrices_as_dali_does():
    points = [RNG.uniform(-10, 10, (5, 2)).astype(np.float32), RNG.uniform(-10, 10, (3, 2)).astype(np.float32)]

    def build(fn, data):
        matrix = fn.transforms.shear(fn.transforms.rotation(angle=35.0, center=[1.0, -2.0]), shear=[0.2, 0.1])
        return fn.coord_transform(data, MT=matrix)

    for a, b in zip(run(headrace, build, points)[0], run(dali(), build, points)[0], strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) <= 1e-4


@pytest.mark.parametrize("inverse_map", [False, True])
@needs_dali[0]
@needs_dali[1]
def test_warp_affine_takes_their_matrices_as_dali_does(inverse_map):
    def build(fn, images):
        matrix = fn.transforms.rotation(fn.transforms.scale(scale=[1.2, 0.9], center=[11.0, 8.0]), angle=25.0,
                                        center=[11.0, 8.0])
        return (fn.warp_affine(images, matrix=matrix, inverse_map=inverse_map, fill_value=0.0),
                fn.warp_affine(images, matrix, inverse_map=inverse_map, fill_value=0.0))

    ours, theirs = run(headrace, build, IMAGES), run(dali(), build, IMAGES)
    for our_output, their_output in zip(ours, theirs, strict=True):
        for a, b in zip(our_output, their_output, strict=True):
            assert a.shape == b.shape and max_abs_diff(a, b) <= 1  # bilinear weights in float32: one level


@pytest.mark.gpu
@pytest.mark.parametrize("name, kwargs", GENERATORS)
def test_gpu_matches_cpu(name, kwargs):
    def graph(data, device):
        return op(headrace.fn, name)(data, device=device, **kwargs)

    cpu, gpu = cpu_and_gpu(INPUT_3D if any(len(v) in (3, 6) for v in kwargs.values() if isinstance(v, list))
                           or "ndim" in kwargs else INPUT_2D, graph)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_gpu_combine_matches_cpu():
    def graph(data, device):
        return headrace.fn.transforms.combine(data, headrace.fn.transforms.rotation(data, angle=20.0, device=device),
                                              device=device)

    cpu, gpu = cpu_and_gpu(INPUT_2D, graph)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a, b)



def test_output_specs_agree_with_the_outputs():
    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        m2 = fn.external_source(name="m2", dtype=headrace.types.FLOAT, ndim=2)
        return (fn.transforms.translation(offset=[1.0, 2.0, 3.0]), fn.transforms.translation(offset=[1.0]),
                fn.transforms.scale(scale=[2.0]), fn.transforms.scale(m2, scale=[2.0]),
                fn.transforms.scale(scale=[2.0], ndim=3), fn.transforms.rotation(angle=3.0),
                fn.transforms.rotation(angle=3.0, axis=[0.0, 0.0, 1.0]), fn.transforms.shear(shear=[1, 2, 3, 4, 5, 6]),
                fn.transforms.crop(), fn.transforms.crop(m2), fn.transforms.combine(m2, m2))

    p = pipe()
    for out, batch in zip(p.outputs, p.run(m2=INPUT_2D), strict=True):
        assert out.spec.dtype == np.float32 and batch.dtype == np.float32
        for i in range(len(batch)):
            shape = np.asarray(batch.at(i)).shape
            assert len(shape) == len(out.spec.dims) and all(d in (-1, s) for d, s in zip(out.spec.dims, shape,
                                                                                          strict=True)), \
                (out.op.schema.name, out.spec, shape)
        assert -1 not in out.spec.dims or out.op.inputs, out.spec  # known from the arguments alone
    p.close()
