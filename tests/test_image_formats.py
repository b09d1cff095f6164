"""Every image format DALI decodes (PNG, BMP, PNM, WebP, JPEG 2000, TIFF: multi-page gives its first page), through
`decoders.image`: equal to DALI's CPU build pixel for pixel (both decode through nvImageCodec's CPU codecs), to the
source pixels for the lossless formats, and on the GPU (mixed) equal to the CPU within one level (JPEG 2000 and
TIFF through nvImageCodec's GPU codecs where they exist, else decoded on the CPU and uploaded). A truncated file
gets the same error as a truncated JPEG: it names the op and the sample."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from ops_support import needs_dali
from PIL import Image

from headrace import fn, pipeline_def, types
from headrace.errors import SampleError

RNG = np.random.default_rng(7)
RGB = RNG.integers(0, 256, (37, 53, 3), dtype=np.uint8)
LOSSLESS = (".png", ".bmp", ".ppm", ".webp", ".tiff")
FORMATS = (*LOSSLESS, ".jp2")


def encoded(ext: str, image: np.ndarray = RGB) -> np.ndarray:
    params = [cv2.IMWRITE_WEBP_QUALITY, 101] if ext == ".webp" else []  # 101: lossless WebP
    if ext == ".ppm" and image.ndim == 2:
        ext = ".pgm"  # the grey PNM
    ok, data = cv2.imencode(ext, image[..., ::-1] if image.ndim == 3 else image, params)
    assert ok
    return data.reshape(-1)


def multipage_tiff() -> np.ndarray:
    """A two-page TIFF: RGB first, its negative second."""
    buffer = io.BytesIO()
    pages = [Image.fromarray(RGB), Image.fromarray(255 - RGB)]
    pages[0].save(buffer, format="TIFF", save_all=True, append_images=pages[1:])
    return np.frombuffer(buffer.getvalue(), np.uint8)


def decode(api, samples: list[np.ndarray], output_type=None, device: str = "cpu") -> list[np.ndarray]:
    kwargs = {"device_id": 0 if device == "mixed" else None}

    @api.pipeline_def(batch_size=len(samples), num_threads=1, **kwargs)
    def pipe():
        data = api.fn.external_source(source=lambda: [s.copy() for s in samples])
        return api.fn.decoders.image(data, device=device, output_type=output_type or api.types.RGB)

    p = pipe()
    p.build()
    (out,) = p.run()
    if device == "mixed":
        out = out.as_cpu()
    return [np.asarray(out[i]) for i in range(len(samples))]


class _Headrace:
    fn, types, pipeline_def = fn, types, staticmethod(pipeline_def)


def _dali():
    import nvidia.dali as dali

    class Dali:
        fn, types, pipeline_def = dali.fn, dali.types, staticmethod(dali.pipeline_def)

    return Dali


def test_lossless_formats_give_the_source_pixels():
    for ext, got in zip(LOSSLESS, decode(_Headrace, [encoded(e) for e in LOSSLESS]), strict=True):
        np.testing.assert_array_equal(got, RGB, err_msg=ext)


def test_multipage_tiff_gives_its_first_page():
    (got,) = decode(_Headrace, [multipage_tiff()])
    np.testing.assert_array_equal(got, RGB)


def test_grayscale_output_of_every_format():
    gray = cv2.cvtColor(RGB, cv2.COLOR_RGB2GRAY)
    for ext, got in zip(LOSSLESS, decode(_Headrace, [encoded(e, gray) for e in LOSSLESS], types.GRAY),
                        strict=True):
        assert got.shape == (*gray.shape, 1), ext
        np.testing.assert_array_equal(got[..., 0], gray, err_msg=ext)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("output_type", ["RGB", "BGR", "GRAY"])
def test_every_format_matches_dali(output_type):
    dali = _dali()
    samples = [encoded(e) for e in FORMATS] + [multipage_tiff()]
    ours = decode(_Headrace, samples, getattr(types, output_type))
    theirs = decode(dali, samples, getattr(dali.types, output_type))
    for ext, a, b in zip([*FORMATS, "multi-page .tiff"], ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, ext
        np.testing.assert_array_equal(a, b, err_msg=ext)


@pytest.mark.parametrize("ext", [".png", ".webp", ".tiff", ".jp2"])
def test_truncated_file_names_the_op_and_the_sample(ext):
    whole = encoded(ext)
    with pytest.raises(SampleError, match=r"decoders.image.*sample 1"):
        decode(_Headrace, [whole, whole[: len(whole) // 3]])


@pytest.mark.gpu
def test_gpu_decode_of_every_format_matches_the_cpu():
    pytest.importorskip("cupy")
    samples = [encoded(e) for e in FORMATS] + [multipage_tiff()]
    cpu = decode(_Headrace, samples)
    gpu = decode(_Headrace, samples, device="mixed")
    for ext, a, b in zip([*FORMATS, "multi-page .tiff"], cpu, gpu, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, ext
        assert np.abs(a.astype(int) - b).max() <= 1, ext
