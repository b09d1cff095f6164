"""DALI's geometric transform examples: docs/examples/math/geometric_transforms.ipynb (fn.transforms.* matrices
fed to warp_affine and coord_transform) and the coordinate ops of the operator tests."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, batch_source, case
from dali_suite.images import image_pipeline

SOURCE = "DALI docs/examples/math/geometric_transforms.ipynb"

@case(SOURCE + " (transforms into warp_affine)", atol=1)
def transforms_warp_affine(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        mt = fn.transforms.rotation(angle=15.0, center=[30.0, 25.0])
        mt = fn.transforms.scale(mt, scale=[1.2, 0.9], center=[30.0, 25.0])
        mt = fn.transforms.translation(mt, offset=[3.0, -2.0])
        return fn.warp_affine(images, matrix=mt, fill_value=0, inverse_map=False)

    return image_pipeline(lib, data, body)


@case(SOURCE + " (transforms.combine, shear, crop)", atol=1e-5)
def transforms_combine(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        rotation = fn.transforms.rotation(angle=30.0)
        shear = fn.transforms.shear(shear=[0.2, 0.1])
        crop = fn.transforms.crop(from_start=[0.0, 0.0], from_end=[1.0, 1.0], to_start=[10.0, 20.0],
                                  to_end=[110.0, 220.0])
        combined = fn.transforms.combine(rotation, shear, crop)
        return rotation, shear, crop, combined

    return pipe()


@case(SOURCE + " (coord_transform of points by a transform)", atol=1e-4)
def coord_transform_points(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types
    points = [np.array([[0, 0], [10, 5], [3, 7]], np.float32), np.array([[1, 1], [2, 2]], np.float32)]

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        pts = fn.external_source(source=batch_source(points), batch=True, dtype=types.FLOAT)
        mt = fn.transforms.rotation(angle=90.0)
        mt = fn.transforms.translation(mt, offset=[5.0, 5.0])
        return (fn.coord_transform(pts, MT=mt), fn.coord_transform(pts, M=[2.0, 0.0, 0.0, 0.5], T=[1.0, -1.0]),
                fn.coord_flip(pts / 10.0, flip_x=1, layout="xy"))

    return pipe()


@case(SOURCE + " (transforms with reverse_order and the scale's center)", atol=1e-5)
def transforms_chain_reverse(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        mt = fn.transforms.scale(scale=[2.0, 3.0], center=[1.0, 1.0])
        mt = fn.transforms.rotation(mt, angle=45.0, reverse_order=True)
        return mt, fn.transforms.translation(offset=[1.0, 2.0, 3.0])

    return pipe()


@case(SOURCE + " (per-sample angles and offsets as argument inputs)", atol=1e-5)
def transforms_argument_inputs(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    angles = [np.array(a, np.float32) for a in (0.0, 30.0, -45.0, 90.0)]
    offsets = [np.array([i, -2.0 * i], np.float32) for i in range(4)]

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        angle = fn.external_source(source=batch_source(angles), batch=True)
        offset = fn.external_source(source=batch_source(offsets), batch=True)
        mt = fn.transforms.rotation(angle=angle, center=[10.0, 5.0])
        return fn.transforms.translation(mt, offset=offset), fn.transforms.scale(scale=offset + 1.0)

    return pipe()


@case("DALI dali/test/python/operator_1/test_coord_flip.py (3-D, centre)", atol=1e-6)
def coord_flip_3d(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types
    rng = np.random.default_rng(50)
    points = [rng.uniform(0, 1, (5 + i, 3)).astype(np.float32) for i in range(3)]

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        pts = fn.external_source(source=batch_source(points), batch=True, dtype=types.FLOAT)
        return (fn.coord_flip(pts, layout="xyz", flip_x=1, flip_z=1, center_x=0.3),
                fn.coord_flip(pts, layout="xyz", flip_x=0, flip_y=1, center_y=0.8))

    return pipe()
