"""Per-sample arguments given as DataNodes: scalars, lists and arrays, their checks, and GPU data as an argument."""

from __future__ import annotations

import numpy as np
import pytest

from headrace import fn, pipeline_def, types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(8)
IMAGES = [RNG.integers(0, 256, (20, 30, 3), dtype=np.uint8) for _ in range(4)]


def images():
    return list(IMAGES)


def test_scalar_arguments_per_sample():
    positions = [np.float32(0.0), np.float32(1.0), np.float32(0.5), np.float32(0.25)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=None)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        pos = fn.external_source(source=lambda: positions, batch=True)
        return fn.crop(x, crop=[10, 10], crop_pos_x=pos, crop_pos_y=pos)

    (out,) = pipe().run()
    for i, p in enumerate(positions):
        y, x = int(np.floor(p * 10 + 0.5)), int(np.floor(p * 20 + 0.5))  # half up, as DALI places windows
        np.testing.assert_array_equal(out.at(i), IMAGES[i][y:y + 10, x:x + 10])


def test_list_arguments_built_with_stack():
    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=2)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        h = fn.random.uniform(values=[4, 6, 8])
        w = fn.random.uniform(values=[5, 9])
        return fn.crop(x, crop=fn.stack(h, w), crop_pos_x=0.0, crop_pos_y=0.0), h, w

    out, hs, ws = pipe().run()
    for i in range(4):
        h, w = int(hs.at(i)), int(ws.at(i))
        np.testing.assert_array_equal(out.at(i), IMAGES[i][:h, :w])


def test_array_argument_per_channel():
    @pipeline_def(batch_size=4, num_threads=2, device_id=None)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        mean = fn.reductions.mean(x, axes=(0, 1))
        return fn.erase(x, anchor=[0, 0], shape=[5, 5], fill_value=mean)

    (out,) = pipe().run()
    for i, image in enumerate(IMAGES):
        expected = image.copy()
        expected[:5, :5] = np.clip(np.floor(image.mean(axis=(0, 1)) + 0.5), 0, 255).astype(np.uint8)
        assert np.max(np.abs(out.at(i).astype(int) - expected.astype(int))) <= 1  # float mean to uint8 rounding


def test_constants_as_argument_inputs():
    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        return fn.rotate(x, angle=types.Constant(90.0))

    (out,) = pipe().run()
    np.testing.assert_array_equal(out.at(0), np.rot90(IMAGES[0]))


def test_wrong_type_from_a_data_node_names_sample_op_and_argument():
    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        size = fn.random.uniform(range=[3.2, 3.8])
        return fn.gaussian_blur(x, window_size=size)

    with pytest.raises(SampleError, match=r"gaussian_blur \(node '.*'\) failed on sample 0 .*argument 'window_size' "
                                          r"\(from a DataNode.*expected int"):
        pipe().run()


def test_wrong_length_from_a_data_node_is_an_error():
    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        return fn.crop(x, crop=fn.stack(4.0, 4.0, 4.0))

    with pytest.raises(SampleError, match=r"argument 'crop' .*expected 2 values, got 3"):
        pipe().run()


def test_gpu_data_as_an_argument_names_both_ops():
    @pipeline_def(batch_size=4, num_threads=1, device_id=0)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        ratio = fn.reductions.mean(fn.cast(x > 0, dtype=types.FLOAT), axes=(0, 1, 2))
        size = fn.cast(16 + ratio * 300, dtype=types.INT32).gpu()
        return fn.gaussian_blur(x, window_size=size)

    with pytest.raises(SchemaError, match=r"gaussian_blur \(node '.*'\): argument 'window_size' reads GPU data from "
                                          r"'__copy_\d+' \(copy\).*\.cpu\(\)"):
        pipe()


def test_only_per_sample_arguments_take_data_nodes():
    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        return fn.reductions.mean(x, axes=fn.stack(0, 1))

    with pytest.raises(SchemaError, match=r"reductions.mean .*'axes' is not a per-sample argument"):
        pipe()


def test_several_values_for_a_one_value_argument_is_an_error():
    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=images, batch=True)
        return fn.rotate(x, angle=fn.stack(10.0, 20.0))

    with pytest.raises(SampleError, match=r"rotate .*sample 0.*argument 'angle' \(from a DataNode, shape \(2,\), "
                                          r"float32\): expected one value per sample"):
        pipe().run()
