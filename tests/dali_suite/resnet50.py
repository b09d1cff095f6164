"""DALI's ResNet-50 PyTorch example (docs/examples/use_cases/pytorch/resnet50/main.py, `create_dali_pipeline`),
with dali_cpu=True: the training branch (random crop decode, resize, random mirror) and the validation branch
(shorter side to `size`, centre crop, normalize to CHW float)."""

from __future__ import annotations

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case, expect, samples_of

SOURCE = "DALI docs/examples/use_cases/pytorch/resnet50/main.py"
CROP, SIZE = 32, 36
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def create_dali_pipeline(lib: Lib, data: SuiteData, is_training: bool) -> Pipe:
    """The example's pipeline function as it is written there (decoder_device 'cpu', dali_device 'cpu')."""
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=12)
    def pipe():
        images, labels = fn.readers.file(file_root=data.images, shard_id=0, num_shards=1,
                                         random_shuffle=is_training, pad_last_batch=True, name="Reader")
        decoder_device, dali_device = "cpu", "cpu"
        if is_training:
            images = fn.decoders.image_random_crop(images, device=decoder_device, output_type=types.RGB,
                                                   device_memory_padding=211025920,
                                                   host_memory_padding=140544512,
                                                   random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                                   num_attempts=100)
            images = fn.resize(images, device=dali_device, resize_x=CROP, resize_y=CROP,
                               interp_type=types.INTERP_TRIANGULAR)
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.decoders.image(images, device=decoder_device, output_type=types.RGB)
            images = fn.resize(images, device=dali_device, size=SIZE, mode="not_smaller",
                               interp_type=types.INTERP_TRIANGULAR)
            mirror = False
        images = fn.crop_mirror_normalize(images.gpu() if dali_device == "gpu" else images, dtype=types.FLOAT,
                                          output_layout="CHW", crop=(CROP, CROP), mean=MEAN, std=STD,
                                          mirror=mirror)
        labels = labels.gpu() if dali_device == "gpu" else labels
        return images, labels

    return pipe()


def _train_check(outputs) -> None:
    images = samples_of(outputs, 0)
    expect(all(im.shape == (3, CROP, CROP) and im.dtype == np.float32 for im in images), "3xCROPxCROP float32")
    values = np.stack(images)
    # Normalized pixels of 0..255 lie in [-mean/std, (255-mean)/std]: about [-2.2, 2.7].
    expect(values.min() >= -2.2 and values.max() <= 2.7, "normalized range")
    expect(abs(float(values.mean())) < 1.5, "mean of normalized images near 0")
    expect(all(lb.dtype == np.int32 and 0 <= lb[0] < 3 for lb in samples_of(outputs, 1)), "labels")


@case(SOURCE, random=True, check=_train_check, iterations=2)
def resnet50_train(lib: Lib, data: SuiteData) -> Pipe:
    return create_dali_pipeline(lib, data, is_training=True)


# Resized uint8 pixels within 1 of DALI's, normalized by std >= 0.224*255: 1/57.1.
@case(SOURCE, atol=(1 / 57.1 + 1e-5, 0), iterations=2)
def resnet50_val(lib: Lib, data: SuiteData) -> Pipe:
    return create_dali_pipeline(lib, data, is_training=False)
