"""Image ops on FHWC sequences, frame by frame, as DALI's ops that allow sequences (headrace.engine.frames):
against DALI's CPU build on the same sequences (each frame goes through the op's own kernel: exact, or within the
tolerance the op has on images), with per-frame arguments (fn.per_frame), ragged sequence lengths, the pipeline
file, errors that name the op, the sample and the argument, and the GPU against the CPU (exact)."""

from __future__ import annotations

import numpy as np
import pytest
from ops_support import needs_dali

import headrace
from headrace.errors import SampleError

RNG = np.random.default_rng(41)
SEQUENCES = [RNG.integers(0, 256, (4, 16, 20, 3), dtype=np.uint8),
             RNG.integers(0, 256, (3, 18, 14, 3), dtype=np.uint8)]
"""Two sequences of different lengths and frame sizes."""
ANGLES = [np.array([0.0, 10.0, 20.0, 30.0], np.float32), np.array([5.0, 15.0, 25.0], np.float32)]
"""One hue per frame of each sequence."""

CASES = {
    "color_twist_per_frame": lambda fn, types, seq, hue: fn.color_twist(seq, hue=fn.per_frame(hue), saturation=1.2),
    "hsv": lambda fn, types, seq, hue: fn.hsv(seq, hue=30.0, value=0.9),
    "gaussian_blur": lambda fn, types, seq, hue: fn.gaussian_blur(seq, sigma=1.5),
    "laplacian": lambda fn, types, seq, hue: fn.laplacian(seq, dtype=types.FLOAT),
    "jpeg_compression_distortion": lambda fn, types, seq, hue: fn.jpeg_compression_distortion(seq, quality=30),
    "equalize": lambda fn, types, seq, hue: fn.equalize(seq),
    "flip": lambda fn, types, seq, hue: fn.flip(seq, horizontal=1, vertical=1),
    "crop": lambda fn, types, seq, hue: fn.crop(seq, crop=(10, 12), crop_pos_x=0.3),
    "resize": lambda fn, types, seq, hue: fn.resize(seq, resize_x=10, resize_y=8),
    "crop_mirror_normalize": lambda fn, types, seq, hue: fn.crop_mirror_normalize(
        seq, crop=(12, 12), mean=[128.0], std=[50.0], output_layout="FCHW", mirror=1),
    "rotate_per_frame": lambda fn, types, seq, hue: fn.rotate(seq, angle=fn.per_frame(hue), keep_size=True,
                                                              fill_value=0),
    "warp_affine": lambda fn, types, seq, hue: fn.warp_affine(seq, matrix=[0.9, 0.1, 2.0, -0.1, 1.1, -1.5],
                                                              size=[12, 15], interp_type=types.INTERP_NN),
}


TOLERANCES = {"resize": 1, "crop_mirror_normalize": 1e-5}
"""Where a frame's op matches DALI within a tolerance on images too (tests/test_resize.py: one level), the
sequence does within the same; every other op is exact."""


def _pipeline(lib, body, batch=SEQUENCES, hues=ANGLES):
    fn, types = lib.fn, lib.types

    @lib.pipeline_def(batch_size=len(batch), num_threads=1, device_id=None, seed=2)
    def pipe():
        seq = fn.external_source(source=lambda: batch, batch=True, layout="FHWC", name="seq")
        hue = fn.external_source(source=lambda: hues, batch=True, name="hue")
        return body(fn, types, seq, hue)

    return pipe()


def _run(lib, body, **kwargs) -> tuple[list[np.ndarray], str]:
    pipe = _pipeline(lib, body, **kwargs)
    if hasattr(pipe, "build"):
        pipe.build()
    (out,) = pipe.run()
    result = [np.array(out.at(i)) for i in range(len(out))], out.layout()
    if hasattr(pipe, "close"):
        pipe.close()
    return result


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("case", sorted(CASES))
def test_sequence_matches_dali(case):
    got, layout = _run(headrace, CASES[case])
    from nvidia import dali

    want, dali_layout = _run(dali, CASES[case])
    assert layout == dali_layout and layout.startswith("F")
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=0, atol=TOLERANCES.get(case, 0))


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_frame_is_the_image_op(case):
    """Frame f of the output is the op applied to frame f alone (its own per-frame argument)."""
    got, _ = _run(headrace, CASES[case])
    for s, sequence in enumerate(SEQUENCES):
        for f in range(len(sequence)):
            (frame,), _ = _run(headrace, lambda fn, types, seq, hue: CASES[case](fn, types, seq, hue),
                               batch=[sequence[f:f + 1]], hues=[ANGLES[s][f:f + 1]])
            np.testing.assert_array_equal(got[s][f], frame[0])


def test_output_spec_is_a_sequence():
    from headrace import fn, types

    pipe = headrace.Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        seq = fn.external_source(source=lambda: SEQUENCES, batch=True, layout="FHWC", ndim=4, dtype=types.UINT8)
        pipe.set_outputs(fn.gaussian_blur(seq, sigma=1.0), fn.laplacian(seq, dtype=types.FLOAT))
    blurred, edges = pipe.outputs
    assert (blurred.spec.layout, blurred.spec.dims, blurred.spec.dtype) == ("FHWC", (-1, -1, -1, -1), np.uint8)
    assert (edges.spec.layout, edges.spec.dtype) == ("FHWC", np.float32)
    pipe.close()


def test_one_per_frame_value_stands_for_all_frames():
    hues = [np.array([12.0], np.float32)] * 2
    got, _ = _run(headrace, CASES["color_twist_per_frame"], hues=hues)
    same, _ = _run(headrace, lambda fn, types, seq, hue: fn.color_twist(seq, hue=12.0, saturation=1.2))
    for g, w in zip(got, same, strict=True):
        np.testing.assert_array_equal(g, w)


def test_pipeline_file_keeps_sequences(tmp_path):
    pipe = _pipeline(headrace, CASES["color_twist_per_frame"])
    path = tmp_path / "seq.hrp"
    pipe.serialize(filename=str(path))
    want = [np.array(pipe.run()[0].at(i)) for i in range(2)]
    pipe.close()
    loaded = headrace.Pipeline.load(str(path))
    (out,) = loaded.run(seq=SEQUENCES, hue=ANGLES)
    for i, w in enumerate(want):
        np.testing.assert_array_equal(np.array(out.at(i)), w)
    loaded.close()


def test_wrong_number_of_frame_values_names_op_sample_and_argument():
    hues = [np.array([1.0, 2.0], np.float32), ANGLES[1]]
    with pytest.raises(SampleError, match=r"color_twist.*sample 0.*'hue' gives 2 values per frame.*4 frames"):
        _run(headrace, CASES["color_twist_per_frame"], hues=hues)


def test_empty_sequence_is_an_error_naming_the_sample():
    batch = [np.zeros((0, 4, 4, 3), np.uint8), SEQUENCES[1]]
    with pytest.raises(SampleError, match=r"gaussian_blur.*sample 0.*empty sequence"):
        _run(headrace, CASES["gaussian_blur"], batch=batch)


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(set(CASES) - {"jpeg_compression_distortion"}))
def test_gpu_sequence_matches_cpu(case):
    from headrace import Pipeline, fn, types

    results = {}
    for device in ("cpu", "gpu"):
        pipe = Pipeline(batch_size=2, num_threads=2, device_id=0, seed=2)
        with pipe:
            seq = fn.external_source(source=lambda: SEQUENCES, batch=True, layout="FHWC", name="seq")
            hue = fn.external_source(source=lambda: ANGLES, batch=True, name="hue")
            out = CASES[case](fn, types, seq.gpu() if device == "gpu" else seq, hue)
            pipe.set_outputs(out)
        (batch,) = pipe.run()
        assert batch.layout().startswith("F")
        if batch.device == "gpu":
            batch = batch.as_cpu()
        results[device] = [np.asarray(batch.at(i)) for i in range(2)]
        pipe.close()
    for g, c in zip(results["gpu"], results["cpu"], strict=True):
        assert g.shape == c.shape and g.dtype == c.dtype
        tolerance = 1e-4 if c.dtype == np.float32 else 1
        assert np.max(np.abs(g.astype(np.float64) - c)) <= tolerance
