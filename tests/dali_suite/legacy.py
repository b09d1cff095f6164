"""DALI's older examples written with the ops API (Pipeline subclasses with define_graph / iter_setup, as in the
ResNet-50 example of DALI 0.x-1.x and the legacy external_input notebook), and pipeline serialization
(docs/pipeline.rst: Pipeline.serialize / Pipeline.deserialize)."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect, samples_of
from dali_suite.resnet50 import CROP, MEAN, SIZE, STD

RESNET_OPS = "DALI docs/examples/use_cases/pytorch/resnet50/main.py (ops API version, DALI 0.x-1.x)"


@case(RESNET_OPS + " HybridValPipe", atol=(1 / 57.1 + 1e-5, 0), iterations=2)
def legacy_resnet50_val(lib: Lib, data: SuiteData) -> Pipe:
    ops, types = lib.ops, lib.types

    class HybridValPipe(lib.Pipeline):
        def __init__(self, batch_size, num_threads, device_id, data_dir, crop, size):
            super().__init__(batch_size, num_threads, device_id, seed=12 + (device_id or 0))
            self.input = ops.readers.File(file_root=data_dir, shard_id=0, num_shards=1, random_shuffle=False,
                                          pad_last_batch=True)
            self.decode = ops.decoders.Image(device="cpu", output_type=types.RGB)
            self.res = ops.Resize(device="cpu", resize_shorter=size, interp_type=types.INTERP_TRIANGULAR)
            self.cmnp = ops.CropMirrorNormalize(device="cpu", dtype=types.FLOAT, output_layout=types.NCHW,
                                                crop=(crop, crop), mean=MEAN, std=STD)

        def define_graph(self):
            self.jpegs, self.labels = self.input(name="Reader")
            images = self.decode(self.jpegs)
            images = self.res(images)
            return [self.cmnp(images), self.labels]

    return HybridValPipe(4, 2, None, data.images, CROP, SIZE)


def _legacy_train_check(outputs) -> None:
    for image in samples_of(outputs, 0):
        expect(image.shape == (3, CROP, CROP) and image.dtype == np.float32, "CHW crop")


@case(RESNET_OPS + " HybridTrainPipe", random=True, check=_legacy_train_check)
def legacy_resnet50_train(lib: Lib, data: SuiteData) -> Pipe:
    ops, types = lib.ops, lib.types

    class HybridTrainPipe(lib.Pipeline):
        def __init__(self, batch_size, num_threads, device_id, data_dir, crop):
            super().__init__(batch_size, num_threads, device_id, seed=12)
            self.input = ops.readers.File(file_root=data_dir, random_shuffle=True)
            self.decode = ops.decoders.ImageRandomCrop(device="cpu", output_type=types.RGB,
                                                       random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                                       num_attempts=100)
            self.res = ops.Resize(device="cpu", resize_x=crop, resize_y=crop, interp_type=types.INTERP_TRIANGULAR)
            self.cmnp = ops.CropMirrorNormalize(device="cpu", dtype=types.FLOAT, output_layout=types.NCHW,
                                                crop=(crop, crop), mean=MEAN, std=STD)
            self.coin = ops.random.CoinFlip(probability=0.5)

        def define_graph(self):
            rng = self.coin()
            self.jpegs, self.labels = self.input(name="Reader")
            images = self.res(self.decode(self.jpegs))
            return [self.cmnp(images, mirror=rng), self.labels]

    return HybridTrainPipe(4, 2, None, data.images, CROP)


@case("DALI docs/examples/general/data_loading/external_input_legacy (ExternalSource op, iter_setup, feed_input)",
      iterations=2)
def legacy_feed_input(lib: Lib, data: SuiteData) -> Pipe:
    ops, types = lib.ops, lib.types
    jpegs = data.jpegs

    class ExternalSourcePipeline(lib.Pipeline):
        def __init__(self, batch_size, num_threads, device_id):
            super().__init__(batch_size, num_threads, device_id, seed=12, exec_async=False, exec_pipelined=False)
            self.input = ops.ExternalSource()
            self.input_label = ops.ExternalSource()
            self.decode = ops.decoders.Image(device="cpu", output_type=types.RGB)
            self.cast = ops.Cast(device="cpu", dtype=types.INT32)
            self.calls = 0

        def define_graph(self):
            self.jpegs = self.input()
            self.labels = self.input_label()
            return self.decode(self.jpegs), self.cast(self.labels)

        def iter_setup(self):
            k = self.calls
            self.calls += 1
            batch = [jpegs[(k + i) % len(jpegs)] for i in range(self.max_batch_size)]
            labels = [np.array([k * 10 + i], np.uint8) for i in range(self.max_batch_size)]
            self.feed_input(self.jpegs, batch)
            self.feed_input(self.labels, labels)

    return ExternalSourcePipeline(3, 1, None)


@case("DALI docs/pipeline.rst (Pipeline.serialize, Pipeline.deserialize)", atol=1,
      iterations=2)
def serialize_deserialize(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data.images)
        images = fn.resize(fn.decoders.image(jpegs, output_type=types.RGB), resize_shorter=20)
        return fn.crop(images, crop=(16, 16)), labels

    serialized = pipe().serialize()
    return lib.Pipeline.deserialize(serialized_pipeline=serialized, batch_size=4, num_threads=1, device_id=None)
