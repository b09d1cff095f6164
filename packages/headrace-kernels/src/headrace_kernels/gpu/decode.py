"""`device="mixed"` image decoding through nvImageCodec's GPU backends: the hardware JPEG decoder where the GPU has
one (share set by `hw_decoder_load`), CUDA decoding otherwise, and a per-image CPU fallback for anything they return
None for. `image_random_crop` decodes only the crop window (ROI decode), chosen by the same rule and the same
per-sample random stream as the CPU kernel, so CPU and GPU crop the same window."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from headrace_kernels import exif
from headrace_kernels.cpu import decode as cpu_decode
from headrace_kernels.gpu.image_ops import SampleFailureError
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.philox import batch_crop_windows

RGB, BGR, GRAY, YCBCR = cpu_decode.RGB, cpu_decode.BGR, cpu_decode.GRAY, cpu_decode.YCBCR


class DeviceImage:
    """A decoded image in device memory owned by nvImageCodec. Its pointer, shape and strides are read once from
    the CUDA array interface: no CUDA call per image (each would hand the GIL to the other pipeline thread).
    CuPy views it through `__cuda_array_interface__` when asked."""

    __slots__ = ("owner", "stream", "ptr", "shape", "strides", "dtype", "itemsize", "ndim")

    def __init__(self, owner, stream=None):
        interface = owner.__cuda_array_interface__
        self.owner = owner
        self.stream = stream  # the image was decoded on it and is freed on it: it must outlive the image
        self.ptr = interface["data"][0]
        self.shape = tuple(interface["shape"])
        self.dtype = np.dtype(interface["typestr"])
        self.itemsize = self.dtype.itemsize
        self.ndim = len(self.shape)
        strides = interface.get("strides")
        if strides is None:
            strides, step = [], self.itemsize
            for extent in reversed(self.shape):
                strides.insert(0, step)
                step *= extent
        self.strides = tuple(strides)

    @property
    def data(self):  # as cupy's ndarray.data: something with .ptr
        return self

    @property
    def __cuda_array_interface__(self) -> dict:
        return self.owner.__cuda_array_interface__


@dataclasses.dataclass
class Prepared:
    """One batch's parsed code streams (the host half of the decode, done in the CPU stage)."""

    streams: list
    windows: list
    encoded: list


def _parse(data):
    """cpu_decode.code_stream without its copy: a contiguous uint8 array is parsed in place (the Prepared batch
    keeps it alive until the decode)."""
    if isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1 and data.size and \
            data.flags.c_contiguous:
        try:
            stream = cpu_decode._codec().CodeStream(data)
            _ = stream.width  # parses the header
        except Exception as exc:  # noqa: BLE001 - nvimgcodec raises RuntimeError with its own text
            raise ValueError(f"not a decodable image ({exc})") from None
        return stream
    return cpu_decode.code_stream(data)


class MixedDecoder:
    """One decoders.image / decoders.image_random_crop node on the GPU."""

    def __init__(self, args: dict, device_id: int, num_threads: int, random_crop: bool):
        self.args, self.device_id, self.num_threads, self.random_crop = args, device_id, num_threads, random_crop
        self.output_type = int(args["output_type"])
        self.hw_load = float(args["hw_decoder_load"])
        self._decoder = None
        self._lock = threading.Lock()
        self.backend_names: list[str] = []
        self.fallbacks = 0
        self.decode_seconds = 0.0  # inside nvImageCodec's decode call

    def _make_decoder(self):
        nv = cpu_decode._codec()
        kinds = nv.BackendKind
        hw = [nv.Backend(kinds.HW_GPU_ONLY, load_hint=self.hw_load)] if self.hw_load > 0 else []
        attempts = [
            (hw + [nv.Backend(kinds.GPU_ONLY), nv.Backend(kinds.HYBRID_CPU_GPU), nv.Backend(kinds.CPU_ONLY)],
             "hardware+cuda+hybrid+cpu"),
            (hw + [nv.Backend(kinds.HYBRID_CPU_GPU), nv.Backend(kinds.CPU_ONLY)], "hardware+hybrid+cpu"),
            ([nv.Backend(kinds.GPU_ONLY), nv.Backend(kinds.CPU_ONLY)], "cuda+cpu"),
        ]
        errors = []
        for backends, label in attempts:
            try:
                decoder = nv.Decoder(device_id=self.device_id, max_num_cpu_threads=self.num_threads,
                                     backends=backends)
                self.backend_names.append(label)
                return decoder
            except Exception as exc:  # noqa: BLE001 - nvimgcodec raises RuntimeError with a code
                errors.append(f"{label}: {exc}")
        raise RuntimeError("nvImageCodec could not create a GPU decoder: " + "; ".join(errors))

    @property
    def decoder(self):
        if self._decoder is None:
            with self._lock:
                if self._decoder is None:
                    self._decoder = self._make_decoder()
        return self._decoder

    def release(self) -> None:
        """Drop the decoder (its device buffers go with it); the next batch makes a new one."""
        with self._lock:
            self._decoder = None

    def prepare(self, encoded: list, seed: int, first_sample: int) -> Prepared:
        """Parse every header and, for random crops, choose the windows (sample i's from the per-sample stream
        keyed by (seed, first_sample + i), as the CPU kernel draws it) and cut the sub code streams (host work)."""
        nv = cpu_decode._codec()
        streams = []
        for i, data in enumerate(encoded):
            try:
                streams.append(_parse(data))
            except ValueError as exc:
                raise SampleFailureError(i, str(exc)) from None
        if not self.random_crop:
            return Prepared(streams, [None] * len(streams), encoded)
        args = self.args
        heights = np.fromiter((s.height for s in streams), np.int64, len(streams))
        widths = np.fromiter((s.width for s in streams), np.int64, len(streams))
        if args["adjust_orientation"]:  # windows in the displayed frame, as the CPU kernel and the decoder take them
            turned = np.fromiter((exif.swaps_axes(exif.orientation(memoryview(np.asarray(d)))) for d in encoded),
                                 bool, len(streams))
            heights, widths = np.where(turned, widths, heights), np.where(turned, heights, widths)
        boxes = batch_crop_windows(heights, widths, args["random_area"], args["random_aspect_ratio"],
                                   args["num_attempts"], seed, first_sample)
        region = nv.Region
        streams = [s.get_sub_code_stream(region=region(start=(y, x), end=(y + h, x + w)))
                   for s, (y, x, h, w) in zip(streams, boxes.tolist(), strict=True)]
        return Prepared(streams, [tuple(b) for b in boxes.tolist()], encoded)

    def run(self, prepared: Prepared, stream) -> list:
        """Decode the batch on `stream`; every output is checked, and a None is decoded again on the CPU."""
        cp = cupy()
        nv = cpu_decode._codec()
        gray = self.output_type == GRAY
        if self.output_type == YCBCR:
            return [self._cpu_decode(prepared, i) for i in range(len(prepared.streams))]
        params = nv.DecodeParams(color_spec=nv.ColorSpec.GRAY if gray else nv.ColorSpec.SRGB,
                                 apply_exif_orientation=self.args["adjust_orientation"])
        start = time.perf_counter()
        try:
            images = self.decoder.decode(prepared.streams, params=params, cuda_stream=stream.ptr)
        except Exception:  # noqa: BLE001 - a failing batch call: decode one by one below
            images = [None] * len(prepared.streams)
        self.decode_seconds += time.perf_counter() - start
        out = []
        for i, image in enumerate(images):
            if image is None:
                out.append(self._cpu_decode(prepared, i))
                continue
            if image.buffer_kind == nv.ImageBufferKind.STRIDED_DEVICE:
                array = DeviceImage(image, stream)
                if array.ndim == 3 and array.shape[2] == (1 if gray else 3) and self.output_type != BGR:
                    out.append(array)  # the common case: used as it is
                    continue
                array = cp.asarray(image)
            else:
                array = cp.asarray(np.asarray(image.cpu()))
            out.append(self._channels(array, gray))
        return out

    def _channels(self, array, gray: bool):
        cp = cupy()
        if array.ndim == 2:
            array = array[:, :, None]
        if gray and array.shape[2] != 1:
            array = array[:, :, :1]
        elif not gray and array.shape[2] == 1:
            array = cp.repeat(array, 3, axis=2)
        elif not gray and array.shape[2] == 4:
            array = array[:, :, :3]
        if self.output_type == BGR:
            array = cp.ascontiguousarray(array[:, :, ::-1])
        return array

    def _cpu_decode(self, prepared: Prepared, i: int):
        """The CPU kernel's decode of sample i, uploaded: what the GPU backends could not do."""
        self.fallbacks += 1
        try:
            image = cpu_decode.decode_image(prepared.encoded[i], self.output_type, self.args["adjust_orientation"],
                                            prepared.windows[i])
        except ValueError as exc:
            raise SampleFailureError(i, str(exc)) from None
        return cupy().asarray(image)
