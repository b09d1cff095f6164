"""DALI's decoder examples (docs/examples/image_processing/decoder_examples.ipynb and the ROI decoders of
docs/examples/general/data_loading), fed by readers.file or by external_source with encoded bytes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, batch_source, case, expect, samples_of

SOURCE = "DALI docs/examples/image_processing/decoder_examples.ipynb"


def _decode_pipeline(lib: Lib, data: SuiteData, body: Callable, seed: int = 5) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=seed)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data.images)
        return body(fn, types, jpegs)

    return pipe()


@case(SOURCE)
def decoder_output_types(lib: Lib, data: SuiteData) -> Pipe:
    return _decode_pipeline(lib, data, lambda fn, types, jpegs: (
        fn.decoders.image(jpegs, output_type=types.RGB), fn.decoders.image(jpegs, output_type=types.BGR),
        fn.decoders.image(jpegs, output_type=types.GRAY)))


# YCbCr: the BT.601 conversion of the RGB decode, within 1 (rounding).
@case(SOURCE + " (YCbCr)", atol=1)
def decoder_ycbcr(lib: Lib, data: SuiteData) -> Pipe:
    return _decode_pipeline(lib, data, lambda fn, types, jpegs: fn.decoders.image(jpegs, output_type=types.YCbCr))


@case(SOURCE + " (decoders.image_crop)")
def decoder_image_crop(lib: Lib, data: SuiteData) -> Pipe:
    return _decode_pipeline(lib, data, lambda fn, types, jpegs: (
        fn.decoders.image_crop(jpegs, crop=(24, 24), crop_pos_x=0.3, crop_pos_y=0.6),
        fn.decoders.image_crop(jpegs, crop_w=30, crop_h=20, output_type=types.GRAY)))


@case(SOURCE + " (decoders.image_slice)")
def decoder_image_slice(lib: Lib, data: SuiteData) -> Pipe:
    return _decode_pipeline(lib, data, lambda fn, types, jpegs: (
        fn.decoders.image_slice(jpegs, rel_start=[0.1, 0.2], rel_end=[0.8, 0.9]),
        fn.decoders.image_slice(jpegs, start=[4, 6], shape=[20, 30], axis_names="HW")))


@case(SOURCE + " (decoders.image_slice with anchor and shape inputs)")
def decoder_image_slice_inputs(lib: Lib, data: SuiteData) -> Pipe:
    anchors = [np.array([0.1, 0.2], np.float32), np.array([0.0, 0.5], np.float32)] * 2
    shapes = [np.array([0.5, 0.5], np.float32), np.array([0.9, 0.4], np.float32)] * 2

    def body(fn, types, jpegs):
        anchor = fn.external_source(source=batch_source(anchors), batch=True)
        shape = fn.external_source(source=batch_source(shapes), batch=True)
        return fn.decoders.image_slice(jpegs, anchor, shape, normalized_anchor=True, normalized_shape=True,
                                       axes=[1, 0])

    return _decode_pipeline(lib, data, body)


@case("DALI dali/test/python/operator_1/test_peek_image_shape.py")
def peek_image_shape_example(lib: Lib, data: SuiteData) -> Pipe:
    return _decode_pipeline(lib, data, lambda fn, types, jpegs: (
        fn.peek_image_shape(jpegs), fn.peek_image_shape(jpegs, dtype=types.INT32),
        fn.shapes(fn.decoders.image(jpegs))))


def _random_crop_check(outputs) -> None:
    for crop, full in zip(samples_of(outputs, 0), samples_of(outputs, 1), strict=True):
        expect(crop.ndim == 3 and crop.shape[2] == 3, "HWC")
        area = crop.shape[0] * crop.shape[1] / (full.shape[0] * full.shape[1])
        expect(0.3 - 0.02 <= area <= 1.0, f"crop area {area} in random_area [0.3, 1]")
        ratio = (crop.shape[1] / crop.shape[0]) / 1.0
        expect(0.5 <= ratio <= 2.0, f"aspect ratio {ratio} near [0.75, 1.33]")


@case(SOURCE + " (decoders.image_random_crop)", random=True, same_shapes=False, check=_random_crop_check,
      iterations=2)
def decoder_image_random_crop(lib: Lib, data: SuiteData) -> Pipe:
    return _decode_pipeline(lib, data, lambda fn, types, jpegs: (
        fn.decoders.image_random_crop(jpegs, random_area=[0.3, 1.0], random_aspect_ratio=[0.75, 1.33],
                                      num_attempts=50), fn.decoders.image(jpegs)))


@case("DALI docs/examples/general/data_loading/external_input.ipynb (encoded bytes fed to the decoder)")
def external_jpegs_decode(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=len(data.jpegs), num_threads=1, device_id=None)
    def pipe():
        jpegs = fn.external_source(source=batch_source(data.jpegs), dtype=types.UINT8)
        return fn.decoders.image(jpegs, device="cpu")

    return pipe()


def _encoded(ext: str) -> list[np.ndarray]:
    import cv2

    rng = np.random.default_rng(40)
    out = []
    for i in range(3):
        image = rng.integers(0, 256, (20 + 4 * i, 30 - 2 * i, 3), dtype=np.uint8)
        ok, buf = cv2.imencode(ext, image)
        assert ok
        out.append(buf.ravel())
    return out


@case(SOURCE + " (PNG, BMP and lossless WebP through the same decoder)")
def decoder_other_formats(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types
    sources = [_encoded(ext) for ext in (".png", ".bmp", ".webp")]

    @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        return tuple(fn.decoders.image(fn.external_source(source=batch_source(s), batch=True), output_type=types.RGB)
                     for s in sources)

    return pipe()
