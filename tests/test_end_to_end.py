"""The ResNet-50 pipelines of the demo run end to end and are deterministic for a seed."""

import numpy as np
from triton_helpers import jpegs

from headrace import Pipeline, fn, pipeline_def, types
from headrace.demo import resnet50_train, resnet50_val
from headrace_kernels.cpu.decode import tiny_jpeg


def test_train_pipeline_shapes_and_labels(image_folder):
    pipe = resnet50_train(data_dir=str(image_folder), batch_size=8)
    images, labels = pipe.run()
    array = images.as_array()
    assert array.shape == (8, 3, 224, 224) and array.dtype == np.float16
    assert labels.as_array().shape == (8, 1) and labels.as_array().dtype == np.int32
    assert set(labels.as_array().ravel()) <= {0, 1, 2}
    # normalized ImageNet-style data stays within (0 - 0.485) / 0.229 .. (1 - 0.406) / 0.225
    assert array.min() >= -2.2 and array.max() <= 2.7
    pipe.close()


def test_validation_pipeline_matches_manual_center_crop(image_folder):
    pipe = resnet50_val(data_dir=str(image_folder), batch_size=4)
    images, labels = pipe.run()
    assert images.as_array().shape == (4, 3, 224, 224)
    pipe.close()


def test_same_seed_same_batches_regardless_of_threads(image_folder):
    one = resnet50_train(data_dir=str(image_folder), batch_size=8, num_threads=1, seed=5)
    three = resnet50_train(data_dir=str(image_folder), batch_size=8, num_threads=3, seed=5)
    for _ in range(6):  # crosses an epoch boundary (37 images)
        a, b = one.run(), three.run()
        np.testing.assert_array_equal(a[0].as_array(), b[0].as_array())
        np.testing.assert_array_equal(a[1].as_array(), b[1].as_array())


def test_serialize_load_gives_bit_identical_batches(image_folder, tmp_path):
    pipe = resnet50_train(data_dir=str(image_folder), batch_size=8, seed=11)
    path = tmp_path / "train.json"
    pipe.serialize(path)
    loaded = Pipeline.load(path)
    original = resnet50_train(data_dir=str(image_folder), batch_size=8, seed=11)
    for _ in range(3):
        a, b = original.run(), loaded.run()
        np.testing.assert_array_equal(a[0].as_array(), b[0].as_array())
        np.testing.assert_array_equal(a[1].as_array(), b[1].as_array())
    assert loaded.serialize() == pipe.serialize()


def test_warm_up_on_the_cpu_builds_and_changes_no_batch(image_folder):
    warm = resnet50_train(data_dir=str(image_folder), batch_size=8, seed=5)
    warm.warm_up()
    assert warm._executor is not None
    cold = resnet50_train(data_dir=str(image_folder), batch_size=8, seed=5)
    np.testing.assert_array_equal(warm.run()[0].as_array(), cold.run()[0].as_array())


@pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=7)
def _served():
    encoded = fn.external_source(name="images", dtype=types.UINT8, ndim=1)
    images = fn.decoders.image_random_crop(encoded, output_type=types.RGB)  # random: depends on the batch index
    return fn.resize(images, resize_x=32, resize_y=32), fn.random.coin_flip(probability=0.5)


def test_warm_up_with_inputs_runs_a_batch_and_forgets_it():
    batch = jpegs(4)
    warm, cold = _served(), _served()
    warm.warm_up(images=[tiny_jpeg()])
    for _ in range(2):  # batches 0 and 1 as if no warm-up had run
        for a, b in zip(warm.run(images=batch), cold.run(images=batch), strict=True):
            np.testing.assert_array_equal(a.as_array(), b.as_array())
