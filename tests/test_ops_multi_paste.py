"""multi_paste against DALI's CPU operator (exact: it only copies values, and converts them as DALI's ConvertSat) and
against canvases built by hand here with numpy. The GPU kernel against the CPU one (exact)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import assert_specs_agree, needs_dali, run_once

import headrace
from headrace import types
from headrace.errors import SampleError, SchemaError

RNG = np.random.default_rng(18)
IMAGES = [RNG.integers(0, 256, (6, 7, 3), dtype=np.uint8) for _ in range(3)]
OTHERS = [RNG.integers(0, 256, (6, 7, 3), dtype=np.uint8) for _ in range(3)]
IDS = [np.array([0, 1], np.int32), np.array([2], np.int32), np.array([], np.int32)]
OUT_ANCHORS = [np.array([[0, 0], [2, 1]], np.int32), np.array([[1, 2]], np.int32), np.zeros((0, 2), np.int32)]
SHAPES = [np.array([[3, 4], [4, 5]], np.int32), np.array([[5, 4]], np.int32), np.zeros((0, 2), np.int32)]
IN_ANCHORS = [np.array([[1, 1], [2, 0]], np.int32), np.array([[0, 2]], np.int32), np.zeros((0, 2), np.int32)]


def _source(samples: list) -> Callable[[], list]:
    return lambda: list(samples)


def run(api, inputs: list[list], arg_inputs: dict | None = None, **kwargs) -> list[np.ndarray]:
    """multi_paste over one batch of `inputs` (a list of batches) in `api` (headrace or nvidia.dali)."""
    fn = api.fn

    @api.pipeline_def(batch_size=len(inputs[0]), num_threads=1, device_id=None, seed=3)
    def pipe():
        nodes = [fn.external_source(source=_source(s), batch=True, layout="HWC") for s in inputs]
        args = {k: fn.external_source(source=_source(v), batch=True) for k, v in (arg_inputs or {}).items()}
        return fn.multi_paste(*nodes, **args, **kwargs)

    out = run_once(pipe())
    return [np.array(out.at(i)) for i in range(len(out))]


def test_regions_land_where_the_arguments_say():
    args = {"in_ids": IDS, "out_anchors": OUT_ANCHORS, "shapes": SHAPES, "in_anchors": IN_ANCHORS}
    got = run(headrace, [IMAGES], args, output_size=[8, 9])
    for i, out in enumerate(got):
        expected = np.zeros((8, 9, 3), np.uint8)
        for j, source in enumerate(IDS[i]):
            (iy, ix), (h, w), (oy, ox) = IN_ANCHORS[i][j], SHAPES[i][j], OUT_ANCHORS[i][j]
            expected[oy:oy + h, ox:ox + w] = IMAGES[source][iy:iy + h, ix:ix + w]  # later regions on top
        np.testing.assert_array_equal(out, expected)


def test_several_inputs_and_relative_arguments():
    got = run(headrace, [IMAGES, OTHERS], in_anchors_rel=[0.5, 0.4, 0.0, 0.0], shapes_rel=[0.5, 0.6, 0.25, 0.2],
              out_anchors_rel=[0.25, 0.2, 0.5, 0.5])
    for image, other, out in zip(IMAGES, OTHERS, got, strict=True):
        expected = np.zeros((6, 7, 3), np.uint8)
        # region 0: anchor floor(6 * .5, 7 * .4) = (3, 2), shape ceil(6 * .5, 7 * .6) = (3, 5), at floor(1.5, 1.4)
        expected[1:4, 1:6] = image[3:6, 2:7]
        # region 1: anchor (0, 0), shape ceil(1.5, 1.4) = (2, 2), at floor(3, 3.5) = (3, 3)
        expected[3:5, 3:5] = other[0:2, 0:2]
        np.testing.assert_array_equal(out, expected)


def test_dtype_converts_the_canvas():
    got = run(headrace, [IMAGES], in_ids=[1], dtype=types.FLOAT)
    for out in got:
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, IMAGES[1].astype(np.float32))


def test_errors_name_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"multi_paste .*output sample 0, region 0: .*not inside the canvas.*"
                                          r"'out_anchors'"):
        run(headrace, [IMAGES], in_ids=[0], out_anchors=[3, 3])
    with pytest.raises(SampleError, match=r"multi_paste .*output sample 0: argument 'in_ids' names sample 5"):
        run(headrace, [IMAGES], in_ids=[5])
    with pytest.raises(SampleError, match=r"multi_paste .*output sample 0: argument 'shapes' needs one \(row, "
                                          r"column\) pair per pasted region"):
        run(headrace, [IMAGES], in_ids=[0, 1], shapes=[1, 1])
    with pytest.raises(SampleError, match=r"give argument 'output_size': the input samples differ in size"):
        run(headrace, [[IMAGES[0], IMAGES[1][:3]]], in_ids=[0])
    with pytest.raises(SchemaError, match="`out_anchors` and `out_anchors_rel` cannot be given together"):
        run(headrace, [IMAGES], in_ids=[0], out_anchors=[0, 0], out_anchors_rel=[0.0, 0.0])


@needs_dali[0]
@needs_dali[1]
def test_matches_dali():
    import nvidia.dali

    cases = [
        ([IMAGES], {"in_ids": IDS, "out_anchors": OUT_ANCHORS, "shapes": SHAPES, "in_anchors": IN_ANCHORS},
         dict(output_size=[8, 9])),
        ([IMAGES], {"in_ids": IDS, "out_anchors": OUT_ANCHORS}, dict(output_size=[11, 12], dtype=types.FLOAT)),
        ([IMAGES, OTHERS], {}, dict(in_anchors_rel=np.array([[0.5, 0.4], [0.0, 0.0]], np.float32),
                                    shapes_rel=np.array([[0.5, 0.6], [0.25, 0.2]], np.float32),
                                    out_anchors_rel=np.array([[0.25, 0.2], [0.5, 0.5]], np.float32))),
        ([IMAGES], {}, dict(in_ids=[2, 0], in_anchors=np.array([[1, 1], [0, 2]], np.int32),
                            shapes=np.array([[2, 2], [3, 2]], np.int32), out_anchors=np.array([[0, 0], [1, 3]],
                                                                                              np.int32))),
    ]
    for inputs, arg_inputs, kwargs in cases:
        ours = run(headrace, inputs, arg_inputs, **kwargs)
        theirs = run(nvidia.dali, inputs, arg_inputs, **kwargs)
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_gpu_matches_cpu():
    def graph(data, device):
        fn = headrace.fn
        ids = fn.external_source(source=_source(IDS), batch=True)
        anchors = fn.external_source(source=_source(OUT_ANCHORS), batch=True)
        return fn.multi_paste(data, in_ids=ids, out_anchors=anchors, output_size=[8, 9], device=device)

    cpu, gpu = cpu_and_gpu(IMAGES, graph)
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a, b)
    cpu, gpu = cpu_and_gpu(IMAGES, lambda data, device: headrace.fn.multi_paste(
        data, in_ids=[2, 0], shapes_rel=[0.5, 0.5, 1.0, 0.3], dtype=types.FLOAT, device=device))
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_array_equal(a, b)




def test_output_specs_agree_with_the_outputs():
    @headrace.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        images = fn.external_source(name="images", dtype=types.UINT8, ndim=3, layout="HWC")
        return (fn.multi_paste(images, in_ids=[0, 1], output_size=[9, 10]),
                fn.multi_paste(images, images, dtype=types.FLOAT))

    assert_specs_agree(pipe(), images=IMAGES)
