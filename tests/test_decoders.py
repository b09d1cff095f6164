"""decoders.image and decoders.image_random_crop against Pillow / OpenCV decodes of the same bytes, and DALI.

Tolerances: RGB/BGR decodes are exact (the same libjpeg-turbo, libpng, libtiff, libwebp arithmetic); a CMYK JPEG
within 1 of Pillow's conversion; GRAY of a JPEG exact against libjpeg's own luma (Pillow's draft mode), of other
formats within 1 of the BT.601 luma of the RGB decode; YCbCr (DALI's BT.601 studio range) within 1 of the formula.
"""

from __future__ import annotations

import io
import math

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oprun import needs_dali, run_dali, run_headrace
from PIL import Image, ImageOps

from headrace import fn, types
from headrace.data.synthetic import synthetic_image
from headrace_kernels.windows import random_crop_window


def pil_encode(image: Image.Image, fmt: str, **kwargs) -> np.ndarray:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kwargs)
    return np.frombuffer(buffer.getvalue(), np.uint8)


def pil_decode_rgb(data: np.ndarray) -> np.ndarray:
    return np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data.tobytes()))).convert("RGB"))


@pytest.fixture(scope="module")
def picture():
    return synthetic_image(np.random.default_rng(5), 75, 100)


def _exif(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


@pytest.fixture(scope="module")
def encoded(picture):
    rgb = Image.fromarray(picture)
    return {
        "jpeg": pil_encode(rgb, "JPEG", quality=90),
        "jpeg_progressive": pil_encode(rgb, "JPEG", quality=90, progressive=True),
        "jpeg_444": pil_encode(rgb, "JPEG", quality=95, subsampling=0),
        "jpeg_gray": pil_encode(rgb.convert("L"), "JPEG", quality=90),
        "jpeg_cmyk": pil_encode(rgb.convert("CMYK"), "JPEG", quality=95),
        "png": pil_encode(rgb, "PNG"),
        "png_rgba": pil_encode(rgb.convert("RGBA"), "PNG"),
        "png_gray": pil_encode(rgb.convert("L"), "PNG"),
        "bmp": pil_encode(rgb, "BMP"),
        "tiff": pil_encode(rgb, "TIFF"),
        "webp_lossless": pil_encode(rgb, "WEBP", lossless=True),
        "webp": pil_encode(rgb, "WEBP", quality=90),
        **{f"jpeg_exif{o}": pil_encode(rgb, "JPEG", quality=95, exif=_exif(o)) for o in range(1, 9)},
    }


def decode(data, **kwargs) -> np.ndarray:
    return run_headrace(lambda x: fn.decoders.image(x, **kwargs), [data])[0][0]


FORMATS = ["jpeg", "jpeg_progressive", "jpeg_444", "jpeg_gray", "png", "png_rgba", "png_gray", "bmp", "tiff",
           "webp_lossless", "webp"]


@pytest.mark.parametrize("name", FORMATS)
def test_rgb_decode_matches_pillow_and_opencv(encoded, name):
    data = encoded[name]
    out = decode(data)
    assert out.dtype == np.uint8 and out.ndim == 3 and out.shape[2] == 3
    np.testing.assert_array_equal(out, pil_decode_rgb(data))
    bgr = cv2.imdecode(data, cv2.IMREAD_COLOR)
    np.testing.assert_array_equal(out, bgr[..., ::-1])


def test_lossless_formats_give_back_the_pixels(encoded, picture):
    for name in ("png", "bmp", "tiff", "webp_lossless"):
        np.testing.assert_array_equal(decode(encoded[name]), picture)


def test_cmyk_jpeg(encoded):
    out = decode(encoded["jpeg_cmyk"])
    assert np.abs(out.astype(int) - pil_decode_rgb(encoded["jpeg_cmyk"])).max() <= 1


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation(encoded, picture, orientation):
    data = encoded[f"jpeg_exif{orientation}"]
    out = decode(data)
    np.testing.assert_array_equal(out, pil_decode_rgb(data))
    assert out.shape[:2] == (picture.shape[:2] if orientation <= 4 else picture.shape[1::-1])
    raw = decode(data, adjust_orientation=False)
    np.testing.assert_array_equal(raw, np.asarray(Image.open(io.BytesIO(data.tobytes())).convert("RGB")))


@pytest.mark.parametrize("name", ["jpeg", "png", "jpeg_exif6", "webp"])
def test_bgr_is_rgb_reversed(encoded, name):
    np.testing.assert_array_equal(decode(encoded[name], output_type=types.BGR), decode(encoded[name])[..., ::-1])


@pytest.mark.parametrize("name", ["jpeg", "jpeg_gray", "jpeg_444", "png", "png_gray", "bmp", "jpeg_exif6"])
def test_gray(encoded, name):
    data = encoded[name]
    out = decode(data, output_type=types.GRAY)
    assert out.shape[2] == 1 and out.dtype == np.uint8
    if name.startswith("jpeg"):
        # libjpeg's luma, straight from the Y plane (Pillow's draft mode asks libjpeg for grayscale)
        source = Image.open(io.BytesIO(data.tobytes()))
        source.draft("L", source.size)
        ref = np.asarray(ImageOps.exif_transpose(source).convert("L"))
        np.testing.assert_array_equal(out[..., 0], ref)
    else:
        ref = cv2.cvtColor(pil_decode_rgb(data), cv2.COLOR_RGB2GRAY)
        assert np.abs(out[..., 0].astype(int) - ref).max() <= 1


def ycbcr_reference(rgb: np.ndarray) -> np.ndarray:
    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    y = 16 + 0.257 * r + 0.504 * g + 0.098 * b
    cb = 128 - 0.148 * r - 0.291 * g + 0.439 * b
    cr = 128 + 0.439 * r - 0.368 * g - 0.071 * b
    return np.stack([y, cb, cr], -1)


@pytest.mark.parametrize("name", ["jpeg", "png", "png_gray"])
def test_ycbcr_is_bt601_studio_range(encoded, name):
    out = decode(encoded[name], output_type=types.YCbCr)
    ref = ycbcr_reference(decode(encoded[name]))
    assert np.abs(out - ref).max() <= 1
    assert 16 <= out[..., 0].min() and out[..., 0].max() <= 235


def test_batch_of_mixed_formats_keeps_each_sample(encoded):
    names = ["jpeg", "png_gray", "webp", "jpeg_exif6", "tiff"]
    outs = run_headrace(lambda x: fn.decoders.image(x), [encoded[n] for n in names])[0]
    for name, out in zip(names, outs, strict=True):
        np.testing.assert_array_equal(out, pil_decode_rgb(encoded[name]))


# image_random_crop -----------------------------------------------------------------------------------------------

def locate(window: np.ndarray, full: np.ndarray) -> tuple[int, int, float]:
    """Where `window` lies in `full` (best match), and the largest pixel difference there."""
    scores = cv2.matchTemplate(full.astype(np.float32), window.astype(np.float32), cv2.TM_SQDIFF)
    _, _, (x, y), _ = cv2.minMaxLoc(scores)
    h, w = window.shape[:2]
    return y, x, float(np.abs(full[y:y + h, x:x + w].astype(int) - window).max())


@pytest.mark.parametrize("name", ["jpeg", "jpeg_444", "png", "webp_lossless", *(f"jpeg_exif{o}" for o in range(2, 9))])
def test_random_crop_is_a_window_of_the_full_decode(encoded, name):
    """Each crop lies inside the image and equals that window of the full decode (ROI decode of a 4:2:0 JPEG may
    differ by a few levels on the window's edge rows, where chroma is upsampled from outside it)."""
    data = encoded[name]
    full = decode(data)
    batches = run_headrace(lambda x: fn.decoders.image_random_crop(x), [data] * 8, iterations=2)
    tolerance = 0 if name in ("png", "webp_lossless", "jpeg_444") else 8
    for batch in batches:
        for window in batch[0]:
            assert window.shape[0] <= full.shape[0] and window.shape[1] <= full.shape[1]
            y, x, diff = locate(window, full)
            assert diff <= tolerance, (name, window.shape, y, x, diff)
            if window.shape[0] > 2 and window.shape[1] > 2:
                inner = np.abs(full[y + 1:y + window.shape[0] - 1, x + 1:x + window.shape[1] - 1].astype(int)
                               - window[1:-1, 1:-1]).max()
                assert inner <= (0 if tolerance == 0 else 2)


def test_random_crop_pinned_window(encoded):
    """Area 1/4 and aspect ratio 1 of a 100x100 image: a 50x50 window."""
    square = pil_encode(Image.fromarray(synthetic_image(np.random.default_rng(2), 100, 100)), "PNG")
    outs = run_headrace(lambda x: fn.decoders.image_random_crop(x, random_area=[0.25, 0.25],
                                                                random_aspect_ratio=[1.0, 1.0]), [square] * 4)[0]
    full = decode(square)
    for out in outs:
        assert out.shape == (50, 50, 3)
        assert locate(out, full)[2] == 0


def test_random_crop_area_and_aspect_statistics(encoded, picture):
    outs = run_headrace(lambda x: fn.decoders.image_random_crop(x, random_area=[0.3, 0.6],
                                                                random_aspect_ratio=[0.8, 1.25]),
                        [encoded["png"]] * 64)[0]
    total = picture.shape[0] * picture.shape[1]
    areas = np.array([o.shape[0] * o.shape[1] / total for o in outs])
    ratios = np.array([o.shape[1] / o.shape[0] for o in outs])
    slack = 0.05  # sizes are rounded to whole pixels
    assert areas.min() >= 0.3 - slack and areas.max() <= 0.6 + slack
    assert ratios.min() >= 0.8 - slack and ratios.max() <= 1.25 + slack
    assert areas.std() > 0.03  # the windows do vary


@settings(max_examples=200, deadline=None)
@given(height=st.integers(1, 400), width=st.integers(1, 400), area_lo=st.floats(0.01, 1.0),
       area_span=st.floats(0.0, 1.0), aspect_lo=st.floats(0.2, 3.0), aspect_span=st.floats(1.0, 3.0),
       seed=st.integers(0, 2**32 - 1))
def test_random_crop_window_properties(height, width, area_lo, area_span, aspect_lo, aspect_span, seed):
    """The window generator: always inside the image and non-empty; a window from the sampling loop has an
    area and aspect ratio inside the ranges (up to pixel rounding); the fallback keeps the ratio in range when
    the image allows it."""
    area = [area_lo, min(1.0, area_lo + area_span)]
    aspect = [aspect_lo, aspect_lo * aspect_span]
    y, x, h, w = random_crop_window(height, width, area, aspect, 10, np.random.default_rng(seed))
    assert 0 <= y and 0 <= x and 1 <= h and 1 <= w and y + h <= height and x + w <= width
    ratio = w / h
    rounding = (1 / h + 1 / w) * max(ratio, 1)
    if (h, w) != (height, width) and not (y == (height - h) // 2 and x == (width - w) // 2):
        assert area[0] * height * width * (1 - rounding) - 1 <= h * w
        assert aspect[0] - rounding - 1e-9 <= ratio <= aspect[1] + rounding + 1e-9 or math.isclose(ratio, 1)


# DALI ------------------------------------------------------------------------------------------------------------

@pytest.mark.dali
@needs_dali
def test_decoders_match_dali(encoded):
    for name in ["jpeg", "jpeg_progressive", "jpeg_cmyk", "png", "png_rgba", "bmp", "tiff", "webp", "jpeg_exif6"]:
        for output_type in ("RGB", "BGR", "GRAY", "YCbCr"):
            kind = getattr(types, output_type)
            ours = run_headrace(lambda x, t=kind: fn.decoders.image(x, output_type=t), [encoded[name]])[0][0]
            dali = run_dali(lambda x, f, t=kind: f.decoders.image(x, device="cpu", output_type=t),
                            [encoded[name]])[0][0]
            assert ours.shape == dali.shape, (name, output_type)
            tolerance = 0 if output_type in ("RGB", "BGR") else 2
            assert np.abs(ours.astype(int) - dali).max() <= tolerance, (name, output_type)


def test_exif_orientation_parser(encoded, picture):
    from headrace_kernels import exif

    for o in range(1, 9):
        assert exif.orientation(encoded[f"jpeg_exif{o}"].tobytes()) == o
        tiff = pil_encode(Image.fromarray(picture), "TIFF", exif=_exif(o))
        assert exif.orientation(tiff.tobytes()) == o
    for name in ("jpeg", "png", "webp", "bmp"):
        assert exif.orientation(encoded[name].tobytes()) == 1
    assert exif.orientation(b"\xff\xd8\xff\xe1\x00") == 1  # cut short: no orientation, no exception


def test_a_missing_nvimgcodec_is_one_line_saying_what_to_install():
    """A plain install without the codec extra: the first decode says which package to install."""
    import subprocess
    import sys

    script = """
import sys
sys.modules["nvidia.nvimgcodec"] = None  # as if the wheel were not installed
import numpy as np
from headrace import fn, pipeline_def, types
@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def pipe():
    return fn.decoders.image(fn.external_source(source=lambda: [np.zeros(8, np.uint8)]), output_type=types.RGB)
p = pipe()
p.build()
try:
    p.run()
except Exception as exc:
    print(str(exc).splitlines()[-1])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "nvImageCodec, which is not installed: pip install 'headrace-kernels[cpu]'" in done.stdout, done.stderr
