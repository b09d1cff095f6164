"""CPU kernels of the property ops. peek_image_shape: an encoded image's decoded shape from its header
(nvImageCodec parses it; the EXIF orientation comes from headrace_kernels.exif), nothing decoded."""

from __future__ import annotations

import numpy as np

from headrace_kernels import exif
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.cpu.decode import ANY_DATA, GRAY, code_stream
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


def encoded_bytes(data) -> np.ndarray:
    """The sample as encoded bytes (1-D uint8), or a ValueError saying what it is instead."""
    array = np.asarray(data)
    if array.dtype != np.uint8 or array.ndim != 1:
        raise ValueError(f"peek_image_shape expects encoded images (1-D uint8 bytes), got {array.dtype} with shape "
                         f"{array.shape}")
    if array.size == 0:
        raise ValueError("peek_image_shape: the encoded image is empty (0 bytes)")
    return array


def peeked_shape(data, image_type: int, adjust_orientation: bool) -> tuple[int, int, int]:
    """(height, width, channels) the image decodes to (channels by `image_type`, as the decoders give them)."""
    array = encoded_bytes(data)
    stream = code_stream(array)
    height, width, own_channels = stream.height, stream.width, stream.num_channels
    del stream  # nvImageCodec objects go at once
    if adjust_orientation and exif.swaps_axes(exif.orientation(array.data)):
        height, width = width, height
    channels = 1 if image_type == GRAY else own_channels if image_type == ANY_DATA else 3
    return height, width, channels


@cpu_kernel("peek_image_shape")
def peek_image_shape(inputs, args, ctx):
    shape = peeked_shape(inputs[0], int(args["image_type"]), args["adjust_orientation"])
    return saturate_cast(np.array(shape, np.int64), numpy_dtype(args["dtype"]))


def property_bytes(key: str, source: str, layout: str) -> np.ndarray:
    """get_property's output: the text of `key` ('source_info' or 'layout') as a 1-D uint8 array."""
    text = getattr(source, "source_info", source) if key == "source_info" else layout  # a reader's SampleSource
    return np.frombuffer(text.encode(), np.uint8).copy()


@cpu_kernel("get_property")
def get_property(inputs, args, ctx):
    return property_bytes(args["key"], ctx.source, ctx.input_layouts[0] if ctx.input_layouts else "")
