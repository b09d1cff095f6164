"""debayer and its DALI alias experimental.debayer.

Against DALI's CPU operator (OpenCV's demosaicing) on the same inputs: exact, for every blue position and CPU
algorithm, uint8 and uint16, HW and HW1 inputs, blue_position literal and per sample. The bilinear rule the GPU kernel
runs (`bilinear_debayer`) against OpenCV's bilinear demosaicing: exact. GPU against CPU: exact (DALI's GPU default,
NPP's 'default_npp', is taken as the same bilinear rule, so it is not compared with DALI).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import needs_dali, run_dali, run_headrace, run_once

import headrace
from headrace import types
from headrace.errors import SampleError
from headrace_kernels.cpu.debayer_ops import bilinear_debayer

RNG = np.random.default_rng(18)
RAW8 = [RNG.integers(0, 256, (10, 12), dtype=np.uint8), RNG.integers(0, 256, (16, 6), dtype=np.uint8),
        RNG.integers(0, 256, (2, 4), dtype=np.uint8)]
RAW16 = [RNG.integers(0, 65536, (10, 14), dtype=np.uint16), RNG.integers(0, 4096, (4, 6), dtype=np.uint16)]
POSITIONS = [[0, 0], [0, 1], [1, 0], [1, 1]]
CODES = {(0, 0): cv2.COLOR_BayerBG2RGB, (0, 1): cv2.COLOR_BayerGB2RGB, (1, 0): cv2.COLOR_BayerGR2RGB,
         (1, 1): cv2.COLOR_BayerRG2RGB}


@needs_dali[0]
@needs_dali[1]
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # DALI's experimental.debayer
@pytest.mark.parametrize("algorithm", [None, "bilinear_ocv", "edgeaware_ocv", "vng_ocv", "gray_ocv"])
@pytest.mark.parametrize("blue", POSITIONS)
def test_debayer_matches_dali(algorithm, blue):
    kwargs = {"blue_position": blue, **({"algorithm": algorithm} if algorithm else {})}
    for raws in (RAW8, RAW16) if algorithm != "vng_ocv" else (RAW8,):
        for op in ("debayer", "experimental.debayer"):
            ours, theirs = run_headrace(op, raws, layout="HW", **kwargs), run_dali(op, raws, layout="HW", **kwargs)
            for a, b in zip(ours, theirs, strict=True):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


@needs_dali[0]
@needs_dali[1]
def test_per_sample_blue_position_and_one_channel_images_match_dali():
    raws = [np.ascontiguousarray(r[..., None]) for r in RAW8]
    positions = [np.array([0, 1], np.int32), np.array([1, 1], np.int32), np.array([1, 0], np.int32)]
    ours = run_headrace("debayer", raws, layout="HWC", arg_inputs={"blue_position": positions})
    theirs = run_dali("debayer", raws, layout="HWC", arg_inputs={"blue_position": positions})
    for a, b, raw, blue in zip(ours, theirs, RAW8, positions, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, cv2.cvtColor(raw, CODES[tuple(blue)]))


def _sequence_pipeline(api, videos: list, positions: list | None):
    """debayer over FHW sequences in `api`, blue_position (1, 0) or one pair per frame (fn.per_frame)."""
    fn = api.fn

    @api.pipeline_def(batch_size=len(videos), num_threads=1, device_id=None, seed=3)
    def pipe():
        data = fn.external_source(source=lambda: videos, batch=True, layout="FHW")
        if positions is None:
            return fn.debayer(data, blue_position=[1, 0])
        blue = fn.external_source(source=lambda: positions, batch=True)
        return fn.debayer(data, blue_position=fn.per_frame(blue))

    out = run_once(pipe())
    return [np.array(out.at(i)) for i in range(len(out))], out.layout()


@needs_dali[0]
@needs_dali[1]
def test_sequences_match_dali():
    import nvidia.dali

    videos = [RNG.integers(0, 256, (3, 6, 8), dtype=np.uint8), RNG.integers(0, 256, (2, 4, 4), dtype=np.uint8)]
    positions = [np.array([[0, 0], [0, 1], [1, 1]], np.int32), np.array([[1, 0], [0, 0]], np.int32)]
    for per_frame in (None, positions):
        (ours, our_layout), (theirs, their_layout) = (_sequence_pipeline(api, videos, per_frame)
                                                      for api in (headrace, nvidia.dali))
        assert our_layout == their_layout == "FHWC"
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape", [(3, 3), (4, 4), (4, 5), (9, 12), (16, 6)])
def test_the_gpu_bilinear_rule_is_opencvs(shape):
    for dtype, top in ((np.uint8, 256), (np.uint16, 65536)):
        raw = RNG.integers(0, top, shape).astype(dtype)
        for blue, code in CODES.items():
            np.testing.assert_array_equal(bilinear_debayer(np, raw, blue), cv2.cvtColor(raw, code))


def test_bad_input_names_the_op_the_sample_and_the_argument():
    with pytest.raises(SampleError, match=r"debayer.*sample 0.*'blue_position' must be two values of 0 or 1"):
        run_headrace("debayer", RAW8, blue_position=[2, 0])
    with pytest.raises(SampleError, match=r"debayer.*sample 0.*'vng_ocv' takes uint8 images only"):
        run_headrace("debayer", RAW16, blue_position=[0, 0], algorithm="vng_ocv")
    with pytest.raises(SampleError, match=r"debayer.*sample 0.*expects uint8 or uint16 images, got float32"):
        run_headrace("debayer", [r.astype(np.float32) for r in RAW8], blue_position=[0, 0])
    with pytest.raises(SampleError, match=r"debayer.*sample 0.*1 channel, got shape \(10, 12, 3\)"):
        run_headrace("debayer", [np.zeros((10, 12, 3), np.uint8)], blue_position=[0, 0])
    with pytest.raises(SampleError, match=r"debayer.*sample 0.*'blue_position' must be two values of 0 or 1"):
        run_headrace("debayer", RAW8, blue_position=[0, 1, 1, 0])
    with pytest.raises(SampleError, match=r"debayer.*sample 0.*one \(row, column\) pair or one per frame \(2\), "
                                          r"got 6 values"):
        run_headrace("debayer", [np.zeros((2, 4, 4), np.uint8)], layout="FHW", blue_position=[0, 1, 1, 0, 0, 0])
    with pytest.raises(SampleError, match=r"debayer.*sample 1.*an even height and width .*got 9x12"):
        run_headrace("debayer", [RAW8[0], RAW8[0][1:]], blue_position=[0, 0])


@needs_dali[0]
@needs_dali[1]
def test_arguments_are_dalis():
    from nvidia.dali import backend

    from headrace.schema import get_schema

    for name, dali_name in (("debayer", "Debayer"), ("experimental.debayer", "experimental__Debayer")):
        theirs, ours = backend.GetSchema(dali_name), get_schema(name)
        for arg in ours.args:
            assert theirs.HasArgument(arg.name), arg.name
        assert not theirs.IsArgumentOptional("blue_position") and theirs.IsTensorArgument("blue_position")


def test_output_spec_agrees_with_the_output():
    @headrace.pipeline_def(batch_size=len(RAW8), num_threads=1, device_id=None)
    def pipe():
        raw = headrace.fn.external_source(name="raw", dtype=types.UINT8, ndim=2, layout="HW")
        return (headrace.fn.debayer(raw, blue_position=[0, 0]),
                headrace.fn.experimental.debayer(raw, blue_position=[1, 1], algorithm="gray_ocv"))

    p = pipe()
    outs = p.run(raw=RAW8)
    for node, batch, channels in zip(p.outputs, outs, (3, 1), strict=True):
        assert node.spec.dtype == np.uint8 and node.spec.layout == "HWC" and node.spec.dims[2] == channels
        assert batch.layout() in ("", "HWC")
        for i, raw in enumerate(RAW8):
            assert np.asarray(batch.at(i)).shape == (*raw.shape, channels)
    p.close()


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", [None, "default_npp", "edgeaware_ocv", "gray_ocv"])
@pytest.mark.parametrize("blue", POSITIONS)
def test_gpu_matches_cpu(algorithm, blue):
    kwargs = {"blue_position": blue, **({"algorithm": algorithm} if algorithm else {})}
    for raws in (RAW8, RAW16):
        cpu, gpu = cpu_and_gpu(raws, lambda data, device: headrace.fn.debayer(data, device=device, **kwargs))
        for a, b in zip(cpu, gpu, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_gpu_sequences_match_cpu():
    videos = [RNG.integers(0, 256, (3, 6, 8), dtype=np.uint8), RNG.integers(0, 256, (2, 4, 4), dtype=np.uint8)]

    def graph(data, device):
        sequences = headrace.fn.reshape(data, rel_shape=[1, 1, 1], layout="FHW")
        return headrace.fn.debayer(sequences, blue_position=[0, 1], device=device)

    cpu, gpu = cpu_and_gpu(videos, graph)
    for a, b in zip(cpu, gpu, strict=True):
        assert a.shape[-1] == 3
        np.testing.assert_array_equal(a, b)
