"""experimental.remap.

DALI has remap on the GPU only (NPP), so its CPU build cannot run it: the op is tested against OpenCV's cv2.remap
with BORDER_CONSTANT 0 (DALI's only border), which DALI's documentation names as the reference for
pixel_origin='center'; 'corner' is the same with the maps moved by half a pixel. OpenCV quantizes coordinates to 1/32
pixel for linear and cubic sampling, so those tests use maps on that grid: then exact for integer images, within 1e-5
for float32. Nearest-neighbour on unquantized maps: exact. The argument names are checked against DALI's schema. GPU
against CPU: exact for integer images, 1e-5 for float32.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from gpu_helpers import cpu_and_gpu
from ops_support import needs_dali, run_headrace

import headrace
from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(12)
IMAGES = [RNG.integers(0, 256, (20, 30, 3), dtype=np.uint8), RNG.integers(0, 256, (11, 7, 3), dtype=np.uint8)]
FLOATS = [RNG.uniform(-1, 1, (16, 12)).astype(np.float32), RNG.uniform(0, 1, (9, 14)).astype(np.float32)]
WIDE = [RNG.integers(0, 65536, (13, 10, 1), dtype=np.uint16)]
INTERPS = {types.INTERP_NN: cv2.INTER_NEAREST, types.INTERP_LINEAR: cv2.INTER_LINEAR,
           types.INTERP_CUBIC: cv2.INTER_CUBIC}


def maps_for(image: np.ndarray, out_hw: tuple[int, int], quantized: bool) -> tuple[np.ndarray, np.ndarray]:
    """Random maps over the image and a margin of 3 pixels around it (on OpenCV's 1/32 grid when `quantized`)."""
    h, w = image.shape[:2]
    mapx = RNG.uniform(-3, w + 3, out_hw)
    mapy = RNG.uniform(-3, h + 3, out_hw)
    if quantized:
        mapx, mapy = np.round(mapx * 32) / 32, np.round(mapy * 32) / 32
    return mapx.astype(np.float32), mapy.astype(np.float32)


def opencv_remap(image, mapx, mapy, interp, pixel_origin):
    shift = np.float32(0.5 if pixel_origin == "corner" else 0.0)
    out = cv2.remap(image, mapx - shift, mapy - shift, INTERPS[interp], borderMode=cv2.BORDER_CONSTANT,
                    borderValue=0)
    return out.reshape(mapx.shape + image.shape[2:])


@pytest.mark.parametrize("interp", list(INTERPS))
@pytest.mark.parametrize("pixel_origin", ["corner", "center"])
def test_remap_matches_opencv(interp, pixel_origin):
    for images in (IMAGES, FLOATS, WIDE):
        # NN on the 1/32 grid would meet ties, which OpenCV and DALI break differently
        maps = [maps_for(image, (15, 17) if i else (6, 25), interp != types.INTERP_NN)
                for i, image in enumerate(images)]
        got = run_headrace("experimental.remap", images, [m[0] for m in maps], [m[1] for m in maps], interp=interp,
                           pixel_origin=pixel_origin)
        for out, image, (mapx, mapy) in zip(got, images, maps, strict=True):
            expected = opencv_remap(image, mapx, mapy, interp, pixel_origin)
            assert out.dtype == image.dtype and out.shape == expected.shape
            if image.dtype.kind == "f":
                np.testing.assert_allclose(out, expected, atol=1e-5)
            else:
                np.testing.assert_array_equal(out, expected)


def test_maps_of_one_channel_and_the_default_arguments():
    image = IMAGES[0]
    mapx, mapy = maps_for(image, (8, 9), quantized=True)
    (out,) = run_headrace("experimental.remap", [image], [mapx[..., None]], [mapy[..., None]])
    np.testing.assert_array_equal(out, opencv_remap(image, mapx, mapy, types.INTERP_LINEAR, "corner"))


def test_identity_maps_give_the_image():
    image = IMAGES[1]
    ys, xs = np.mgrid[0:image.shape[0], 0:image.shape[1]].astype(np.float32)
    for origin, shift in (("center", 0.0), ("corner", 0.5)):
        for interp in INTERPS:
            (out,) = run_headrace("experimental.remap", [image], [xs + shift], [ys + shift], interp=interp,
                                  pixel_origin=origin)
            np.testing.assert_array_equal(out, image)


def _sequence_remap(video: np.ndarray, mapx: np.ndarray, mapy: np.ndarray, map_layout: str) -> tuple:
    fn = headrace.fn

    @headrace.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(source=lambda: [video], batch=True, layout="FHWC")
        mx = fn.external_source(source=lambda: [mapx], batch=True, layout=map_layout)
        my = fn.external_source(source=lambda: [mapy], batch=True, layout=map_layout)
        return fn.experimental.remap(data, mx, my, pixel_origin="center")

    p = pipe()
    (out,) = p.run()
    p.close()
    return np.asarray(out.at(0)), out.layout()


def test_sequences_frame_by_frame_with_maps_per_frame_or_shared():
    video = RNG.integers(0, 256, (3, 10, 12, 3), dtype=np.uint8)
    frame_maps = [maps_for(video[0], (7, 9), quantized=True) for _ in range(3)]
    per_frame = (np.stack([m[0] for m in frame_maps]), np.stack([m[1] for m in frame_maps]))
    shared = frame_maps[0]
    for (mapx, mapy), layout in ((per_frame, "FHW"), (shared, "HW")):
        out, out_layout = _sequence_remap(video, mapx, mapy, layout)
        assert out.shape == (3, 7, 9, 3) and out_layout == "FHWC"
        for f in range(3):
            fx, fy = (mapx[f], mapy[f]) if layout == "FHW" else (mapx, mapy)
            np.testing.assert_array_equal(out[f], opencv_remap(video[f], fx, fy, types.INTERP_LINEAR, "center"))


def test_bad_maps_name_the_op_the_sample_and_the_input():
    image = IMAGES[0]
    mapx, mapy = maps_for(image, (5, 5), quantized=False)
    with pytest.raises(SampleError, match=r"remap.*sample 0.*'mapx' must be a float HW"):
        run_headrace("experimental.remap", [image], [mapx.astype(np.int32)], [mapy])
    with pytest.raises(SampleError, match=r"remap.*sample 0.*mapx \(5, 5\) and mapy \(4, 5\) differ"):
        run_headrace("experimental.remap", [image], [mapx], [mapy[:4]])
    with pytest.raises(SampleError, match=r"remap.*sample 0.*'mapx' has 2 frames, the sequence 3"):
        _sequence_remap(np.zeros((3, 4, 4, 1), np.uint8), np.zeros((2, 4, 4), np.float32),
                        np.zeros((2, 4, 4), np.float32), "FHW")


@needs_dali[0]
@needs_dali[1]
def test_arguments_are_dalis():
    from nvidia.dali import backend

    from headrace.schema import get_schema

    theirs, ours = backend.GetSchema("experimental__Remap"), get_schema("experimental.remap")
    for arg in ours.args:
        assert theirs.HasArgument(arg.name) and theirs.IsArgumentOptional(arg.name), arg.name
    assert theirs.GetArgumentDefaultValueString("pixel_origin") == repr(ours.arg({}, "pixel_origin"))
    assert theirs.GetArgumentDefaultValueString("interp") == str(int(ours.arg({}, "interp")))
    assert (theirs.MinNumInput(), theirs.MaxNumInput()) == (ours.min_inputs, ours.max_inputs)


def test_output_spec_agrees_with_the_output():
    @headrace.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        fn = headrace.fn
        images = fn.external_source(name="images", dtype=types.UINT8, ndim=3, layout="HWC")
        mapx = fn.external_source(name="mapx", dtype=types.FLOAT, ndim=2)
        mapy = fn.external_source(name="mapy", dtype=types.FLOAT, ndim=2)
        return fn.experimental.remap(images, mapx, mapy)

    p = pipe()
    mapx, mapy = maps_for(IMAGES[0], (4, 6), quantized=False)
    (out,) = p.run(images=[IMAGES[0]], mapx=[mapx], mapy=[mapy])
    spec = p.outputs[0].spec
    assert spec.dtype == np.uint8 and spec.layout == "HWC" and len(spec.dims) == 3
    assert np.asarray(out.at(0)).shape == (4, 6, 3)
    p.close()


@pytest.mark.gpu
@pytest.mark.parametrize("interp", list(INTERPS))
def test_gpu_matches_cpu(interp):
    for images in (IMAGES, FLOATS, WIDE):
        maps = [maps_for(image, (15, 17), quantized=False) for image in images]
        cpu = run_headrace("experimental.remap", images, [m[0] for m in maps], [m[1] for m in maps], interp=interp)

        def graph(data, device, maps=maps):
            fn = headrace.fn
            mx = fn.external_source(source=lambda: [m[0] for m in maps])
            my = fn.external_source(source=lambda: [m[1] for m in maps])
            if device == "gpu":
                mx, my = mx.gpu(), my.gpu()
            return fn.experimental.remap(data, mx, my, interp=interp, device=device)

        ref, gpu = cpu_and_gpu(images, graph)
        for a, b, c in zip(cpu, ref, gpu, strict=True):
            np.testing.assert_array_equal(a, b)
            assert b.dtype == c.dtype
            np.testing.assert_allclose(b.astype(np.float64), c.astype(np.float64), atol=1e-5 if b.dtype.kind == "f"
                                       else 0)


@pytest.mark.gpu
def test_gpu_sequences_match_cpu():
    videos = [RNG.integers(0, 256, (3, 10, 12, 3), dtype=np.uint8)]
    maps = [maps_for(videos[0][0], (7, 9), quantized=False) for _ in range(3)]
    mapx, mapy = np.stack([m[0] for m in maps]), np.stack([m[1] for m in maps])

    def graph(data, device):
        fn = headrace.fn
        mx = fn.external_source(source=lambda: [mapx], layout="FHW")
        my = fn.external_source(source=lambda: [mapy], layout="FHW")
        if device == "gpu":
            mx, my = mx.gpu(), my.gpu()
        sequences = fn.reshape(data, rel_shape=[1, 1, 1, 1], layout="FHWC")
        return fn.experimental.remap(sequences, mx, my, device=device)

    cpu, gpu = cpu_and_gpu(videos, graph)
    assert cpu[0].shape == (3, 7, 9, 3)
    np.testing.assert_array_equal(cpu[0], gpu[0])
