"""color_space_conversion: every supported pair against DALI's CPU build, bit for bit (on random images of several
sizes, and in the slow test on all 2**24 uint8 colours: the input domain is small enough to try whole), against
reference values written out here (BT.601 with Y in 16..235, OpenCV's fixed-point gray), its errors, its output spec,
the pipeline file, and the GPU kernel against the CPU one, bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import Pipeline, fn, pipeline_def, types
from headrace.errors import SampleError, SchemaError
from headrace.schema import SCHEMAS, OutputSpec
from tests.gpu_helpers import cpu_and_gpu, max_level_difference, run_graph

OP = "color_space_conversion"
SPACES = (types.RGB, types.BGR, types.GRAY, types.YCbCr)
PAIRS = [(a, b) for a in SPACES for b in SPACES if a != b]  # DALI converts any two different spaces
SHAPES = [(9, 11), (1, 1), (32, 17), (4, 6)]


def _channels(space) -> int:
    return 1 if space == types.GRAY else 3


def _images(space, shapes=SHAPES, seed=0) -> list[np.ndarray]:
    """Random uint8 images of `space`, then one of every gray level ((v, v, v) for 3 channels, where DALI's older
    YCbCr code took a shortcut) and, for 3 channels, one of the primaries."""
    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 256, (h, w, _channels(space)), dtype=np.uint8) for h, w in shapes]
    levels = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    if _channels(space) == 1:
        return [*images, levels]
    return [*images, np.repeat(levels, 3, axis=2), (np.eye(3, dtype=np.uint8) * 255)[None]]


def _convert(images, source, target, **kwargs) -> list[np.ndarray]:
    return run_headrace(OP, images, image_type=source, output_type=target, **kwargs)


PAIR_IDS = [f"{a.name}-{b.name}" for a, b in PAIRS]


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("source, target", PAIRS, ids=PAIR_IDS)
def test_every_pair_matches_dali(source, target):
    images = _images(source, seed=int(source) * 4 + int(target))
    ours = _convert(images, source, target, layout="HWC")
    theirs = run_dali(OP, images, layout="HWC", image_type=source, output_type=target)
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape
        np.testing.assert_array_equal(a, b)  # exact: the same float32 operations and rounding as DALI's CPU build


@needs_dali[0]
@needs_dali[1]
@pytest.mark.slow
def test_every_uint8_colour_matches_dali():
    cube = np.stack(np.meshgrid(*[np.arange(256, dtype=np.uint8)] * 3, indexing="ij"), -1).reshape(4096, 4096, 3)
    for source, target in PAIRS:
        image = np.arange(256, dtype=np.uint8).reshape(16, 16, 1) if source == types.GRAY else cube
        ours = _convert([image], source, target)[0]
        theirs = run_dali(OP, [image], layout="HWC", image_type=source, output_type=target)[0]
        assert np.array_equal(ours, theirs), (source.name, target.name, int((ours != theirs).sum()))


@needs_dali[0]
@needs_dali[1]
def test_sequences_match_dali():
    frames = np.random.default_rng(3).integers(0, 256, (3, 5, 7, 3), dtype=np.uint8)
    ours = _convert([frames], types.YCbCr, types.BGR, layout="FHWC")[0]
    np.testing.assert_array_equal(ours, run_dali(OP, [frames], layout="FHWC", image_type=types.YCbCr,
                                                 output_type=types.BGR)[0])


def _rgb(*values) -> np.ndarray:
    return np.array(values, np.uint8).reshape(1, -1, 3)


def test_reference_values():
    black, white = _rgb(0, 0, 0), _rgb(255, 255, 255)
    assert _convert([black], types.RGB, types.YCbCr)[0].tolist() == [[[16, 128, 128]]]
    assert _convert([white], types.BGR, types.YCbCr)[0].tolist() == [[[235, 128, 128]]]
    assert _convert([_rgb(16, 128, 128, 235, 128, 128)], types.YCbCr, types.RGB)[0].tolist() == \
        [[[0, 0, 0], [255, 255, 255]]]
    gray = np.array([0, 255, 16, 235], np.uint8).reshape(1, 4, 1)
    assert _convert([gray], types.GRAY, types.YCbCr)[0][0, :, 0].tolist() == [16, 235, 30, 218]
    lumas = np.concatenate([gray, np.full((1, 4, 2), 128, np.uint8)], axis=2)
    assert _convert([lumas], types.YCbCr, types.GRAY)[0][0, :, 0].tolist() == [0, 255, 0, 255]  # saturated
    # OpenCV's fixed point: (9798 R + 19235 G + 3735 B + 2**14) >> 15
    primaries = _rgb(255, 0, 0, 0, 255, 0, 0, 0, 255)
    assert _convert([primaries], types.RGB, types.GRAY)[0][0, :, 0].tolist() == [76, 150, 29]
    assert _convert([primaries], types.BGR, types.GRAY)[0][0, :, 0].tolist() == [29, 150, 76]
    assert _convert([primaries], types.RGB, types.BGR)[0].tolist() == primaries[..., ::-1].tolist()
    assert _convert([gray], types.GRAY, types.BGR)[0].tolist() == np.repeat(gray, 3, axis=2).tolist()


def test_bt601_in_float64_within_one_level():
    # the same formulas in float64 with numpy's own rounding: float32 arithmetic moves a value at most one level
    image = _images(types.RGB, [(40, 50)])[0]
    rgb = image.astype(np.float64)
    to_ycbcr = np.array([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]]) / 255
    expected = np.clip(np.floor(rgb @ to_ycbcr.T + [16, 128, 128] + 0.5), 0, 255)
    assert np.abs(_convert([image], types.RGB, types.YCbCr)[0] - expected).max() <= 1
    ycbcr = image.astype(np.float64) - [16, 128, 128]
    expected = np.clip(np.floor(ycbcr @ np.linalg.inv(to_ycbcr).T + 0.5), 0, 255)
    assert np.abs(_convert([image], types.YCbCr, types.RGB)[0] - expected).max() <= 1


def test_leading_dims_are_kept():
    frames = _images(types.RGB, [(5, 7)] * 3)[:3]
    sequence = np.stack(frames)
    got = _convert([sequence], types.RGB, types.GRAY)[0]
    assert got.shape == (3, 5, 7, 1)
    for frame, single in zip(got, _convert(frames, types.RGB, types.GRAY), strict=True):
        np.testing.assert_array_equal(frame, single)


def test_errors_name_the_op_and_the_sample():
    good = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(SampleError, match=r"sample 0 .*cannot convert RGB to RGB \(supported: RGB->BGR"):
        _convert([good], types.RGB, types.RGB)
    with pytest.raises(SampleError, match=r"sample 1 .*color_space_conversion expects .*3 channel\(s\) for RGB, "
                                          r"got shape \(4, 4, 1\)"):
        _convert([good, np.zeros((4, 4, 1), np.uint8)], types.RGB, types.GRAY)
    with pytest.raises(SampleError, match=r"color_space_conversion .*1 channel\(s\) for GRAY, got shape \(4, 4\)"):
        _convert([np.zeros((4, 4), np.uint8)], types.GRAY, types.RGB)
    with pytest.raises(SampleError, match="color_space_conversion accepts only uint8 images .*got float32"):
        _convert([good.astype(np.float32)], types.RGB, types.YCbCr)
    with pytest.raises(SchemaError, match="color_space_conversion .*'image_type'"):
        _convert([good], types.ANY_DATA, types.RGB)
    with pytest.raises(SchemaError, match="color_space_conversion .*missing required argument 'output_type'"):
        run_headrace(OP, [good], image_type=types.RGB)
    with pytest.raises(SchemaError, match="color_space_conversion .*needs HWC or FHWC or DHWC or FDHWC data"):
        _convert([good], types.RGB, types.GRAY, layout="CHW")


def test_output_spec():
    schema = SCHEMAS[OP]
    hwc = OutputSpec(np.uint8, "HWC", (4, 5, 3))
    (spec,) = schema.output_specs({"image_type": types.RGB, "output_type": types.GRAY}, inputs=[hwc])
    assert (spec.dtype, spec.layout, spec.dims, spec.note) == (np.dtype(np.uint8), "HWC", (4, 5, 1), "GRAY")
    (spec,) = schema.output_specs({"image_type": types.GRAY, "output_type": types.YCbCr},
                                  inputs=[OutputSpec(np.uint8, "FHWC", (-1, 4, 5, 1))])
    assert (spec.layout, spec.dims) == ("FHWC", (-1, 4, 5, 3))


def test_pipeline_file_round_trip():
    images = _images(types.RGB)

    @pipeline_def(batch_size=len(images), num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: images, batch=True, layout="HWC", name="x")
        return fn.color_space_conversion(x, image_type=types.BGR, output_type=types.YCbCr)

    original = pipe()
    text = original.serialize()
    node = next(n for n in json.loads(text)["nodes"] if n["op"] == OP)
    assert node["args"] == {"image_type": "BGR", "output_type": "YCbCr"}
    (a,) = original.run()
    (b,) = Pipeline.load(text).run(x=images)
    for i in range(len(images)):
        np.testing.assert_array_equal(np.asarray(a.at(i)), np.asarray(b.at(i)))


@pytest.mark.gpu
@pytest.mark.parametrize("source, target", PAIRS, ids=PAIR_IDS)
def test_gpu_equals_cpu_bit_for_bit(source, target):
    shapes = [(1, 1), (75, 100), (33, 517), (17, 5), (64, 64)]
    batch = _images(source, shapes, seed=7)

    def graph(data, device):
        return fn.color_space_conversion(data, image_type=source, output_type=target)

    cpu, gpu_out = cpu_and_gpu(batch, graph)
    assert max_level_difference(cpu, gpu_out) == 0
    dense = _images(source, [(40, 30)] * 3, seed=8)[:3]  # one shape: a dense batch
    cpu, gpu_out = cpu_and_gpu(dense, graph)
    assert max_level_difference(cpu, gpu_out) == 0


@pytest.mark.gpu
def test_gpu_sequences_and_errors():
    frames = [np.random.default_rng(9).integers(0, 256, (3, 20, 30, 3), dtype=np.uint8)]
    cpu, gpu_out = cpu_and_gpu(frames, lambda d, dev: fn.color_space_conversion(d, image_type=types.RGB,
                                                                                output_type=types.YCbCr))
    assert max_level_difference(cpu, gpu_out) == 0
    bad = [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 1), np.uint8)]
    with pytest.raises(SampleError, match=r"GPU\) failed on sample 1 .*3 channel\(s\) for RGB, got shape \(4, 4, 1\)"):
        run_graph(bad, lambda d, dev: fn.color_space_conversion(d, image_type=types.RGB, output_type=types.GRAY), "gpu")
