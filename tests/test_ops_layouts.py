"""Layouts known while building: axis_names follow the data's layout (as in DALI), image ops refuse other layouts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ops_support import needs_dali

from headrace import Pipeline, fn, pipeline_def
from headrace.errors import SchemaError

RNG = np.random.default_rng(10)
IMAGES = [RNG.integers(1, 256, (10, 14, 3), dtype=np.uint8) for _ in range(2)]


def images():
    return list(IMAGES)


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def channel_first():
    hwc = fn.external_source(source=images, batch=True, layout="HWC")
    chw = fn.transpose(hwc, perm=[2, 0, 1])
    erased = fn.erase(chw, anchor=[2, 3], shape=[4, 5])  # axis_names default "HW": axes 1 and 2 of CHW
    means = fn.reductions.mean(chw, axis_names="HW")
    return erased, means


def test_axis_names_follow_a_transposed_layout():
    erased, means = channel_first().run()
    for i, image in enumerate(IMAGES):
        expected = image.transpose(2, 0, 1).copy()
        expected[:, 2:6, 3:8] = 0
        np.testing.assert_array_equal(erased.at(i), expected)
        np.testing.assert_allclose(means.at(i), image.mean(axis=(0, 1)), rtol=1e-6)


def test_the_file_records_the_resolved_axes():
    pipe = channel_first()
    nodes = {n["op"]: n for n in json.loads(pipe.serialize())["nodes"]}
    assert nodes["erase"]["args"]["axes"] == [1, 2]
    assert nodes["reductions.mean"]["args"]["axes"] == [1, 2] and "axis_names" not in nodes["reductions.mean"]["args"]
    loaded = Pipeline.load(pipe.serialize())
    fed = json.loads(pipe.serialize())["nodes"][0]["name"]  # the callable source is not stored: feed the data
    for a, b in zip(pipe.run(), loaded.run(**{fed: images()}), strict=True):
        np.testing.assert_array_equal(a.as_array(), b.as_array())


def test_layouts_pass_through_ops_and_conditionals():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=True)
    def pipe():
        x = fn.external_source(source=images, batch=True, layout="HWC")
        chw = fn.transpose(fn.cast(x, dtype=2), perm=[2, 0, 1])
        if fn.reductions.max(chw) > 100:
            chw = chw * 2
        else:
            chw = chw + 1
        return chw

    built = pipe()
    assert built.outputs[0].layout == "CHW"


def test_image_ops_refuse_other_known_layouts():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        chw = fn.transpose(fn.external_source(source=images, batch=True, layout="HWC"), perm=[2, 0, 1])
        return fn.gaussian_blur(chw, sigma=1.0)

    with pytest.raises(SchemaError, match=r"gaussian_blur \(node '.*'\) needs HW or HWC data, but its input "
                                          r"'.*' has layout CHW"):
        pipe()


@pytest.mark.parametrize("op, kwargs", [("flip", {}), ("resize", {"resize_x": 8, "resize_y": 6}),
                                        ("experimental.resize", {"size": [6, 8]}), ("crop", {"crop": [4, 4]}),
                                        ("crop_mirror_normalize", {}), ("random_resized_crop", {"size": [6, 8]})])
@pytest.mark.parametrize("layout", ["CHW", "FCHW"])
def test_geometry_ops_refuse_planar_images_instead_of_reading_them_as_hwc(op, kwargs, layout):
    # DALI reads CHW and FCHW as planar images; these ops read HWC only: a planar input is an error naming the op and
    # its input, not a flip of the wrong axes or a resize of the channels (as before)
    def call(data):
        f = fn
        for part in op.split("."):
            f = getattr(f, part)
        return f(data, **kwargs)

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros((2, 3, 10, 14), np.uint8)] * 2, batch=True)
        return call(fn.reshape(data, layout=layout) if layout == "FCHW" else
                    fn.transpose(fn.external_source(source=images, batch=True, layout="HWC"), perm=[2, 0, 1]))

    with pytest.raises(SchemaError, match=rf"{op} \(node '.*'\) needs HW or HWC data, but its input '.*' has "
                                          rf"layout {layout}"):
        pipe()


def test_axis_name_missing_from_the_layout_is_an_error():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.reductions.sum(fn.external_source(source=images, batch=True, layout="HWC"), axis_names="D")

    with pytest.raises(SchemaError, match=r"axis_names 'D' name 'D', which is not in the input's layout 'HWC'"):
        pipe()


@needs_dali[0]
@needs_dali[1]
def test_channel_first_erase_matches_dali():
    from nvidia import dali

    @dali.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def theirs():
        hwc = dali.fn.external_source(source=images, batch=True, layout="HWC")
        chw = dali.fn.transpose(hwc, perm=[2, 0, 1])
        return dali.fn.erase(chw, anchor=[2, 3], shape=[4, 5]), dali.fn.reductions.mean(chw, axis_names="HW")

    reference = theirs()
    reference.build()
    expected = reference.run()
    ours = channel_first().run()
    for a, b in zip(ours, expected, strict=True):
        for i in range(2):
            np.testing.assert_allclose(a.at(i), np.array(b[i]), rtol=1e-6)
