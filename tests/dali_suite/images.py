"""DALI's image processing examples: the augmentation gallery (docs/examples/image_processing/
augmentation_gallery.ipynb), the blur, filter, grid mask, erase, noise, resize and normalize notebooks of
docs/examples/image_processing and docs/examples/general, and the operator tests (dali/test/python/operator_*/) for the
argument forms they exercise. Colour ops are in color.py, rotations and warps in warps.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect, samples_of

GALLERY = "DALI docs/examples/image_processing/augmentation_gallery.ipynb"
COLOR = "DALI docs/examples/image_processing/color_space_conversion.ipynb / hsv_example.ipynb"
OPTEST = "DALI dali/test/python/operator_1/ and operator_2/ tests"


def image_pipeline(lib: Lib, data: SuiteData, body: Callable, batch_size: int = 4, seed: int = 7) -> Pipe:
    """readers.file + decoders.image (RGB), then `body(fn, types, images)`: the frame the gallery's cells share."""
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=seed)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        return body(fn, types, images)

    return pipe()


@case(GALLERY)
def gallery_water(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.water(images))


@case(GALLERY)
def gallery_sphere(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.sphere(images))


@case(GALLERY)
def gallery_paste(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.paste(images, ratio=2.0, fill_value=(55, 155, 155),
                                                                        paste_x=0.25, paste_y=0.25))


@case(GALLERY)
def gallery_flip(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (fn.flip(images, horizontal=1, vertical=1),
                                                                fn.flip(images, vertical=1, horizontal=0)))


@case(GALLERY)
def gallery_crop(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.crop(images, crop=(32, 40), crop_pos_x=0.2,
                                                                       crop_pos_y=0.7))


@case(GALLERY, atol=1)
def gallery_resize(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (fn.resize(images, resize_x=40, resize_y=30),
                                                                fn.resize(images, resize_shorter=24)))


@case(GALLERY, atol=1e-5)
def gallery_crop_mirror_normalize(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.crop_mirror_normalize(
        images, crop=(32, 32), mean=[128.0, 128.0, 128.0], std=[64.0, 64.0, 64.0], mirror=1, dtype=types.FLOAT,
        output_layout="CHW"))


@case(GALLERY + " (pad_output, HWC, FLOAT16)")
def crop_mirror_normalize_padded_fp16(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.crop_mirror_normalize(
        images, crop_h=30, crop_w=30, crop_pos_x=0.0, crop_pos_y=1.0, mean=[120, 110, 100], std=[60, 50, 40],
        pad_output=True, output_layout="HWC", dtype=types.FLOAT16))


@case("DALI docs/examples/image_processing/gaussian_blur.ipynb")
def gaussian_blur_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (fn.gaussian_blur(images, window_size=5, sigma=1.5),
                                                                fn.gaussian_blur(images, sigma=[0.5, 2.0])))


@case("DALI docs/examples/image_processing/laplacian.ipynb", atol=1e-5)
def laplacian_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.laplacian(images, window_size=3), fn.laplacian(images, window_size=5, dtype=types.FLOAT,
                                                          normalized_kernel=True)))


@case("DALI docs/examples/image_processing/filter.ipynb (fn.experimental.filter)")
def filter_example(lib: Lib, data: SuiteData) -> Pipe:
    kernel = np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]], np.float32)

    def body(fn, types, images):
        sharpen = lib.types.Constant(kernel)
        return fn.experimental.filter(images, sharpen, border="reflect_101")

    return image_pipeline(lib, data, body)


@case("DALI docs/examples/image_processing/grid_mask.ipynb")
def grid_mask_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (fn.grid_mask(images, ratio=0.4, tile=16, angle=0.3),
                                                                fn.grid_mask(images, tile=20, shift_x=4, shift_y=8)))


@case("DALI docs/examples/image_processing/erase.ipynb (operator test form)")
def erase_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.erase(
        images, anchor=[8, 10, 30, 5], shape=[12, 20, 6, 6], axis_names="HW", fill_value=0))


@case(OPTEST + " (test_pad.py)")
def pad_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.pad(images, fill_value=7, axis_names="HW", shape=[80, 80]), fn.pad(images, axes=(0,), align=16)))


@case(OPTEST + " (test_lookup_table.py)")
def lookup_table_example(lib: Lib, data: SuiteData) -> Pipe:
    keys = list(range(0, 256, 5))
    values = [float(k) / 255.0 for k in keys]
    return image_pipeline(lib, data, lambda fn, types, images: fn.lookup_table(
        images, keys=keys, values=values, default_value=-1.0, dtype=types.FLOAT))


@case("DALI docs/examples/image_processing/jpeg_compression_distortion.ipynb")
def jpeg_compression_distortion_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.jpeg_compression_distortion(images, quality=30))


@case("DALI docs/examples/general/normalize.ipynb", atol=1e-4)
def normalize_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.normalize(images, axes=[0, 1]), fn.normalize(images, axis_names="HW", scale=64, shift=128, batch=True)))


@case(OPTEST + " (test_resize_crop_mirror.py)", atol=1)
def resize_crop_mirror_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.resize_crop_mirror(
        images, resize_x=40, resize_y=40, crop=(30, 30), mirror=1))


def _rrc_check(outputs) -> None:
    expect(all(s.shape == (32, 32, 3) and s.dtype == np.uint8 for s in samples_of(outputs, 0)), "32x32 crops")


@case("DALI docs/examples/image_processing/resize.ipynb (random_resized_crop, scalar size)", random=True,
      check=_rrc_check)
def random_resized_crop_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: fn.random_resized_crop(images, size=32))


def _noise_check(outputs) -> None:
    for noisy, image in zip(samples_of(outputs, 0), samples_of(outputs, 1), strict=True):
        diff = noisy.astype(np.float64) - image.astype(np.float64)
        expect(abs(diff.mean()) < 2.0 and 7.0 < diff.std() < 11.0, f"gaussian noise stddev 10: {diff.std()}")
    for salted, image in zip(samples_of(outputs, 2), samples_of(outputs, 1), strict=True):
        changed = np.any(salted != image, axis=-1).mean()
        expect(0.05 < changed < 0.16, f"salt and pepper on ~10% of pixels: {changed}")
        expect(set(np.unique(salted[np.any(salted != image, axis=-1)])) <= {0, 255}, "salt 255, pepper 0")


@case("DALI docs/examples/image_processing/noise.ipynb", random=True, check=_noise_check)
def noise_example(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.noise.gaussian(images, stddev=10.0), images, fn.noise.salt_and_pepper(images, prob=0.1),
        fn.noise.shot(images, factor=20.0)))


@case("DALI docs/examples/image_processing/multi_paste.ipynb")
def multi_paste_example(lib: Lib, data: SuiteData) -> Pipe:
    def body(fn, types, images):
        small = fn.resize(images, resize_x=16, resize_y=16, interp_type=types.INTERP_NN)
        return fn.multi_paste(small, in_ids=np.array([0, 1, 2], np.int32),
                              out_anchors=np.array([[0, 0], [16, 16], [8, 24]], np.int32), output_size=[40, 48])

    return image_pipeline(lib, data, body)


RESIZE = "DALI docs/examples/image_processing/resize.ipynb"


@case(RESIZE + " (modes, max_size, resize_longer, antialias, NN)", atol=1)
def resize_modes(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.resize(images, size=[40, 40], mode="not_larger"), fn.resize(images, size=[30, 50], mode="stretch"),
        fn.resize(images, resize_longer=50), fn.resize(images, resize_shorter=40, max_size=50),
        fn.resize(images, resize_x=90, antialias=False), fn.resize(images, size=[20, 25],
                                                                   interp_type=types.INTERP_NN)))


@case(RESIZE + " (region of interest: roi_start / roi_end, relative)", atol=1)
def resize_roi(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.resize(images, size=[24, 24], roi_start=[0.25, 0.1], roi_end=[0.75, 0.9], roi_relative=True),
        fn.resize(images, size=[16, 30], roi_start=[5, 40], roi_end=[30, 10])))


@case("DALI dali/test/python/operator_1/test_crop.py (out_of_bounds_policy, fill_values)")
def crop_out_of_bounds(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.crop(images, crop=(80, 90), out_of_bounds_policy="pad", fill_values=[10, 20, 30]),
        fn.crop(images, crop=(80, 90), crop_pos_x=0.0, crop_pos_y=1.0, out_of_bounds_policy="trim_to_shape"),
        fn.crop(images, crop_h=20, crop_w=24, crop_pos_x=1.0, crop_pos_y=0.0)))


@case(OPTEST + " (test_crop_mirror_normalize.py: scale, shift, per-sample crop position and mirror)", atol=1e-4)
def crop_mirror_normalize_arguments(lib: Lib, data: SuiteData) -> Pipe:
    positions = [np.array(v, np.float32) for v in (0.0, 0.3, 0.7, 1.0)]
    mirrors = [np.array(v, np.int32) for v in (0, 1, 1, 0)]

    def body(fn, types, images):
        pos = fn.external_source(source=lambda: positions, batch=True)
        mirror = fn.external_source(source=lambda: mirrors, batch=True)
        return (fn.crop_mirror_normalize(images, crop=(24, 30), crop_pos_x=pos, crop_pos_y=pos, mirror=mirror,
                                         mean=[100.0], std=[50.0], scale=2.0, shift=1.0, dtype=types.FLOAT),
                fn.crop_mirror_normalize(images, crop=(20, 20), dtype=types.UINT8, mean=0.0, std=1.0,
                                         output_layout="CHW", pad_output=True))

    return image_pipeline(lib, data, body)


@case(OPTEST + " (test_crop_mirror_normalize.py: fill_values with pad_output)")
def crop_mirror_normalize_pad_fill(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.crop_mirror_normalize(images, crop=(20, 20), dtype=types.UINT8, mean=0.0, std=1.0, pad_output=True,
                                 fill_values=[7]),
        fn.crop_mirror_normalize(images, crop=(80, 80), dtype=types.UINT8, mean=0.0, std=1.0, pad_output=True,
                                 fill_values=[7], out_of_bounds_policy="pad")))


@case(GALLERY + " (paste: min_canvas_size, n_channels)")
def paste_canvas(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.paste(images, ratio=1.2, min_canvas_size=100, fill_value=(1, 2, 3), paste_x=0.0, paste_y=1.0),
        fn.paste(images, ratio=1.5, n_channels=3, fill_value=0)))


@case("DALI docs/examples/general/normalize.ipynb (given mean and stddev, ddof, epsilon, output dtype)", atol=1e-4)
def normalize_arguments(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.normalize(images, mean=100.0, stddev=40.0), fn.normalize(images, axes=[0, 1, 2], ddof=1, epsilon=1.0),
        fn.normalize(images, axis_names="C", scale=20, shift=100, dtype=types.UINT8)))


@case("DALI docs/examples/image_processing/jpeg_compression_distortion.ipynb (per-sample quality)")
def jpeg_quality_argument_input(lib: Lib, data: SuiteData) -> Pipe:
    qualities = [np.array(q, np.int32) for q in (5, 30, 60, 95)]

    def body(fn, types, images):
        quality = fn.external_source(source=lambda: qualities, batch=True)
        return fn.jpeg_compression_distortion(images, quality=quality)

    return image_pipeline(lib, data, body)


@case("DALI docs/examples/image_processing/gaussian_blur.ipynb (per-axis window and sigma, float output)", atol=1e-4)
def gaussian_blur_arguments(lib: Lib, data: SuiteData) -> Pipe:
    return image_pipeline(lib, data, lambda fn, types, images: (
        fn.gaussian_blur(images, window_size=[3, 7], sigma=[0.8, 2.5], dtype=types.FLOAT),
        fn.gaussian_blur(images, window_size=9)))
