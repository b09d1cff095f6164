"""DALI's "Getting started" notebook (docs/examples/getting_started.ipynb): the reader/decoder pipeline, shuffling,
rotation (fixed and random angle), the `with pipe:` and legacy class forms."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect, samples_of

SOURCE = "DALI docs/examples/getting_started.ipynb"
BATCH = 4


@case(SOURCE, iterations=2)
def getting_started_simple(lib: Lib, data: SuiteData) -> Pipe:
    """readers.file + decoders.image: the first pipeline of the notebook."""
    fn = lib.fn

    @lib.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None)
    def simple_pipeline():
        jpegs, labels = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, device="cpu")
        return images, labels

    return simple_pipeline()


def _shuffled_check(outputs) -> None:
    labels = samples_of(outputs, 1)
    images = samples_of(outputs, 0)
    expect(all(lb.dtype == np.int32 and lb.shape == (1,) and 0 <= lb[0] < 3 for lb in labels), "labels in [0, 3)")
    expect(all(im.ndim == 3 and im.shape[2] == 3 for im in images), "HWC RGB images")


@case(SOURCE, random=True, same_shapes=False, check=_shuffled_check, iterations=2)
def getting_started_shuffled(lib: Lib, data: SuiteData) -> Pipe:
    """random_shuffle=True with a small initial_fill: the order is random, the samples are not."""
    fn = lib.fn

    @lib.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=1234)
    def shuffled_pipeline():
        jpegs, labels = fn.readers.file(file_root=data.images, random_shuffle=True, initial_fill=21)
        images = fn.decoders.image(jpegs, device="cpu")
        return images, labels

    return shuffled_pipeline()


@case(SOURCE, atol=1)
def getting_started_rotated(lib: Lib, data: SuiteData) -> Pipe:
    """rotate(angle=10, fill_value=0): the canvas grows to hold the rotated image."""
    fn = lib.fn

    @lib.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=1234)
    def rotated_pipeline():
        jpegs, labels = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, device="cpu")
        rotated_images = fn.rotate(images, angle=10.0, fill_value=0)
        return rotated_images, labels

    return rotated_pipeline()


def _random_rotated_check(outputs) -> None:
    for image in samples_of(outputs, 0):
        expect(image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3, "HWC uint8")
        # At most 10 degrees: the bounding box of a <= 72x74 image grows by at most sin(10°) of the other side.
        expect(image.shape[0] <= 90 and image.shape[1] <= 90, f"rotated canvas too large: {image.shape}")


@case(SOURCE, random=True, same_shapes=False, check=_random_rotated_check)
def getting_started_random_rotated(lib: Lib, data: SuiteData) -> Pipe:
    """The angle as an argument input: fn.random.uniform(range=(-10, 10)) per sample."""
    fn = lib.fn

    @lib.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=1234)
    def random_rotated_pipeline():
        jpegs, labels = fn.readers.file(file_root=data.images, random_shuffle=True, initial_fill=21)
        images = fn.decoders.image(jpegs, device="cpu")
        angle = fn.random.uniform(range=(-10.0, 10.0))
        rotated_images = fn.rotate(images, angle=angle, fill_value=0)
        return rotated_images, labels

    return random_rotated_pipeline()


@case(SOURCE)
def getting_started_with_pipe(lib: Lib, data: SuiteData) -> Pipe:
    """The graph defined inside `with pipe:` and set_outputs, without pipeline_def."""
    fn = lib.fn
    pipe = lib.Pipeline(batch_size=BATCH, num_threads=1, device_id=None)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=data.images)
        images = fn.decoders.image(jpegs, device="cpu")
        pipe.set_outputs(images, labels)
    return pipe


@case("DALI docs/examples/legacy_getting_started.ipynb (ops API)")
def legacy_class_pipeline(lib: Lib, data: SuiteData) -> Pipe:
    """The ops API: a Pipeline subclass whose define_graph calls op instances."""
    ops, types = lib.ops, lib.types

    class SimplePipeline(lib.Pipeline):
        def __init__(self, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id, seed=12)
            self.input = ops.readers.File(file_root=data.images)
            self.decode = ops.decoders.Image(device="cpu", output_type=types.RGB)
            self.flip = ops.Flip(horizontal=1)

        def define_graph(self):
            jpegs, labels = self.input()
            images = self.decode(jpegs)
            return self.flip(images), labels

    return SimplePipeline(BATCH, 1, None)


@case("DALI's readers.file documentation (the file_list argument) and reader tests", iterations=2)
def file_list_reader(lib: Lib, data: SuiteData) -> Pipe:
    """readers.file with a file_list (path label per line) instead of class folders."""
    fn = lib.fn

    @lib.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data.images, file_list=data.file_list)
        return fn.decoders.image(jpegs), labels

    return pipe()
