"""decoders.image_crop and decoders.image_slice (ROI decode) against DALI's CPU build, the full decode, and (on a GPU)
the mixed decoders against the CPU ones.

Tolerances: against DALI's CPU build exact (the same nvImageCodec CPU backend decodes the same region); against a
window of the full decode exact for lossless formats and 4:4:4 JPEGs, within a few levels on the window's edge rows
for 4:2:0 JPEGs (chroma is upsampled from outside the window); mixed against CPU as tests/test_gpu_decode.py bounds
the GPU JPEG decoders (mean <= 3 and 99th percentile <= 16 levels: their IDCT and upsampling differ from
libjpeg-turbo's), exact for PNG (decoded on the CPU by both)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from oprun import needs_dali, run_dali, run_headrace
from PIL import Image

from headrace import fn, types
from headrace.data.synthetic import synthetic_image
from headrace.errors import SampleError, SchemaError
from headrace_kernels.columns import Column


def _encode(image: Image.Image, fmt: str, **kwargs) -> np.ndarray:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kwargs)
    return np.frombuffer(buffer.getvalue(), np.uint8)


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


@pytest.fixture(scope="module")
def encoded():
    rgb = Image.fromarray(synthetic_image(np.random.default_rng(11), 75, 100))
    return {
        "jpeg": _encode(rgb, "JPEG", quality=90),
        "jpeg_progressive": _encode(rgb, "JPEG", quality=90, progressive=True),
        "jpeg_444": _encode(rgb, "JPEG", quality=95, subsampling=0),
        "png": _encode(rgb, "PNG"),
        "webp": _encode(rgb, "WEBP", quality=90),
        "tiff": _encode(rgb, "TIFF"),
        "jpeg_exif6": _encode(rgb, "JPEG", quality=95, exif=_exif(6)),
    }


def _one(build, *batches) -> np.ndarray:
    return run_headrace(build, *batches)[0][0]


def _full(data) -> np.ndarray:
    return _one(lambda x: fn.decoders.image(x), [data])


CROPS = [
    dict(crop=(31, 47), crop_pos_x=0.3, crop_pos_y=0.7),
    dict(crop=(75, 100)),
    dict(crop=(30.5, 40.5), crop_pos_x=0.25, crop_pos_y=0.5, rounding="truncate"),
    dict(crop_h=20.0, crop_w=33.0, crop_pos_x=1.0, crop_pos_y=0.0),
    dict(crop_h=11.0, crop_w=70.5, crop_pos_y=0.9),
    dict(),
]


@pytest.mark.parametrize("name", ["jpeg", "jpeg_444", "png", "webp_or_tiff"])
def test_crop_is_that_window_of_the_full_decode(encoded, name):
    name = "tiff" if name == "webp_or_tiff" else name
    full = _full(encoded[name])
    out = _one(lambda x: fn.decoders.image_crop(x, crop=(31, 47), crop_pos_x=0.3, crop_pos_y=0.7), [encoded[name]])
    y, x = round(0.7 * (75 - 31)), round(0.3 * (100 - 47))
    assert out.shape == (31, 47, 3)
    diff = np.abs(full[y:y + 31, x:x + 47].astype(int) - out)
    assert diff.max() <= (8 if name == "jpeg" else 0)
    assert diff[1:-1, 1:-1].max() <= (2 if name == "jpeg" else 0)


def test_slice_is_that_window_of_the_full_decode(encoded):
    full = _full(encoded["png"])
    out = _one(lambda x: fn.decoders.image_slice(x, start=[10, 5], end=[60, 45]), [encoded["png"]])  # x, y
    np.testing.assert_array_equal(out, full[5:45, 10:60])
    out = _one(lambda x: fn.decoders.image_slice(x, rel_start=[0.5, 0.2], rel_shape=[0.25, 0.4], axis_names="HW"),
               [encoded["png"]])
    np.testing.assert_array_equal(out, full[38:56, 20:60])  # 37.5 rounds half away from zero; end 0.75 * 75


def test_per_sample_positions_and_inputs(encoded):
    """crop_pos_x from a DataNode and per-sample anchor / shape inputs pick each sample's own window."""
    data = [encoded["png"]] * 3
    full = _full(encoded["png"])
    positions = [np.array(p, np.float32) for p in (0.0, 0.5, 1.0)]
    outs = run_headrace(lambda x, p: fn.decoders.image_crop(x, crop=(10, 20), crop_pos_x=p), data, positions)[0]
    for out, left in zip(outs, (0, 40, 80), strict=True):
        np.testing.assert_array_equal(out, full[33:43, left:left + 20])  # 32.5 rounds half away
    anchors = [np.array(a, np.int32) for a in ([0, 0], [7, 3], [50, 60])]
    shapes = [np.array(s, np.int32) for s in ([5, 6], [10, 20], [50, 15])]
    outs = run_headrace(lambda x, a, s: fn.decoders.image_slice(x, a, s), data, anchors, shapes)[0]
    for out, (ax, ay), (sx, sy) in zip(outs, anchors, shapes, strict=True):
        np.testing.assert_array_equal(out, full[ay:ay + sy, ax:ax + sx])


def test_windows_are_in_the_displayed_frame(encoded):
    """EXIF orientation 6 turns the 75x100 image to 100x75: the window is taken there."""
    full = _full(encoded["jpeg_exif6"])
    assert full.shape == (100, 75, 3)
    out = _one(lambda x: fn.decoders.image_crop(x, crop=(90, 20), crop_pos_x=1.0, crop_pos_y=0.0),
               [encoded["jpeg_exif6"]])
    assert out.shape == (90, 20, 3)
    assert np.abs(full[:90, 55:].astype(int) - out).max() <= 8


def test_crop_output_spec_has_the_fixed_size():
    from headrace import pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(name="x")
        return fn.decoders.image_crop(data, crop=(31.9, 47)), fn.decoders.image_crop(data, crop_h=5, crop_w=6)

    p = pipe()
    assert [o.spec.dims for o in p.outputs] == [(31, 47, 3), (5, 6, 3)]
    p.close()


def test_gray_output(encoded):
    out = _one(lambda x: fn.decoders.image_slice(x, rel_start=[0.1, 0.1], rel_shape=[0.5, 0.5],
                                                  output_type=types.GRAY), [encoded["png"]])
    full = _one(lambda x: fn.decoders.image(x, output_type=types.GRAY), [encoded["png"]])
    assert out.shape == (37, 50, 1)  # rows 7.5 (rounds to 8) to 45
    np.testing.assert_array_equal(out, full[8:45, 10:60])


def test_windows_outside_the_image_name_the_op_sample_and_argument(encoded):
    data = [encoded["png"], encoded["png"]]
    with pytest.raises(SampleError, match=r"decoders.image_crop .*sample 0.*argument 'crop'.*not valid.*\[75 x 100\]"):
        run_headrace(lambda x: fn.decoders.image_crop(x, crop=(80, 47)), data)
    with pytest.raises(SampleError, match=r"decoders.image_slice .*sample 1.*anchor and shape inputs.*not valid"):
        run_headrace(lambda x, a, s: fn.decoders.image_slice(x, a, s), data,
                     [np.array([0.1, 0.1], np.float32), np.array([0.8, 0.8], np.float32)],
                     [np.array([0.5, 0.5], np.float32)] * 2)
    with pytest.raises(SampleError, match=r"decoders.image_slice .*argument 'shape': needs one value per sliced axis"):
        run_headrace(lambda x: fn.decoders.image_slice(x, start=[0, 0], shape=[10]), data)
    with pytest.raises(SampleError, match=r"decoders.image_slice .*only the H and W axes"):
        run_headrace(lambda x: fn.decoders.image_slice(x, start=[0], shape=[1], axes=[2]), data)
    with pytest.raises(SchemaError, match=r"decoders.image_crop .*crop and crop_h exclude each other"):
        run_headrace(lambda x: fn.decoders.image_crop(x, crop=(10, 10), crop_h=4), data)
    with pytest.raises(SchemaError, match=r"decoders.image_crop .*crop_h and crop_w must be given together"):
        run_headrace(lambda x: fn.decoders.image_crop(x, crop_h=4), data)
    with pytest.raises(SchemaError, match=r"decoders.image_slice .*rel_shape and shape exclude each other"):
        run_headrace(lambda x: fn.decoders.image_slice(x, shape=[1, 1], rel_shape=[0.5, 0.5]), data)


@pytest.mark.parametrize("c_api", [True, False])
def test_mixed_host_half_cuts_the_cpu_windows(encoded, c_api):
    """MixedDecoder.prepare with a region rule (no GPU needed): each sample's window is the CPU kernel's, and a
    window outside the image fails that sample."""
    from headrace.schema import get_schema
    from headrace_kernels.cpu.decode_roi import crop_region
    from headrace_kernels.gpu.decode import MixedDecoder
    from headrace_kernels.registry import SampleFailureError

    args = get_schema("decoders.image_crop").resolve({"crop": [31.0, 47.0], "crop_pos_x": 0.3})
    decoder = MixedDecoder(args, 0, 2, random_crop=False)
    if c_api and not decoder.c_api:
        pytest.skip("nvImageCodec's C library is not available")
    decoder.c_api = c_api
    batch = [encoded["jpeg"], encoded["png"], encoded["jpeg_exif6"]]
    prepared = decoder.prepare(batch, 1, 0, region=lambda i, h, w: crop_region(h, w, args))
    sizes = [(75, 100), (75, 100), (100, 75)]
    assert prepared.windows == [crop_region(h, w, args) for h, w in sizes]
    if c_api:
        assert [tuple(s) for s in prepared.shapes.tolist()] == [(31, 47, 3)] * 3
        prepared.streams.close()
    with pytest.raises(SampleFailureError, match="not valid") as failure:
        decoder.prepare(batch, 1, 0, region=lambda i, h, w: crop_region(h, w, {**args, "crop": [90.0, 10.0]}))
    assert failure.value.index == 0


SLICE_BATCHES = [  # (heights, widths, anchors, shapes, image_slice arguments): float inputs
    ([75, 100, 480], [100, 75, 640], [[0.1, 0.2], [0.0, 0.0], [0.25, 0.5]], [[0.5, 0.5], [1.0, 1.0], [0.5, 0.25]],
     {}),
    ([75, 75], [100, 100], [[0.333, 0.125], [0.5, 0.5]], [[0.3, 0.51], [0.5, 0.5]], {"axis_names": "HW"}),
    ([75, 75], [100, 100], [[10.0, 5.5], [0.5, 2.5]], [[20.0, 30.0], [3.5, 4.5]],
     {"normalized_anchor": False, "normalized_shape": False}),
    ([75, 75], [100, 100], [[10.0, 5.0], [0.0, 0.0]], [[0.5, 0.25], [0.2, 0.2]], {"normalized_anchor": False}),
    ([75, 75], [100, 100], [[0.1, 0.1], [0.5, 0.5]], [[10.0, 10.0], [20.0, 20.0]], {"normalized_shape": False}),
]


@pytest.mark.parametrize("heights, widths, anchors, shapes, kwargs", SLICE_BATCHES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_slice_windows_are_the_per_sample_ones(heights, widths, anchors, shapes, kwargs, dtype):
    """slice_regions (the mixed decoder's one pass over a batch) gives slice_region's windows sample by sample, and
    None, for the per-sample rules and their errors, wherever a window is empty or outside or an input is unusual."""
    from headrace.schema import get_schema
    from headrace_kernels.cpu.decode_roi import slice_region, slice_regions

    args = get_schema("decoders.image_slice").resolve(kwargs)
    anchors, shapes = [np.asarray(a, dtype) for a in anchors], [np.asarray(s, dtype) for s in shapes]
    heights, widths = np.asarray(heights, np.int64), np.asarray(widths, np.int64)
    got = slice_regions(heights, widths, args, anchors, shapes)
    want = [slice_region(int(h), int(w), args, a, s) for h, w, a, s in zip(heights, widths, anchors, shapes,
                                                                          strict=True)]
    assert got is not None and [tuple(row) for row in got.tolist()] == want
    # the rows of one array each (the CPU stage's dense outputs): the same windows from the arrays themselves
    rows = Column.of_dense(np.stack(anchors)), Column.of_dense(np.stack(shapes))
    np.testing.assert_array_equal(slice_regions(heights, widths, args, *rows), got)
    assert slice_regions(heights, widths, args, rows[0], Column.of_dense(np.stack(shapes)[:, :1])) is None
    assert slice_regions(heights, widths, args, Column.of_dense(np.stack(anchors).astype(np.int32)), rows[1]) is None
    outside = [a + np.asarray([0.0, 1e4], dtype) for a in anchors]
    assert slice_regions(heights, widths, args, outside, shapes) is None
    ints = [np.asarray(a, np.int32) for a in anchors]
    assert slice_regions(heights, widths, args, ints, [np.asarray(s, np.int32) for s in shapes]) is None
    assert slice_regions(heights, widths, {**args, "rel_start": [0.1, 0.1]}, anchors, shapes) is None


# DALI ------------------------------------------------------------------------------------------------------------

@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("kwargs", CROPS)
def test_image_crop_matches_dali(encoded, kwargs):
    for name in ("jpeg", "jpeg_progressive", "png", "webp", "jpeg_exif6"):
        if name == "jpeg_exif6" and "crop" in kwargs and kwargs["crop"] == (75, 100):
            continue  # turned, the image is 100x75: the window does not fit (an error in both)
        ours = _one(lambda x: fn.decoders.image_crop(x, **kwargs), [encoded[name]])
        dali = run_dali(lambda x, f: f.decoders.image_crop(x, device="cpu", **kwargs), [encoded[name]])[0][0]
        assert ours.shape == dali.shape, (name, kwargs)
        np.testing.assert_array_equal(ours, dali, err_msg=f"{name} {kwargs}")


@pytest.mark.dali
@needs_dali
def test_per_sample_crop_sizes_match_dali(encoded):
    crops = [np.array(c, np.float32) for c in ((10.7, 20.2), (30, 40), (75, 1))]
    positions = [np.array(p, np.float32) for p in (0.1, 0.9, 0.5)]
    data = [encoded["jpeg"]] * 3
    ours = run_headrace(lambda x, c, p: fn.decoders.image_crop(x, crop=c, crop_pos_y=p), data, crops, positions)[0]
    dali = run_dali(lambda x, c, p, f: f.decoders.image_crop(x, crop=c, crop_pos_y=p), data, crops, positions)[0]
    for o, d in zip(ours, dali, strict=True):
        assert o.shape == d.shape
        np.testing.assert_array_equal(o, d)


SLICES = [
    dict(rel_start=(0.1, 0.2), rel_shape=(0.5, 0.6)),
    dict(rel_start=(0.13, 0.27), rel_end=(0.71, 0.93)),
    dict(start=(3, 7), shape=(40, 20)),
    dict(start=(3, 7), end=(41, 69), axis_names="HW"),
    dict(rel_start=(0.25, 0.5), shape=(11, 13), axes=[0, 1]),
]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("kwargs", SLICES)
def test_image_slice_arguments_match_dali(encoded, kwargs):
    for name in ("jpeg", "png", "jpeg_exif6"):
        ours = _one(lambda x: fn.decoders.image_slice(x, **kwargs), [encoded[name]])
        dali = run_dali(lambda x, f: f.decoders.image_slice(x, device="cpu", **kwargs), [encoded[name]])[0][0]
        assert ours.shape == dali.shape, (name, kwargs)
        np.testing.assert_array_equal(ours, dali, err_msg=f"{name} {kwargs}")


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("dtype, normalized", [(np.float32, True), (np.float32, False), (np.int32, False)])
def test_image_slice_inputs_match_dali(encoded, dtype, normalized):
    if dtype == np.float32 and normalized:
        anchors, shapes = [(0.1, 0.2), (0.333, 0.05)], [(0.5, 0.6), (0.4, 0.9)]
    else:
        anchors, shapes = [(10, 20), (33, 5)], [(50, 41), (27, 60)]
    anchors = [np.array(a, dtype) for a in anchors]
    shapes = [np.array(s, dtype) for s in shapes]
    data = [encoded["jpeg_444"], encoded["webp"]]
    flags = dict(normalized_anchor=normalized, normalized_shape=normalized)
    ours = run_headrace(lambda x, a, s: fn.decoders.image_slice(x, a, s, **flags), data, anchors, shapes)[0]
    dali = run_dali(lambda x, a, s, f: f.decoders.image_slice(x, a, s, device="cpu", **flags), data, anchors,
                    shapes)[0]
    for o, d in zip(ours, dali, strict=True):
        assert o.shape == d.shape
        np.testing.assert_array_equal(o, d)


# GPU -------------------------------------------------------------------------------------------------------------

def _run(device: str, build, *batches) -> list[np.ndarray]:
    """build(device, *inputs) over the batches fed as external sources; the output samples on the host."""
    from headrace import pipeline_def

    names = [f"x{i}" for i in range(len(batches))]

    @pipeline_def(batch_size=len(batches[0]), num_threads=2, device_id=0, seed=1)
    def pipe():
        return build(device, *[fn.external_source(name=n) for n in names])

    p = pipe()
    try:
        (out,) = p.run(**dict(zip(names, batches, strict=True)))
        if out.device == "gpu":
            out = out.as_cpu()
        return [np.array(out.at(i)) for i in range(len(out))]
    finally:
        p.close()


def _mixed_and_cpu(build, *batches) -> tuple[list, list]:
    return _run("cpu", build, *batches), _run("mixed", build, *batches)


def _close(cpu: np.ndarray, gpu: np.ndarray, lossless: bool) -> None:
    """test_gpu_decode's bounds: exact for lossless formats, else mean <= 3 and 99th percentile <= 16 levels."""
    assert cpu.shape == gpu.shape and cpu.dtype == gpu.dtype == np.uint8
    diff = np.abs(cpu.astype(np.int16) - gpu.astype(np.int16))
    if lossless:
        assert diff.max() == 0
    else:
        assert diff.mean() <= 3.0 and np.percentile(diff, 99) <= 16, (diff.mean(), np.percentile(diff, 99))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["png", "jpeg_444", "jpeg_exif6"])
def test_mixed_image_crop_matches_cpu(encoded, name):
    positions = [np.array(p, np.float32) for p in (0.0, 0.4, 1.0)]
    cpu, gpu = _mixed_and_cpu(lambda d, x, p: fn.decoders.image_crop(x, device=d, crop=(33, 41), crop_pos_x=p,
                                                                      crop_pos_y=0.2),
                              [encoded[name]] * 3, positions)
    for c, g in zip(cpu, gpu, strict=True):
        assert c.shape == (33, 41, 3)
        _close(c, g, name == "png")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["png", "jpeg"])
def test_mixed_image_slice_matches_cpu(encoded, name):
    anchors = [np.array(a, np.float32) for a in ((0.1, 0.2), (0.5, 0.0))]
    shapes = [np.array(s, np.float32) for s in ((0.5, 0.6), (0.5, 1.0))]
    cpu, gpu = _mixed_and_cpu(lambda d, x, a, s: fn.decoders.image_slice(x, a, s, device=d),
                              [encoded[name]] * 2, anchors, shapes)
    for c, g in zip(cpu, gpu, strict=True):
        _close(c, g, name == "png")


@pytest.mark.gpu
def test_mixed_window_outside_the_image_fails_the_sample(encoded):
    with pytest.raises(SampleError, match=r"decoders.image_crop .*sample 1.*not valid"):
        _run("mixed", lambda d, x, c: fn.decoders.image_crop(x, device=d, crop=c), [encoded["png"]] * 2,
             [np.array([10, 10], np.float32), np.array([80, 10], np.float32)])
