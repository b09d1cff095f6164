"""headrace's ctypes binding of nvImageCodec's C API: its structure layouts against the shipped nvimgcodec.h
(compiled with the system C compiler: sizeof and every offsetof must match exactly), and its CPU decodes against
the Python binding's decodes of the same bytes (whole images, regions, EXIF orientation, grayscale): equal bit for
bit, since both drive the same libjpeg-turbo backend."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from headrace.data.synthetic import synthetic_image
from headrace_kernels import nvimgcodec_capi as capi
from headrace_kernels.cpu import decode as cpu_decode

pytestmark = pytest.mark.skipif(not capi.available(), reason="nvImageCodec's C library is not available")


def _header() -> Path | None:
    directory = capi._package_dir()
    header = directory / "include" / "nvimgcodec.h" if directory else None
    return header if header is not None and header.is_file() else None


def _c_fields(dtype: np.dtype, prefix: str = "") -> list[tuple[str, int]]:
    """(C member path, offset) for the named fields of a structure dtype; padding fields are skipped."""
    out = []
    for name in dtype.names:
        if name.startswith("_"):
            continue
        sub, offset = dtype.fields[name][:2]
        out.append((prefix + name, offset))
    return out


@pytest.mark.skipif(shutil.which("cc") is None or _header() is None, reason="needs a C compiler and nvimgcodec.h")
def test_structure_layouts_match_the_header(tmp_path):
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <nvimgcodec.h>", "int main(void) {"]
    expected = {}
    for name, (dtype, _) in capi.STRUCTS.items():
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        expected[name] = dtype.itemsize
        for member, offset in _c_fields(dtype):
            key = f"{name}.{member}"
            lines.append(f'printf("{key} %zu\\n", offsetof({name}, {member}));')
            expected[key] = offset
    lines += ["return 0; }"]
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines))
    binary = tmp_path / "layout"
    cuda_stub = tmp_path / "cuda_runtime_api.h"  # the header only needs the cudaStream_t type
    cuda_stub.write_text("typedef struct CUstream_st* cudaStream_t;\n")
    subprocess.run(["cc", "-I", str(_header().parent), "-I", str(tmp_path), "-o", str(binary), str(source)],
                   check=True, capture_output=True)
    printed = dict(line.rsplit(" ", 1) for line in subprocess.run([str(binary)], check=True, capture_output=True,
                                                                  text=True).stdout.splitlines())
    assert {k: int(v) for k, v in printed.items()} == expected


def _jpeg(image: np.ndarray, **save) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", **save)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8).copy()


def _rotated(image: np.ndarray) -> np.ndarray:
    exif = Image.Exif()
    exif[0x0112] = 6
    return _jpeg(image, quality=92, exif=exif.tobytes())


def _cpu_capi_batch(encoded: list, boxes: np.ndarray | None, gray: bool, exif: bool) -> tuple:
    """A CPU-only C API decoder, the batch's code streams (cut to `boxes`), the output shapes, zeroed outputs and
    their addresses: what a decode call takes."""
    instance = capi.Instance.shared()
    decoder = capi.Decoder(instance, capi.DEVICE_CPU_ONLY, 1, [(capi.BACKEND_CPU_ONLY, 1.0)])
    streams = capi.CodeStreams(instance, encoded)
    assert not streams.failed
    heights, widths = streams.heights, streams.widths
    if boxes is not None:
        streams.cut(boxes)
        heights, widths = boxes[:, 2], boxes[:, 3]
    turned = np.array([exif and cpu_decode.exif.swaps_axes(cpu_decode.exif.orientation(memoryview(e)))
                       for e in encoded])
    if boxes is None:
        heights, widths = np.where(turned, widths, heights), np.where(turned, heights, widths)
    shapes = np.stack([heights, widths, np.full(len(encoded), 1 if gray else 3)], axis=1).astype(np.int64)
    outputs = [np.zeros(tuple(s), np.uint8) for s in shapes]
    return decoder, streams, shapes, outputs, np.array([o.ctypes.data for o in outputs], np.uint64)


def _cpu_capi_decode(encoded: list, boxes: np.ndarray | None, gray: bool, exif: bool) -> tuple[list, np.ndarray]:
    decoder, streams, shapes, outputs, buffers = _cpu_capi_batch(encoded, boxes, gray, exif)
    ok = decoder.decode(streams, np.arange(len(encoded)), shapes, buffers, 0, gray, exif) == capi.PROCESSING_SUCCESS
    streams.close()
    decoder.close()
    return outputs, ok


@pytest.mark.parametrize("gray", [False, True])
def test_cpu_decode_equals_the_python_binding(gray):
    rng = np.random.default_rng(3)
    images = [synthetic_image(rng, h, w) for h, w in [(75, 101), (64, 64), (33, 250), (300, 200)]]
    encoded = [_jpeg(images[0], quality=90), _jpeg(images[1], quality=75, subsampling=0),
               _jpeg(images[2], quality=95, progressive=True), _rotated(images[3])]
    outputs, ok = _cpu_capi_decode(encoded, None, gray, exif=True)
    assert ok.all()
    output_type = cpu_decode.GRAY if gray else cpu_decode.RGB
    for data, out in zip(encoded, outputs, strict=True):
        np.testing.assert_array_equal(out, cpu_decode.decode_image(data, output_type, True))


@pytest.mark.parametrize("exif", [False, True])
def test_cpu_region_decode_equals_the_python_binding(exif):
    rng = np.random.default_rng(4)
    encoded = [_jpeg(synthetic_image(rng, 120, 160), quality=90) for _ in range(3)]
    encoded.append(_rotated(synthetic_image(rng, 160, 120)) if exif else encoded[0])  # displayed 120 x 160 too
    boxes = np.array([[0, 0, 120, 160], [17, 33, 50, 70], [101, 5, 19, 150], [7, 90, 100, 41]], np.int64)
    outputs, ok = _cpu_capi_decode(encoded, boxes, False, exif=exif)
    assert ok.all()
    for data, out, box in zip(encoded, outputs, boxes.tolist(), strict=True):
        np.testing.assert_array_equal(out, cpu_decode.decode_image(data, cpu_decode.RGB, exif, tuple(box)))


def test_a_corrupt_header_is_reported_per_image():
    rng = np.random.default_rng(5)
    good = _jpeg(synthetic_image(rng, 40, 40), quality=90)
    streams = capi.CodeStreams(capi.Instance.shared(), [good, np.frombuffer(b"not an image", np.uint8).copy(),
                                                        np.zeros(0, np.uint8)])
    assert sorted(streams.failed) == [1, 2]
    assert "not a decodable image" in streams.failed[1] and "empty" in streams.failed[2]
    assert streams.heights[0] == 40 and streams.widths[0] == 40
    streams.close()


def test_a_corrupt_body_fails_that_image_only():
    rng = np.random.default_rng(6)
    good = _jpeg(synthetic_image(rng, 64, 48), quality=90)
    broken = good.copy()
    broken[len(broken) // 3:] = 0  # header intact, entropy-coded data destroyed
    outputs, ok = _cpu_capi_decode([good, broken], None, False, exif=False)
    assert ok[0]
    np.testing.assert_array_equal(outputs[0], cpu_decode.decode_image(good, cpu_decode.RGB, False))


def test_repeated_decodes_call_the_compiled_loops_directly():
    rng = np.random.default_rng(6)
    encoded = [_jpeg(synthetic_image(rng, 30, 40), quality=90) for _ in range(2)]
    first, _ = _cpu_capi_decode(encoded, None, False, exif=False)
    again, ok = _cpu_capi_decode(encoded, None, False, exif=False)
    assert ok.all()
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    loops = capi.library().loops
    # numba's typing is skipped after the first call
    for name in ("parse", "destroy_streams", "submit_decode", "finish_decode"):
        assert getattr(loops, name).entries, name


def test_a_started_decode_finishes_with_the_pixels_of_a_whole_decode():
    rng = np.random.default_rng(7)
    encoded = [_jpeg(synthetic_image(rng, 48, 64), quality=90) for _ in range(3)]
    expected, _ = _cpu_capi_decode(encoded, None, False, exif=False)
    decoder, streams, shapes, outputs, buffers = _cpu_capi_batch(encoded, None, False, exif=False)
    started = decoder.start(streams, np.arange(3), shapes, buffers, 0, False, False)
    assert started.submitted  # the caller works here while nvImageCodec decodes
    statuses = started.finish()
    assert (statuses == capi.PROCESSING_SUCCESS).all()
    assert started.finish() is statuses  # a second finish waits for nothing
    for a, b in zip(outputs, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    streams.close()
    decoder.close()


@pytest.mark.parametrize("name", sorted(capi.STRUCTS))
def test_new_structures_are_filled_copies(name):
    expected = np.zeros(3, capi.STRUCTS[name][0])
    capi._fill_headers(expected, name)
    made = capi.new(name, 3)
    assert made.tobytes() == expected.tobytes() and made.flags.writeable
    made.view(np.uint8)[:] = 0xFF  # a caller's writes stay in its copy
    assert capi.new(name).tobytes() == expected[:1].tobytes()


def test_code_streams_close_once_with_the_streams_they_were_cut_from():
    rng = np.random.default_rng(8)
    encoded = [_jpeg(synthetic_image(rng, 40, 60), quality=90) for _ in range(2)]
    streams = capi.CodeStreams(capi.Instance.shared(), encoded)
    streams.cut(np.array([[0, 0, 20, 30], [5, 5, 10, 10]], np.int64))
    assert streams.handles.all() and streams.parents.all()
    streams.close()
    assert not streams.handles.any() and not streams.parents.any()
    streams.close()  # and again (the collector calls it too): nothing is destroyed twice
    whole = capi.CodeStreams(capi.Instance.shared(), encoded)
    assert not whole.parents.any()
    whole.close()
    assert not whole.handles.any()


def test_one_decoder_turns_by_exif_only_when_asked():
    """The decode parameters are made once per decoder, one set per apply_exif_orientation."""
    rng = np.random.default_rng(9)
    encoded = [_rotated(synthetic_image(rng, 40, 60))]
    decoder, streams, _, _, _ = _cpu_capi_batch(encoded, None, False, exif=False)
    for exif in (False, True, False):
        expected = cpu_decode.decode_image(encoded[0], cpu_decode.RGB, exif)
        out = np.zeros(expected.shape, np.uint8)
        statuses = decoder.decode(streams, np.arange(1), np.array([expected.shape], np.int64),
                                  np.array([out.ctypes.data], np.uint64), 0, False, exif)
        assert statuses[0] == capi.PROCESSING_SUCCESS
        np.testing.assert_array_equal(out, expected)
    streams.close()
    decoder.close()
