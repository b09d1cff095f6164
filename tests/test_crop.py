"""crop, crop_mirror_normalize, flip and random_resized_crop against numpy formulas, and DALI's CPU build.

Tolerances: crop and flip are exact. crop_mirror_normalize's float32 output is within 1e-5 relative of the numpy
formula (x - mean) / std * scale + shift in float32; FLOAT16 within float16 rounding (rtol 1e-3); integer outputs
exact after rounding half away from zero and saturating.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oprun import needs_dali, run_dali, run_headrace

from headrace import SampleError, SchemaError, fn, pipeline_def, types


@pytest.fixture(scope="module")
def image(rgb_image):
    return np.ascontiguousarray(rgb_image[:60, :80])


def anchor(extent: int, crop: int, pos: float) -> int:
    """DALI's anchor: pos * (extent - crop), rounded half away from zero."""
    v = pos * (extent - crop)
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def crop_reference(image, crop_hw, pos_xy=(0.5, 0.5), fill=(0,)) -> np.ndarray:
    """The window of `image` at DALI's anchor, padded with `fill` where it leaves the image."""
    h, w, c = image.shape
    ch, cw = crop_hw
    y, x = anchor(h, ch, pos_xy[1]), anchor(w, cw, pos_xy[0])
    out = np.empty((ch, cw, c), image.dtype)
    out[...] = np.broadcast_to(np.asarray(fill, np.float64), (c,)).astype(image.dtype)
    ys, xs = slice(max(y, 0), min(y + ch, h)), slice(max(x, 0), min(x + cw, w))
    out[ys.start - y:ys.stop - y, xs.start - x:xs.stop - x] = image[ys, xs]
    return out


# crop ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("crop_hw, pos", [((20, 30), (0.5, 0.5)), ((20, 30), (0.0, 0.0)), ((20, 30), (1.0, 1.0)),
                                          ((21, 33), (0.3, 0.7)), ((60, 80), (0.5, 0.5)), ((1, 1), (0.99, 0.01))])
def test_crop_window(image, crop_hw, pos):
    out = run_headrace(lambda x: fn.crop(x, crop=crop_hw, crop_pos_x=pos[0], crop_pos_y=pos[1]), [image])[0][0]
    np.testing.assert_array_equal(out, crop_reference(image, crop_hw, pos))


def test_crop_h_w_and_per_sample_positions(image):
    pos = [np.float32(0.0), np.float32(1.0)]
    out = run_headrace(lambda x, p: fn.crop(x, crop_h=10, crop_w=12, crop_pos_x=p, crop_pos_y=p), [image, image],
                       pos)[0]
    np.testing.assert_array_equal(out[0], image[:10, :12])
    np.testing.assert_array_equal(out[1], image[-10:, -12:])


@pytest.mark.parametrize("crop_hw, pos", [((80, 100), (0.5, 0.5)), ((70, 40), (0.0, 1.0)), ((61, 81), (0.5, 0.5)),
                                          ((10, 100), (0.2, 0.2))])
@pytest.mark.parametrize("fill", [(0,), (7,), (10, 20, 30)])
def test_crop_out_of_bounds_pad(image, crop_hw, pos, fill):
    out = run_headrace(lambda x: fn.crop(x, crop=crop_hw, crop_pos_x=pos[0], crop_pos_y=pos[1],
                                         out_of_bounds_policy="pad", fill_values=list(fill)), [image])[0][0]
    np.testing.assert_array_equal(out, crop_reference(image, crop_hw, pos, fill))


def test_crop_out_of_bounds_trim(image):
    out = run_headrace(lambda x: fn.crop(x, crop=(80, 30), crop_pos_x=0.0, out_of_bounds_policy="trim_to_shape"),
                       [image])[0][0]
    np.testing.assert_array_equal(out, image[:, :30])


def test_crop_out_of_bounds_error_names_op_and_policy(image):
    with pytest.raises(SampleError, match="crop.*out_of_bounds_policy"):
        run_headrace(lambda x: fn.crop(x, crop=(80, 30)), [image])


def test_crop_dtype(image):
    out = run_headrace(lambda x: fn.crop(x, crop=(10, 10), dtype=types.FLOAT), [image])[0][0]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, crop_reference(image, (10, 10)).astype(np.float32))


# flip ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("horizontal, vertical", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_flip(image, horizontal, vertical):
    out = run_headrace(lambda x: fn.flip(x, horizontal=horizontal, vertical=vertical), [image])[0][0]
    want = image[::-1 if vertical else 1, ::-1 if horizontal else 1]
    np.testing.assert_array_equal(out, want)


def test_flip_per_sample(image):
    flags = [np.int32(1), np.int32(0)]
    out = run_headrace(lambda x, f: fn.flip(x, horizontal=f), [image, image], flags)[0]
    np.testing.assert_array_equal(out[0], image[:, ::-1])
    np.testing.assert_array_equal(out[1], image)


# crop_mirror_normalize --------------------------------------------------------------------------------------------

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def cmn_reference(image, *, crop_hw=None, pos=(0.5, 0.5), mirror=0, mean=(0.0,), std=(1.0,), scale=1.0, shift=0.0,
                  dtype=np.float32, layout="CHW", pad_output=False, fill=(0.0,), policy="error"):
    """DALI's definition: normalize the image's pixels in float32; with out_of_bounds_policy='pad', pixels outside
    the image and the extra channel of pad_output take fill_values as they are (output values, not normalized);
    with another policy fill_values are unused and the extra channel is 0."""
    h, w, c = image.shape
    crop_hw = crop_hw or (h, w)
    out_c = c + 1 if pad_output else c
    fill = fill if policy == "pad" else (0.0,)
    mean = np.broadcast_to(np.asarray(mean, np.float32), (c,))
    std = np.broadcast_to(np.asarray(std, np.float32), (c,))
    values = (image.astype(np.float32) - mean) * (np.float32(scale) / std) + np.float32(shift)
    y, x = anchor(h, crop_hw[0], pos[1]), anchor(w, crop_hw[1], pos[0])
    out = np.empty((*crop_hw, out_c), np.float32)
    out[...] = np.broadcast_to(np.asarray(fill, np.float32), (out_c,))
    ys, xs = slice(max(y, 0), min(y + crop_hw[0], h)), slice(max(x, 0), min(x + crop_hw[1], w))
    out[ys.start - y:ys.stop - y, xs.start - x:xs.stop - x, :c] = values[ys, xs]
    if mirror:
        out = out[:, ::-1]
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = np.clip(np.sign(out) * np.floor(np.abs(out) + 0.5), info.min, info.max)
    out = out.astype(dtype)
    return out.transpose(2, 0, 1) if layout == "CHW" else out


def assert_cmn_close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-3)
    elif want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["FLOAT", "FLOAT16", "UINT8", "INT8", "INT16", "INT32"])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_cmn_normalize(image, dtype, layout):
    kwargs = dict(mean=MEAN, std=STD, dtype=getattr(types, dtype), output_layout=layout)
    if dtype in ("UINT8", "INT8", "INT16", "INT32"):  # integer outputs need a useful range
        kwargs.update(scale=64.0, shift=128.0 if dtype == "UINT8" else 0.0)
    out = run_headrace(lambda x: fn.crop_mirror_normalize(x, **kwargs), [image])[0][0]
    want = cmn_reference(image, mean=MEAN, std=STD, dtype=types.to_numpy_dtype(getattr(types, dtype)), layout=layout,
                         scale=kwargs.get("scale", 1.0), shift=kwargs.get("shift", 0.0))
    assert_cmn_close(out, want)


@pytest.mark.parametrize("mirror", [0, 1])
@pytest.mark.parametrize("crop_hw, pos", [((40, 50), (0.5, 0.5)), ((40, 50), (0.1, 0.9)), ((70, 90), (0.5, 0.5))])
@pytest.mark.parametrize("pad_output", [False, True])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_cmn_crop_mirror_pad(image, mirror, crop_hw, pos, pad_output, layout):
    policy = "pad" if crop_hw[0] > image.shape[0] else "error"
    out = run_headrace(lambda x: fn.crop_mirror_normalize(
        x, crop=crop_hw, crop_pos_x=pos[0], crop_pos_y=pos[1], mirror=mirror, mean=MEAN, std=STD,
        pad_output=pad_output, out_of_bounds_policy=policy, fill_values=[0.5], output_layout=layout), [image])[0][0]
    want = cmn_reference(image, crop_hw=crop_hw, pos=pos, mirror=mirror, mean=MEAN, std=STD, pad_output=pad_output,
                         fill=(0.5,), layout=layout, policy=policy)
    assert_cmn_close(out, want)


def test_cmn_per_sample_mirror_and_float_input(image):
    flags = [np.int32(0), np.int32(1)]
    src = image.astype(np.float32) / 3
    out = run_headrace(lambda x, m: fn.crop_mirror_normalize(x, mirror=m, mean=[10.0], std=[2.0], scale=0.5,
                                                             shift=1.0, output_layout="HWC"), [src, src], flags)[0]
    for got, flag in zip(out, (0, 1), strict=True):
        assert_cmn_close(got, cmn_reference(src, mirror=flag, mean=[10.0], std=[2.0], scale=0.5, shift=1.0,
                                            layout="HWC"))


def test_cmn_wrong_number_of_means_names_the_op(image):
    with pytest.raises(SampleError, match="crop_mirror_normalize.*mean"):
        run_headrace(lambda x: fn.crop_mirror_normalize(x, mean=[1.0, 2.0]), [image])


# random_resized_crop ----------------------------------------------------------------------------------------------

def test_random_resized_crop_output_and_content(image):
    """Every output is `size`; the content is a resized window of the input, so its colours stay in range and a
    constant image stays constant."""
    flat = np.full((60, 80, 3), 77, np.uint8)
    outs = run_headrace(lambda x: fn.random_resized_crop(x, size=[32, 48]), [image, flat, image, flat],
                        iterations=3)
    for batch in outs:
        for got in batch[0]:
            assert got.shape == (32, 48, 3) and got.dtype == np.uint8
        np.testing.assert_array_equal(batch[0][1], np.full((32, 48, 3), 77, np.uint8))


def test_random_resized_crop_full_window_is_a_plain_resize(image):
    """With area and aspect ratio pinned to the whole image the window is the image: same as fn.resize."""
    aspect = image.shape[1] / image.shape[0]
    rrc, plain = run_headrace(lambda x: (fn.random_resized_crop(x, size=[30, 40], random_area=[1.0, 1.0],
                                                                random_aspect_ratio=[aspect, aspect]),
                                         fn.resize(x, size=[30, 40])), [image])
    np.testing.assert_array_equal(rrc[0], plain[0])


def test_random_resized_crop_depends_on_seed_only(image):
    def run(seed, threads):
        return run_headrace(lambda x: fn.random_resized_crop(x, size=[16, 16]), [image] * 6, seed=seed,
                            num_threads=threads)[0]

    a, b, c = run(3, 1), run(3, 2), run(4, 1)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_random_resized_crop_requires_size():
    with pytest.raises(SchemaError, match="random_resized_crop.*size"):
        @pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            return fn.random_resized_crop(fn.external_source(name="x"))

        pipe()


# DALI ------------------------------------------------------------------------------------------------------------

@pytest.mark.dali
@needs_dali
def test_crop_matches_dali(image):
    cases = [dict(crop=(20, 30)), dict(crop=(21, 33), crop_pos_x=0.3, crop_pos_y=0.7),
             dict(crop=(80, 100), out_of_bounds_policy="pad", fill_values=[5.0]),
             dict(crop=(65, 95), crop_pos_x=0.5, crop_pos_y=0.5, out_of_bounds_policy="pad", fill_values=[1, 2, 3]),
             dict(crop=(70, 40), crop_pos_x=0.0, crop_pos_y=1.0, out_of_bounds_policy="pad"),
             dict(crop=(80, 30), out_of_bounds_policy="trim_to_shape"), dict(crop_h=10, crop_w=12),
             dict(crop=(30.5, 40.7)), dict(crop_h=20.6, crop_w=10.5, crop_pos_x=0.3)]  # fractions truncate
    for kwargs in cases:
        ours = run_headrace(lambda x, kw=kwargs: fn.crop(x, **kw), [image])[0][0]
        dali = run_dali(lambda x, f, kw=kwargs: f.crop(x, **kw), [image])[0][0]
        np.testing.assert_array_equal(ours, dali, err_msg=str(kwargs))


@pytest.mark.dali
@needs_dali
def test_crop_mirror_normalize_matches_dali(image):
    cases = [dict(dtype=types.FLOAT16, output_layout="CHW", mean=MEAN, std=STD, mirror=1),
             dict(dtype=types.FLOAT, output_layout="HWC", mean=MEAN, std=STD, crop=(40, 50), crop_pos_x=0.2),
             dict(dtype=types.FLOAT, crop=(70, 90), out_of_bounds_policy="pad", fill_values=[3.0], mean=MEAN,
                  std=STD, pad_output=True),
             dict(dtype=types.UINT8, mean=[128.0], std=[1.0], scale=2.0, shift=100.0, output_layout="HWC"),
             dict(dtype=types.FLOAT, crop=(70, 90), crop_pos_x=0.2, crop_pos_y=0.9, out_of_bounds_policy="pad",
                  fill_values=[7.0], mirror=1, output_layout="HWC", pad_output=True),
             dict(dtype=types.INT8, mean=MEAN, std=STD, scale=50.0),
             dict(dtype=types.FLOAT, crop=(30.5, 40.7), mean=MEAN, std=STD)]
    for kwargs in cases:
        ours = run_headrace(lambda x, kw=kwargs: fn.crop_mirror_normalize(x, **kw), [image])[0][0]
        dali = run_dali(lambda x, f, kw=kwargs: f.crop_mirror_normalize(x, **kw), [image])[0][0]
        assert ours.dtype == dali.dtype and ours.shape == dali.shape, kwargs
        if ours.dtype.kind == "f":
            np.testing.assert_allclose(ours.astype(np.float32), dali.astype(np.float32), rtol=1e-3, atol=1e-3,
                                       err_msg=str(kwargs))
        else:
            assert np.abs(ours.astype(int) - dali.astype(int)).max() <= 1, kwargs


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("kwargs", [
    dict(crop=(20, 20), dtype=types.UINT8, fill_values=[7]),  # inside, policy 'error': the 4th channel is 0
    dict(crop=(20, 20), dtype=types.FLOAT, fill_values=[7], mirror=1, mean=[10.0], std=[2.0]),
    dict(crop=(20, 20), dtype=types.UINT8, fill_values=[7, 8, 9]),  # unused without 'pad': any count
    dict(crop=(20, 20), dtype=types.UINT8, fill_values=[7], out_of_bounds_policy="pad"),  # inside, 'pad': 7
    dict(crop=(80, 100), dtype=types.UINT8, fill_values=[7], out_of_bounds_policy="pad", output_layout="HWC"),
    dict(crop=(80, 100), dtype=types.FLOAT, fill_values=[7, 8, 9, 10], out_of_bounds_policy="pad", mirror=1),
    dict(crop=(80, 100), dtype=types.UINT8, fill_values=[7], out_of_bounds_policy="trim_to_shape"),
])
def test_crop_mirror_normalize_pad_output_fill_matches_dali(image, kwargs):
    """The pad_output channel: fill_values with out_of_bounds_policy='pad' (padding or not), 0 otherwise."""
    ours = run_headrace(lambda x: fn.crop_mirror_normalize(x, pad_output=True, **kwargs), [image])[0][0]
    dali = run_dali(lambda x, f: f.crop_mirror_normalize(x, pad_output=True, **kwargs), [image])[0][0]
    assert ours.dtype == dali.dtype and ours.shape == dali.shape
    np.testing.assert_allclose(ours.astype(np.float32), dali.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_crop_mirror_normalize_pad_fill_count_is_checked(image):
    """With out_of_bounds_policy='pad', fill_values give one value or one per output channel (DALI fails too)."""
    with pytest.raises(SampleError, match="fill_values.*4"):
        run_headrace(lambda x: fn.crop_mirror_normalize(x, crop=(20, 20), pad_output=True, fill_values=[1, 2, 3],
                                                        out_of_bounds_policy="pad"), [image])


ROUNDING_CASES = [dict(crop=(21, 33), crop_pos_x=0.5, crop_pos_y=0.5),  # 39 / 2 and 47 / 2: a half either way
                  dict(crop=(20, 30), crop_pos_x=0.77, crop_pos_y=0.31),
                  dict(crop=(70, 95), crop_pos_x=0.3, crop_pos_y=0.5, out_of_bounds_policy="pad")]  # negative anchor


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("rounding", ["round", "truncate"])
@pytest.mark.parametrize("kwargs", ROUNDING_CASES)
def test_crop_rounding_matches_dali(image, rounding, kwargs):
    """`rounding`: the window's anchor pos * (extent - crop) rounded half away from zero, or truncated."""
    for op, extra in (("crop", {}), ("crop_mirror_normalize", {"dtype": types.UINT8, "output_layout": "HWC"})):
        ours = run_headrace(lambda x, o=op, e=extra: getattr(fn, o)(x, rounding=rounding, **kwargs, **e), [image])
        dali = run_dali(lambda x, f, o=op, e=extra: getattr(f, o)(x, rounding=rounding, **kwargs, **e), [image])
        np.testing.assert_array_equal(ours[0][0], dali[0][0], err_msg=op)


def test_crop_truncate_moves_a_half_pixel_anchor_down(image):
    """60 - 21 = 39 rows to spare: crop_pos_y 0.5 gives 19.5, which 'round' makes 20 and 'truncate' 19."""
    rounded, truncated = run_headrace(lambda x: (fn.crop(x, crop=(21, 80)), fn.crop(x, crop=(21, 80),
                                                                                    rounding="truncate")), [image])
    np.testing.assert_array_equal(rounded[0], image[20:41])
    np.testing.assert_array_equal(truncated[0], image[19:40])


@pytest.mark.gpu
@pytest.mark.parametrize("kwargs", ROUNDING_CASES)
def test_gpu_crop_rounding_is_the_cpu_kernels(image, kwargs):
    from gpu_helpers import cpu_and_gpu, max_level_difference

    for op in ("crop", "crop_mirror_normalize"):
        cpu, gpu_out = cpu_and_gpu([image, image[:50, :77]], lambda d, dev, o=op: getattr(fn, o)(
            d, rounding="truncate", **kwargs))
        assert max_level_difference(cpu, gpu_out) == 0
