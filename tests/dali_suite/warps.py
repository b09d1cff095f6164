"""DALI's rotation and warp examples (the augmentation gallery's rotate and warp_affine, docs/examples/image_processing/
warp_perspective.ipynb, and the rotate / warp operator tests): canvases, interpolation and output types."""

from __future__ import annotations

from dali_suite import Lib, Pipe, SuiteData, case
from dali_suite.images import GALLERY, image_pipeline


@case(GALLERY, atol=1)
def gallery_rotate_keep_size(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.rotate(images, angle=30, keep_size=True,
                                                                         fill_value=0))


@case(GALLERY, atol=1)
def gallery_warp_affine(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.warp_affine(
        images, matrix=[1.0, 0.8, -16.0, 0.0, 1.2, -20.0], fill_value=0, inverse_map=False))


@case("DALI docs/examples/image_processing/warp_perspective.ipynb")
def warp_perspective_example(lib: Lib, data: SuiteData) -> Pipe:
    matrix = [0.9, 0.1, 2.0, -0.1, 1.0, 3.0, 0.001, 0.0005, 1.0]
    return image_pipeline(lib, data, lambda fn, types, images: fn.experimental.warp_perspective(
        images, matrix=matrix, size=[40, 50], fill_value=0))


ROTATE = "DALI dali/test/python/operator_2/test_rotate.py"


@case(ROTATE + " (size, interp_type, output dtype)", atol=1)
def rotate_size_interp(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.rotate(images, angle=30.0, size=[50, 60], fill_value=128), fn.rotate(images, angle=30.0,
                                                                                  interp_type=types.INTERP_NN),
        fn.rotate(images, angle=-90.0), fn.rotate(images, angle=12.5, dtype=types.FLOAT, keep_size=True)))


@case(ROTATE + " (45 and 135 degrees, the default canvas)", atol=1)
def rotate_diagonal_canvas(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (fn.rotate(images, angle=45.0),
                                                                fn.rotate(images, angle=135.0)))


@case(ROTATE + " (nearest neighbour at 45 degrees on a given canvas)", atol=1)
def rotate_nearest_diagonal(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.rotate(
        images, angle=45.0, size=[50, 60], interp_type=types.INTERP_NN, fill_value=128))


@case(GALLERY + " (warp_affine: output size, nearest neighbour, inverse map)", atol=1)
def warp_affine_variants(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.warp_affine(images, matrix=[0.9, 0.2, 3.0, -0.1, 1.1, -2.0], size=[30, 40], fill_value=255),
        fn.warp_affine(images, matrix=[1.0, 0.0, 5.3, 0.0, 1.0, -3.7], interp_type=types.INTERP_NN),
        fn.warp_affine(images, matrix=[0.5, 0.0, 0.0, 0.0, 0.5, 0.0], size=[100, 120], inverse_map=False)))


@case(GALLERY + " (warp_affine, nearest neighbour on half-pixel translations)")
def warp_affine_nearest_ties(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.warp_affine(images, matrix=[1.0, 0.0, 5.5, 0.0, 1.0, -3.25], interp_type=types.INTERP_NN),
        fn.warp_affine(images, matrix=[1.0, 0.0, 0.5, 0.0, 1.0, 0.0], interp_type=types.INTERP_NN)))
