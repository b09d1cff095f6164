"""Image decoding on the CPU through nvImageCodec's CPU backend (libjpeg-turbo, OpenCV for other formats)."""

from __future__ import annotations

import functools
import threading

import cv2
import numpy as np

from headrace_kernels import exif
from headrace_kernels.registry import cpu_kernel
from headrace_kernels.windows import random_crop_window

RGB, BGR, GRAY, YCBCR, ANY_DATA = 0, 1, 2, 3, 4
# DALI's YCbCr: ITU-R BT.601 studio range (Y in 16..235, Cb/Cr in 16..240), channels in Y, Cb, Cr order.
_RGB_TO_YCBCR = np.array([[0.257, 0.504, 0.098, 16.0], [-0.148, -0.291, 0.439, 128.0], [0.439, -0.368, -0.071, 128.0]],
                         np.float32)
_local = threading.local()
_load_lock = threading.Lock()
_nvimgcodec = None


NVIMGCODEC_MISSING = ("headrace decodes images with NVIDIA nvImageCodec, which is not installed: pip install "
                      "'headrace-kernels[cpu]' (or [cuda13] / [cuda12] for the GPU)")


def nvimgcodec_module():
    """The nvimgcodec module, imported once with its loading chatter about absent GPU libraries silenced."""
    global _nvimgcodec
    if _nvimgcodec is None:
        with _load_lock:
            if _nvimgcodec is None:
                from headrace_kernels.quiet import native_stderr_captured

                with native_stderr_captured():
                    try:
                        from nvidia import nvimgcodec
                    except ImportError:
                        raise ImportError(NVIMGCODEC_MISSING) from None

                    nvimgcodec.Decoder(device_id=nvimgcodec.NVIMGCODEC_DEVICE_CPU_ONLY,
                                       backends=[nvimgcodec.Backend(nvimgcodec.BackendKind.CPU_ONLY)])
                _nvimgcodec = nvimgcodec
    return _nvimgcodec


def _decoder():
    """This thread's CPU decoder: nvimgcodec decoders are not safe to share between threads."""
    decoder = getattr(_local, "decoder", None)
    if decoder is None:
        nv = nvimgcodec_module()
        decoder = nv.Decoder(device_id=nv.NVIMGCODEC_DEVICE_CPU_ONLY, backends=[nv.Backend(nv.BackendKind.CPU_ONLY)],
                             max_num_cpu_threads=1)
        _local.decoder = decoder
    return decoder


def _as_bytes(data) -> np.ndarray:
    array = np.asarray(data)
    if array.dtype != np.uint8 or array.ndim != 1:
        raise ValueError(f"expected encoded bytes (1-D uint8), got {array.dtype} with shape {array.shape}")
    if array.size == 0:
        raise ValueError("the encoded image is empty (0 bytes)")
    return array


def code_stream(data, max_pixels: int = 0):
    """Parse the header of an encoded image; raises ValueError when it is no image nvImageCodec knows, or when it
    claims more than `max_pixels` pixels (0: no limit)."""
    nv = nvimgcodec_module()
    try:
        # the stream reads the array in place (and holds a reference to it): no copy of the encoded bytes, so a
        # mapped file's pages are first touched by the decode, without the GIL
        stream = nv.CodeStream(np.ascontiguousarray(_as_bytes(data)))
        _ = stream.width  # parses the header
    except Exception as exc:  # noqa: BLE001 - nvimgcodec raises RuntimeError with its own text
        raise ValueError(f"not a decodable image ({exc})") from None
    height, width = stream.height, stream.width
    if max_pixels and height * width > max_pixels:
        del stream  # goes now, not with the error's traceback (nvImageCodec objects must not outlive their owners)
    check_pixels(height, width, max_pixels)
    return stream


def check_pixels(height: int, width: int, max_pixels: int) -> None:
    """Refuse an image whose header claims more than `max_pixels` pixels (a decompression bomb) before anything is
    decoded or allocated; 0 sets no limit."""
    check_max_pixels(max_pixels)
    if max_pixels and height * width > max_pixels:
        raise ValueError(too_many_pixels(height, width, max_pixels))


def check_max_pixels(max_pixels: int) -> None:
    """The argument itself: 0 (no limit) or a positive count."""
    if max_pixels < 0:
        raise ValueError(f"max_pixels must be 0 (no limit) or a positive number of pixels, got {max_pixels}")


def too_many_pixels(height: int, width: int, max_pixels: int) -> str:
    """The refusal's message: what the header claims, and the argument that refuses it."""
    return (f"its header claims {height}x{width} = {height * width:,} pixels, more than max_pixels={max_pixels:,}: "
            "refused before decoding (a decompression bomb, or raise the decoder's max_pixels)")


def _convert(image: np.ndarray, output_type: int) -> np.ndarray:
    if output_type == BGR:
        return np.ascontiguousarray(image[..., ::-1])
    if output_type == YCBCR:
        return cv2.transform(image, _RGB_TO_YCBCR)
    return image


def decode_image(data, output_type: int = RGB, adjust_orientation: bool = True,
                 window: tuple[int, int, int, int] | None = None, max_pixels: int = 0) -> np.ndarray:
    """Decode to HWC uint8; `window` = (y, x, h, w) decodes only that region (ROI decode). An image of more than
    `max_pixels` pixels (0: no limit) is refused from its header."""
    return decode_stream(code_stream(data, max_pixels), output_type, adjust_orientation, window)


def decode_stream(stream, output_type: int, adjust_orientation: bool,
                  window: tuple[int, int, int, int] | None) -> np.ndarray:
    """Decode a parsed code stream to HWC uint8 in `output_type`; `window` = (y, x, h, w) of the displayed image
    decodes only that region."""
    nv = nvimgcodec_module()
    if window is not None:
        y, x, h, w = window
        stream = stream.get_sub_code_stream(region=nv.Region(start=(y, x), end=(y + h, x + w)))
    gray = output_type == GRAY
    params = nv.DecodeParams(color_spec=nv.ColorSpec.GRAY if gray else nv.ColorSpec.SRGB,
                             apply_exif_orientation=adjust_orientation)
    image = _decoder().decode(stream, params=params)
    if image is None:
        raise ValueError(f"corrupt or truncated {stream.codec_name or 'image'} data: the decoder could not decode it")
    array = np.asarray(image.cpu())
    if array.ndim == 2:
        array = array[..., None]
    if not gray and array.shape[2] == 1:
        array = np.repeat(array, 3, axis=2)
    elif not gray and array.shape[2] == 4:
        array = np.ascontiguousarray(array[..., :3])
    return _convert(array, output_type)


def image_size(data, adjust_orientation: bool = True) -> tuple[int, int, bool]:
    """(height, width, rotated) of an encoded image from its header alone, in the displayed frame when
    `adjust_orientation` (the frame in which the decoder takes a region)."""
    return displayed_size(code_stream(data), data, adjust_orientation)


def displayed_size(stream, data, adjust_orientation: bool) -> tuple[int, int, bool]:
    """(height, width, rotated) of a parsed image as displayed: exchanged where its EXIF orientation turns it."""
    rotated = adjust_orientation and exif.swaps_axes(exif.orientation(_as_bytes(data).data))
    return (stream.width, stream.height, True) if rotated else (stream.height, stream.width, False)


@cpu_kernel("decoders.image")
def decode(inputs, args, ctx):
    return decode_image(inputs[0], int(args["output_type"]), args["adjust_orientation"],
                        max_pixels=args["max_pixels"])


@cpu_kernel("decoders.image_random_crop")
def decode_random_crop(inputs, args, ctx):
    stream = code_stream(inputs[0], args["max_pixels"])  # parsed once: its header gives the window, then decoded
    height, width, _ = displayed_size(stream, inputs[0], args["adjust_orientation"])
    window = random_crop_window(height, width, args["random_area"], args["random_aspect_ratio"],
                                args["num_attempts"], ctx.rng)
    return decode_stream(stream, int(args["output_type"]), args["adjust_orientation"], window)


@functools.lru_cache(maxsize=1)
def tiny_jpeg() -> np.ndarray:
    """A 16x16 baseline 4:2:0 JPEG (Pillow): the image of a warm-up batch (Pipeline.warm_up, the GPU decoders)."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (120, 130, 140)).save(buffer, format="JPEG", quality=90)
    return np.frombuffer(buffer.getvalue(), np.uint8)
