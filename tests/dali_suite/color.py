"""DALI's colour examples (docs/examples/image_processing/color_space_conversion.ipynb, hsv_example.ipynb,
brightness_contrast_example.ipynb, the augmentation gallery's colour twist, clahe, debayer, equalize): colour
adjustments and conversions, fixed and with per-sample random parameters."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect, samples_of
from dali_suite.images import COLOR, GALLERY, image_pipeline


@case(COLOR)
def hsv_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.hsv(images, hue=120.0, saturation=1.5,
                                                                      value=0.8))


@case(COLOR, atol=1)
def color_twist_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.color_twist(
        images, brightness=1.2, contrast=1.3, saturation=0.5, hue=60.0))


@case("DALI docs/examples/image_processing/brightness_contrast_example.ipynb")
def brightness_contrast_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.brightness_contrast(images, brightness=1.3, brightness_shift=0.1, contrast=0.7, contrast_center=100),
        fn.brightness(images, brightness=0.5), fn.contrast(images, contrast=1.5)))


@case(COLOR)
def hue_saturation(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (fn.hue(images, hue=90.0),
                                                                fn.saturation(images, saturation=0.3)))


@case(COLOR)
def color_space_conversion_example(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        return (fn.color_space_conversion(images, image_type=types.RGB, output_type=types.GRAY),
                fn.color_space_conversion(images, image_type=types.RGB, output_type=types.YCbCr),
                fn.color_space_conversion(images, image_type=types.RGB, output_type=types.BGR))

    return image_pipeline(lib, data, body)


@case("DALI dali/test/python/operator_2/test_equalize.py")
def equalize_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.equalize(images))


@case("DALI docs/examples/image_processing/clahe_example.ipynb")
def clahe_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.clahe(images, tiles_x=4, tiles_y=4,
                                                                        clip_limit=2.0))


@case("DALI docs/examples/image_processing/debayer.ipynb (bayer pattern of a grayscale image)")
def debayer_example(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        gray = fn.color_space_conversion(images, image_type=types.RGB, output_type=types.GRAY)
        return fn.debayer(fn.squeeze(fn.crop(gray, crop=(40, 60)), axis_names="C"), blue_position=[1, 1])

    return image_pipeline(lib, data, body)


def _random_twist_check(outputs) -> None:
    for twisted, image in zip(samples_of(outputs, 0), samples_of(outputs, 1), strict=True):
        expect(twisted.shape == image.shape and twisted.dtype == np.uint8, "shape and type kept")


@case(GALLERY + " (random colour parameters as argument inputs)", random=True, check=_random_twist_check)
def color_twist_random_args(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        return fn.color_twist(images, brightness=fn.random.uniform(range=[0.5, 1.5]),
                              contrast=fn.random.uniform(range=[0.5, 1.5]), hue=fn.random.uniform(range=[-30, 30]),
                              saturation=fn.random.uniform(range=[0.0, 2.0])), images

    return image_pipeline(lib, data, body)


@case(COLOR + " (the other directions: YCbCr, BGR and GRAY inputs)", atol=1)
def color_space_conversion_inverse(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        ycbcr = fn.color_space_conversion(images, image_type=types.RGB, output_type=types.YCbCr)
        bgr = fn.color_space_conversion(images, image_type=types.RGB, output_type=types.BGR)
        gray = fn.color_space_conversion(images, image_type=types.RGB, output_type=types.GRAY)
        return (fn.color_space_conversion(ycbcr, image_type=types.YCbCr, output_type=types.RGB),
                fn.color_space_conversion(bgr, image_type=types.BGR, output_type=types.GRAY),
                fn.color_space_conversion(gray, image_type=types.GRAY, output_type=types.RGB),
                fn.color_space_conversion(bgr, image_type=types.BGR, output_type=types.YCbCr))

    return image_pipeline(lib, data, body)


@case(COLOR + " (float outputs of hsv and brightness_contrast)", atol=1e-3)
def color_float_outputs(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.hsv(images, hue=20.0, saturation=0.8, value=1.1, dtype=types.FLOAT),
        fn.brightness_contrast(images, brightness=1.5, contrast=0.5, dtype=types.FLOAT),
        fn.contrast(images, contrast=2.0, contrast_center=64, dtype=types.UINT8)))
