"""`device="mixed"` image decoding through nvImageCodec's GPU backends: the hardware JPEG decoder where the GPU has
one (share set by `hw_decoder_load`), CUDA decoding otherwise, and a per-image CPU fallback for anything they return
nothing for. `image_random_crop` decodes only the crop window (ROI decode), chosen by the same rule and the same
per-sample random stream as the CPU kernel, so CPU and GPU crop the same window.

The batch goes through nvImageCodec's C API (`headrace_kernels.nvimgcodec_capi`) where its version is supported:
one allocation for the whole batch's outputs, and the GIL released once per batch instead of re-taken per image.
Otherwise (or with the executor option nvimgcodec_capi=False) through the Python binding, with the same backends
and options. With the C API a batch of 64 images or more decodes in decode lanes (gpu/decode_lanes.py): handed over
from the look-ahead, it decodes while the batch before is resized, split over two decoders where all of it goes to
the hardware decoder."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time

import numpy as np

from headrace_kernels import exif
from headrace_kernels import nvimgcodec_capi as capi
from headrace_kernels.cpu import decode as cpu_decode
from headrace_kernels.cpu.decode import tiny_jpeg
from headrace_kernels.gpu import events
from headrace_kernels.gpu.affinity import pipeline_cpus
from headrace_kernels.gpu.decode_lanes import AHEAD_FROM, MEMBER_LANES, SPLIT_FROM, DecodeLane, LaneDecode, split
from headrace_kernels.gpu.memory import batch_allocation
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.gpu.staging import hold_until_read, pinned_copies
from headrace_kernels.host_arrays import addresses_and_sizes
from headrace_kernels.nvimgcodec_memory import DecoderMemory
from headrace_kernels.philox import batch_crop_windows
from headrace_kernels.registry import SampleFailureError, gpu_kernel

RGB, BGR, GRAY, YCBCR = cpu_decode.RGB, cpu_decode.BGR, cpu_decode.GRAY, cpu_decode.YCBCR
_UINT8 = np.dtype(np.uint8)
_ALIGN = 256  # each decoded image starts on a 256-byte boundary of the batch's allocation, as cudaMalloc's would


def sample_list(value) -> list:
    """A decoder input's samples as a list: a list (a Column among them, whose packed array then goes along) as it
    is, anything else listed."""
    return value if isinstance(value, list) else list(value)


def _encoded_arrays(encoded: list) -> list:
    """The batch's encoded samples as C-contiguous 1-D uint8 arrays (a sample that is not one fails). Samples laid
    back to back in one such array (a Column with `packed`, as the CPU stage's worker gives them) are
    that already and stay in their Column, which locates them all at once (host_arrays.addresses_and_sizes)."""
    packed = getattr(encoded, "packed", None)
    if packed is not None and packed[0].dtype == _UINT8 and packed[0].ndim == 1 and packed[0].flags.c_contiguous \
            and set(map(len, packed[2])) == {1}:  # 1-D samples
        return encoded
    arrays = []
    for i, data in enumerate(encoded):
        array = data if type(data) is np.ndarray else np.asarray(data)
        if array.dtype != _UINT8 or array.ndim != 1:
            raise SampleFailureError(i, f"expected encoded bytes (1-D uint8), got {array.dtype} with shape "
                                        f"{array.shape}")
        arrays.append(array if array.flags.c_contiguous else np.ascontiguousarray(array))
    return arrays


class DeviceImage:
    """A decoded HWC uint8 image in device memory: its pointer, shape and strides as plain fields (no CUDA call
    per image: each would hand the GIL to the other pipeline thread), and the owner of the memory. CuPy views it
    through `__cuda_array_interface__` when asked."""

    __slots__ = ("owner", "stream", "ptr", "shape", "strides", "dtype", "itemsize", "ndim")

    def __init__(self, owner, stream=None):
        interface = owner.__cuda_array_interface__
        shape = tuple(interface["shape"])
        strides = interface.get("strides")
        self._set(owner, stream, interface["data"][0], shape, np.dtype(interface["typestr"]),
                  None if strides is None else tuple(strides))

    @classmethod
    def at(cls, owner, ptr: int, shape: tuple, stream=None) -> DeviceImage:
        """A packed HWC uint8 image at `ptr` inside `owner` (the batch's allocation, kept alive by the record)."""
        image = cls.__new__(cls)
        image.owner, image.stream, image.ptr, image.shape = owner, stream, ptr, shape
        image.dtype, image.itemsize, image.ndim = _UINT8, 1, 3
        image.strides = (shape[1] * shape[2], shape[2], 1)
        return image

    def _set(self, owner, stream, ptr: int, shape: tuple, dtype: np.dtype, strides) -> None:
        self.owner = owner
        self.stream = stream  # the image was decoded on it (and nvImageCodec's own images are freed on it)
        self.ptr, self.shape, self.dtype, self.itemsize, self.ndim = ptr, shape, dtype, dtype.itemsize, len(shape)
        if strides is None:
            strides, step = [], self.itemsize
            for extent in reversed(shape):
                strides.insert(0, step)
                step *= extent
        self.strides = tuple(strides)

    @property
    def data(self):  # as cupy's ndarray.data: something with .ptr
        return self

    @property
    def __cuda_array_interface__(self) -> dict:
        stream = self.stream.ptr if self.stream is not None and self.stream.ptr else None
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "strides": self.strides,
                "version": 3, "stream": stream}


@dataclasses.dataclass
class Prepared:
    """One batch's parsed code streams (the host half of the decode, done in the CPU stage): a list of the Python
    binding's CodeStreams, or one `nvimgcodec_capi.CodeStreams` with the output shapes (rows h, w, c)."""

    streams: object
    windows: list
    encoded: list
    shapes: np.ndarray | None = None
    memory: object = None  # with the C API: the batch's output allocation (`MixedDecoder.allocate`) ...
    addresses: np.ndarray | None = None  # ... each image's address in it ...
    images: list | None = None  # ... and the DeviceImage records the decode will fill
    ahead: LaneDecode | StartedHere | None = None  # its decode, where started before the step's run ...
    attempt: int = 0  # ... and which of the decoder's backend attempts decoded it
    pinned: object = None  # the pinned host block `encoded` lies in (MixedDecoder.pinned_input), held per stream


class StartedHere:
    """A small batch's decode submitted on the pipeline's stream in the calling thread ahead of its step's run
    (`MixedDecoder.start_here`); `statuses()` waits for it, as `LaneDecode.statuses` for the lanes' parts. It
    holds what nvImageCodec reads and writes, and a batch dropped before its run (a step before it failed) still
    waits for its decode before those go."""

    def __init__(self, lock: threading.Lock, started: capi.StartedDecode | None, count: int, prepared: Prepared,
                 stream):
        self.lock, self.started, self.count, self.stream = lock, started, count, stream
        self.pinned = prepared.pinned
        self.keep = (prepared.streams, prepared.encoded, prepared.memory)  # not `prepared`: it holds this

    def statuses(self) -> np.ndarray:
        """Each image's nvimgcodecProcessingStatus_t, once decoded (all failed where the call itself failed)."""
        try:
            if self.started is None:
                return np.zeros(self.count, np.uint32)
            with self.lock:
                return self.started.finish()
        finally:
            self._let_go()

    def _let_go(self) -> None:
        """After the decode: what it read and wrote may go (pinned input once `stream` has read its copies)."""
        if self.pinned is not None:
            hold_until_read(self.stream, self.pinned)
            self.pinned = None
        self.keep = ()

    def __del__(self) -> None:
        try:
            if self.started is not None and self.started.submitted:
                self.started.finish()  # nobody asked for this batch; its memory must outlive the decode
            self._let_go()
        except Exception:  # noqa: BLE001 - interpreter shutdown, or a broken stream the run reported
            pass


def _parse(data, max_pixels: int = 0):
    """cpu_decode.code_stream without its copy: a contiguous uint8 array is parsed in place (the Prepared batch
    keeps it alive until the decode). An image of more than `max_pixels` pixels (0: no limit) is refused."""
    if isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1 and data.size and \
            data.flags.c_contiguous:
        try:
            stream = cpu_decode.nvimgcodec_module().CodeStream(data)
            _ = stream.width  # parses the header
        except Exception as exc:  # noqa: BLE001 - nvimgcodec raises RuntimeError with its own text
            raise ValueError(f"not a decodable image ({exc})") from None
        height, width = stream.height, stream.width
        if max_pixels and height * width > max_pixels:
            del stream  # goes now, not with the error's traceback (nvImageCodec objects must not outlive the batch)
        cpu_decode.check_pixels(height, width, max_pixels)
        return stream
    return cpu_decode.code_stream(data, max_pixels)




def _raise_first_failure(streams) -> None:
    """A batch whose code streams could not all be parsed (or cut) fails on its first bad sample."""
    if streams.failed:
        first = min(streams.failed)
        streams.close()
        raise SampleFailureError(first, streams.failed[first])


def _refuse_oversized(streams, max_pixels: int) -> None:
    """Mark the streams whose headers claim more than `max_pixels` pixels as failed, before any output is allocated
    (the product in uint64: a TIFF's two 32-bit extents would overflow int64)."""
    if not max_pixels:
        return
    heights, widths = streams.heights.astype(np.uint64), streams.widths.astype(np.uint64)
    for i in np.flatnonzero(heights * widths > np.uint64(max_pixels)).tolist():
        streams.failed.setdefault(i, cpu_decode.too_many_pixels(int(heights[i]), int(widths[i]), max_pixels))


def _shapes(heights: np.ndarray, widths: np.ndarray, channels: int) -> np.ndarray:
    """The decoded images' shapes, rows (h, w, c)."""
    shapes = np.empty((len(heights), 3), np.int64)
    shapes[:, 0], shapes[:, 1], shapes[:, 2] = heights, widths, channels
    return shapes


def _displayed(turned: np.ndarray, heights: np.ndarray, widths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heights and widths as displayed: exchanged where the EXIF orientation turns the image by 90 degrees."""
    return np.where(turned, widths, heights), np.where(turned, heights, widths)


DEFAULT_HYBRID_HUFFMAN_THRESHOLD = 1_000_000
"""nvImageCodec's CUDA JPEG decoder's own hybrid_huffman_threshold (pixels), which DALI's default matches."""


def decoder_options(args: dict, capacity: int = 0) -> str:
    """nvImageCodec's decoder options for a node's arguments: hybrid_huffman_threshold where it is not the
    decoder's own default (images of more pixels are Huffman-decoded on the GPU, smaller ones on the CPU threads);
    where preallocate_width_hint or _height_hint is given, the hardware decoder's resources made up front for a
    batch of `capacity` images of about that size (DALI's hints; DALI also preallocates its batch without them);
    where jpeg_fancy_upsampling is false (DALI's default), chroma upsampled by replication rather than
    nvImageCodec's default interpolation (libjpeg-turbo's fancy upsampling, which the CPU decoder uses)."""
    options = []
    if not args.get("jpeg_fancy_upsampling", True):
        options.extend(f"{module}:fancy_upsampling=0" for module in ("nvjpeg_cuda_decoder", "nvjpeg_hw_decoder"))
    threshold = int(args.get("hybrid_huffman_threshold", DEFAULT_HYBRID_HUFFMAN_THRESHOLD))
    if threshold != DEFAULT_HYBRID_HUFFMAN_THRESHOLD:
        options.append(f"nvjpeg_cuda_decoder:hybrid_huffman_threshold={threshold}")
    hints = {side: int(args.get(f"preallocate_{side}_hint", 0)) for side in ("width", "height")}
    if capacity > 0 and any(hints.values()):
        options.append(f"nvjpeg_hw_decoder:preallocate_batch_size={capacity}")
        options.extend(f"nvjpeg_hw_decoder:preallocate_{side}_hint={hint}" for side, hint in hints.items() if hint)
    return " ".join(options)


class MixedDecoder:
    """One decoders.image / decoders.image_random_crop node on the GPU (image_crop / image_slice too: gpu/decode_roi.py
    hands `prepare` their window rule)."""

    def __init__(self, args: dict, device_id: int, num_threads: int, random_crop: bool, capacity: int = 0,
                 c_api: bool = True, memory: str = "nvimgcodec", cpus: frozenset[int] | None = None):
        self.args, self.device_id, self.num_threads, self.random_crop = args, device_id, num_threads, random_crop
        self.capacity = capacity  # the largest batch it will see (the pipeline's batch_size): see _warm_up
        self.pinned_input = False  # hand nvImageCodec the encoded bytes copied into pinned host memory (C API)
        self._warmed = False
        self.output_type = int(args["output_type"])
        self.hw_load = float(args["hw_decoder_load"])
        self.max_pixels = int(args["max_pixels"])  # checked from the headers in `prepare`, before any allocation
        self._decoder = None
        self._lock = threading.Lock()
        self._lanes: list[DecodeLane] = []  # lane j decodes on decoder j: `self.decoder`, then `_more_decoders`
        self._more_decoders: list = []
        self._lanes_warming = False  # their decoders are being made on the lanes' threads (warm_up_in_lanes)
        self.backend_names: list[str] = []
        self._attempt = 0  # which of _backend_attempts() the decoder was made with
        self._backend_confirmed = False  # it has decoded an image on this GPU
        self.fallbacks = 0
        self.decode_seconds = 0.0  # waiting for nvImageCodec's decode calls
        self.decoded_ahead = 0  # batches whose decode started before their step ran (`start_ahead`, `start_here`)
        self._here: StartedHere | None = None  # the last decode `start_here` started, until its step waits for it
        self.c_api = c_api and self.output_type != YCBCR and capi.available()
        self.ahead_from = AHEAD_FROM  # the smallest batch decoded ahead on a lane (`start_ahead`)
        self.options = decoder_options(args, capacity)
        self.pooled = memory == "pool" and self.c_api  # nvImageCodec's buffers from nvimgcodec_memory's pool
        self.cpus = cpus  # where the lanes' threads run, and nvImageCodec's threads that they start (None: anywhere)

    def _backend_attempts(self) -> list[tuple[list[tuple[int, float]], str]]:
        """Backend lists (kind, load hint) to try in turn, most capable first: a GPU without a hardware decoder
        or CUDA decoding refuses the first ones. With hw_decoder_load 0 the decoder gets the CUDA backend alone
        (what it refuses comes back to `run`, which decodes it on the CPU)."""
        hw, cuda, hybrid = capi.BACKEND_HW_GPU_ONLY, capi.BACKEND_GPU_ONLY, capi.BACKEND_HYBRID
        if self.hw_load <= 0:
            return [([(cuda, 1.0)], "cuda"), ([(hybrid, 1.0)], "hybrid")]
        load, cpu = min(self.hw_load, 1.0), (capi.BACKEND_CPU_ONLY, 1.0)
        return [([(hw, load), (cuda, 1.0), (hybrid, 1.0), cpu], "hardware+cuda+hybrid+cpu"),
                ([(hw, load), (hybrid, 1.0), cpu], "hardware+hybrid+cpu"), ([(cuda, 1.0), cpu], "cuda+cpu")]

    def lane_count(self) -> int:
        """How many decoders decode a large batch's parts at once: two where every image goes to the hardware
        decoder (whose host half is the decode's bottleneck), else one (the CPU and CUDA shares are)."""
        return 2 if self.c_api and self.hw_load >= 1.0 and self.capacity >= 2 * SPLIT_FROM else 1

    def warm_up(self, stream) -> None:
        """Make the decoder and decode its warm-up batch now, not in the first batch (a server's first request)."""
        if not self._warmed:
            with self._lane(0).lock:
                self._first_decoder(stream)

    def warm_up_in_lanes(self) -> None:
        """Make the decoders and decode their warm-up batches on the lanes' threads, which will decode this node's
        batches: started at build, this runs while the pipeline reads and prepares its first batch (fed: while the
        caller readies it and its headers are parsed); lane 0's first, the others' after it. Only where batches go
        to the lanes (a pipeline batch of `ahead_from` or more, the C API)."""
        if not self.c_api or self.capacity < self.ahead_from or self.hw_load <= 0:
            return

        def make(j: int):
            def work(lane: DecodeLane) -> np.ndarray:
                self._lane_decoder(j, lane)
                if j == 0:  # then the others: made beside the first, they delayed its set-up (the first batch)
                    for k in range(1, self.lane_count()):
                        self._lane(k).submit(make(k))
                return np.zeros(0, np.uint32)
            return work

        self._lanes_warming = True
        self._lane(0).submit(make(0))

    def ready_lanes(self) -> int:
        """The lanes a large batch is split over now: `lane_count()`, less the lanes whose decoder is still being
        made at build (`warm_up_in_lanes`): a new pipeline's first batches go whole to lane 0 rather than wait
        for a second decoder's set-up. Lanes split only where every image goes to the hardware decoder, so the
        split changes no pixel."""
        if self._lanes_warming and len(self._more_decoders) < self.lane_count() - 1:
            return 1 + len(self._more_decoders)
        return self.lane_count()

    def _first_decoder(self, stream):
        """`decoder`, warmed up (on `stream`) before its first batch; call holding lane 0's lock."""
        if not self._warmed:
            self._warm_up(self.decoder, self.capacity, stream)
            self._warmed = True  # only now: `warm_up` returns once the warm-up batch is decoded
        return self.decoder

    def _warm_up(self, decoder, capacity: int, stream) -> None:
        """Decode a full batch (`capacity` tiny JPEGs) first. nvImageCodec fixes a backend chain's hardware share
        at a decoder's first call (round(load x that batch)); later, larger batches send the rest to the CUDA
        decoder, which rounds differently, so an image's pixels would depend on its batch mates (a served image
        would differ from the same image in training). After a first call at full size, with hw_decoder_load 1
        every batch goes to the hardware decoder whole; a load below 1 asks for a split, as DALI's does."""
        if not capacity or self.hw_load <= 0:
            return
        tiny = tiny_jpeg()
        encoded = [tiny] * capacity
        if self.c_api:
            prepared = self._prepare_c(encoded, 0, 0)
            self.allocate(prepared, stream)
            decoder.decode(prepared.streams, np.arange(capacity), prepared.shapes, prepared.addresses, stream.ptr,
                           self.output_type == GRAY, False)
            prepared.streams.close()
        else:
            nv = cpu_decode.nvimgcodec_module()
            decoder.decode([nv.CodeStream(tiny.tobytes()) for _ in range(capacity)], cuda_stream=stream.ptr)
        stream.synchronize()

    def _make_decoder(self, first: int = 0):
        nv = None if self.c_api else cpu_decode.nvimgcodec_module()
        errors = []
        attempts = self._backend_attempts()
        for index in range(first, len(attempts)):
            backends, label = attempts[index]
            try:
                if self.c_api:
                    allocators = DecoderMemory.shared(self.device_id).allocators(
                        int(self.args.get("device_memory_padding", 16 << 20)),
                        int(self.args.get("host_memory_padding", 8 << 20))) if self.pooled else (0, 0)
                    decoder = capi.Decoder(capi.Instance.shared(), self.device_id, self.num_threads, backends,
                                           self.options, allocators)
                else:
                    decoder = nv.Decoder(device_id=self.device_id, max_num_cpu_threads=self.num_threads,
                                         backends=[nv.Backend(nv.BackendKind(kind), load_hint=load)
                                                   for kind, load in backends], options=self.options)
                self.backend_names.append(label + (" (C API)" if self.c_api else ""))
                self._attempt = index
                return decoder
            except Exception as exc:  # noqa: BLE001 - nvimgcodec raises RuntimeError with a code
                errors.append(f"{label}: {exc}")
        raise RuntimeError("nvImageCodec could not create a GPU decoder: " + "; ".join(errors))

    def _next_backend(self) -> bool:
        """After a batch that the lone backend refused entirely as unsupported here (a GPU without a hardware
        decoder makes one anyway): move to the next attempt, once, before any image was decoded."""
        self._finish_here()
        if self._backend_confirmed or len(self._backend_attempts()[self._attempt][0]) != 1 or \
                self._attempt + 1 >= len(self._backend_attempts()):
            return False
        with self._lane(0).lock, self._lock:  # not while a decode handed to the lane uses it
            old, self._decoder = self._decoder, self._make_decoder(self._attempt + 1)
        if isinstance(old, capi.Decoder):
            old.close()
        return True

    @property
    def decoder(self):
        if self._decoder is None:
            with self._lock:
                if self._decoder is None:
                    self._decoder = self._make_decoder()
        return self._decoder

    def _lane(self, j: int) -> DecodeLane:
        with self._lock:
            while len(self._lanes) <= j:
                self._lanes.append(DecodeLane(self.device_id, self.cpus))
            return self._lanes[j]

    def _lane_decoder(self, j: int, lane: DecodeLane):
        """Decoder j (call on lane j, holding its lock): the first is `decoder`; the others are made, and warmed
        up for the part of a full batch that a lane decodes (all of it where batches are not split), on first
        use."""
        if j == 0:
            return self._first_decoder(lane.stream)
        while len(self._more_decoders) < j:
            decoder = self._make_decoder(self._attempt)
            self._warm_up(decoder, -(-self.capacity // self.lane_count()), lane.stream)
            self._more_decoders.append(decoder)
        return self._more_decoders[j - 1]

    def release(self) -> None:
        """Drop the decoders (their device buffers go with them), once the decodes handed to the lanes or started
        ahead are done; the next batch makes new ones."""
        self._finish_here()
        lanes = list(self._lanes)
        for lane in lanes:
            lane.close()
        with contextlib.ExitStack() as held:  # no lane decodes meanwhile (a batch handed to one after close())
            for lane in lanes:
                held.enter_context(lane.lock)
            with self._lock:
                decoders = [self._decoder, *self._more_decoders]
                self._decoder, self._more_decoders = None, []
                self._lanes_warming = False  # the next decoders are made when a part first needs them
                self._warmed = False
            for decoder in decoders:
                if isinstance(decoder, capi.Decoder):
                    decoder.close()
        if self.pooled and any(decoders):
            DecoderMemory.shared(self.device_id).trim()  # what the closed decoders held goes back to the device

    def prepare(self, encoded: list, seed: int, first_sample: int, region=None) -> Prepared:
        """Parse every header and, for random crops, choose the windows (sample i's from the per-sample stream
        keyed by (seed, first_sample + i), as the CPU kernel draws it) and cut the sub code streams (host work).
        `region(i, height, width)`, where given, chooses sample i's window (y, x, h, w) in the displayed frame
        instead (image_crop, image_slice); its ValueError fails that sample.
        A header that claims more than `max_pixels` pixels fails its sample here, before anything is allocated."""
        cpu_decode.check_max_pixels(self.max_pixels)
        if self.c_api:
            return self._prepare_c(encoded, seed, first_sample, region)
        nv = cpu_decode.nvimgcodec_module()
        streams = []
        for i, data in enumerate(encoded):
            try:
                streams.append(_parse(data, self.max_pixels))
            except ValueError as exc:
                message = str(exc)
                streams.clear()  # the batch's code streams go now, not with the error's traceback
                raise SampleFailureError(i, message) from None
        if not self.random_crop and region is None:
            return Prepared(streams, [None] * len(streams), encoded)
        args = self.args
        heights = np.fromiter((s.height for s in streams), np.int64, len(streams))
        widths = np.fromiter((s.width for s in streams), np.int64, len(streams))
        if args["adjust_orientation"]:  # windows in the displayed frame, as the CPU kernel and the decoder take them
            turned = self._turned([np.ascontiguousarray(d, np.uint8) for d in encoded])
            heights, widths = _displayed(turned, heights, widths)
        try:
            boxes = self._windows(heights, widths, seed, first_sample, region)
        except SampleFailureError:
            streams.clear()
            raise
        cut = nv.Region
        streams = [s.get_sub_code_stream(region=cut(start=(y, x), end=(y + h, x + w)))
                   for s, (y, x, h, w) in zip(streams, boxes.tolist(), strict=True)]
        return Prepared(streams, [tuple(b) for b in boxes.tolist()], encoded)

    def _turned(self, encoded: list, located: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Whether each image's EXIF orientation swaps its axes (as the CPU kernel reads it); `located`: the
        arrays' addresses and sizes, where known."""
        return exif.batch_orientations(encoded, located) >= 5  # exif.swaps_axes, the batch in one numba call

    def _windows(self, heights: np.ndarray, widths: np.ndarray, seed: int, first_sample: int,
                 region) -> np.ndarray:
        """The (N, 4) windows (y, x, h, w): `region`'s per sample where given (`region.batch(heights, widths)`, where
        it has one, gives them all at once or None), else the random crops'."""
        if region is None:
            args = self.args
            return np.asarray(batch_crop_windows(heights, widths, args["random_area"], args["random_aspect_ratio"],
                                                 args["num_attempts"], seed, first_sample), np.int64)
        batch = getattr(region, "batch", None)  # all windows at once, or None: then each sample's rule
        boxes = batch(heights, widths) if batch is not None else None
        if boxes is not None:
            return boxes
        boxes = np.zeros((len(heights), 4), np.int64)
        for i, (height, width) in enumerate(zip(heights.tolist(), widths.tolist(), strict=True)):
            try:
                boxes[i] = region(i, int(height), int(width))
            except (ValueError, TypeError) as exc:
                raise SampleFailureError(i, str(exc)) from None
        return boxes

    def _prepare_c(self, encoded: list, seed: int, first_sample: int, region=None) -> Prepared:
        arrays = _encoded_arrays(encoded)
        pinned = None
        if self.pinned_input and arrays:
            arrays, pinned = pinned_copies(arrays)
        located = addresses_and_sizes(arrays)  # read by the header parse and the EXIF scan
        streams = capi.CodeStreams(capi.Instance.shared(), arrays, located)
        _refuse_oversized(streams, self.max_pixels)
        _raise_first_failure(streams)
        channels = 1 if self.output_type == GRAY else 3
        heights, widths = streams.heights, streams.widths
        if not self.random_crop and region is None:
            if self.args["adjust_orientation"]:  # the decoder turns by the orientation it parsed
                rotated = streams.infos["orientation"]["rotated"]
                turned = (rotated // 90) % 2 == 1
                heights, widths = _displayed(turned, heights, widths)
            return Prepared(streams, [None] * len(arrays), arrays, _shapes(heights, widths, channels),
                            pinned=pinned)
        args = self.args
        if args["adjust_orientation"]:  # windows in the displayed frame, as the CPU kernel and the decoder take them
            turned = self._turned(arrays, located)
            heights, widths = _displayed(turned, heights, widths)
        try:
            boxes = self._windows(heights, widths, seed, first_sample, region)
        except SampleFailureError:
            streams.close()
            raise
        streams.cut(boxes)
        _raise_first_failure(streams)
        shapes = _shapes(boxes[:, 2], boxes[:, 3], channels)
        return Prepared(streams, [tuple(b) for b in boxes.tolist()], arrays, shapes, pinned=pinned)

    def allocate(self, prepared: Prepared, stream) -> None:
        """The batch's output memory (one block of the pipeline's per-batch pool) and its image records, ahead of
        the decode (C API path; call with the GPU context active): later steps can plan their launches on them."""
        if prepared.shapes is None or prepared.memory is not None:
            return
        shapes = prepared.shapes
        sizes = (shapes[:, 0] * shapes[:, 1] * shapes[:, 2] + _ALIGN - 1) // _ALIGN * _ALIGN
        ends = np.cumsum(sizes)
        offsets = (ends - sizes).astype(np.uint64)
        memory = batch_allocation(max(int(ends[-1]) if len(ends) else 0, _ALIGN), "decoded images")
        prepared.memory, prepared.addresses = memory, memory.ptr + offsets
        prepared.images = [DeviceImage.at(memory, address, shape, stream)
                           for address, shape in zip(prepared.addresses.tolist(), map(tuple, shapes.tolist()),
                                                     strict=True)]

    def _run_c(self, prepared: Prepared, stream, meanwhile=None) -> list:
        """The C API decode into the batch's allocation: one decode call, CPU fallback per failed image.
        `meanwhile()` runs while the decode is under way (host work that does not need the decoded pixels)."""
        self.allocate(prepared, stream)
        gray = self.output_type == GRAY
        try:
            while True:
                statuses = self._decode_c(prepared, stream, gray, meanwhile)
                meanwhile = None
                ok = statuses == capi.PROCESSING_SUCCESS
                if ok.any():
                    self._backend_confirmed = True
                elif len(statuses) and (statuses == capi.PROCESSING_BACKEND_UNSUPPORTED).all() and \
                        (prepared.attempt < self._attempt or self._next_backend()):
                    continue  # again with the next backend (or the one a batch before moved to)
                break
        finally:
            prepared.streams.close()
        out = list(prepared.images)
        if not ok.all():
            for i in np.flatnonzero(~ok).tolist():
                out[i] = self._cpu_decode(prepared, i)
        if self.output_type == BGR:
            cp = cupy()
            out = [self._channels(cp.asarray(image), gray) for image in out]
        return out

    def _decode_c(self, prepared: Prepared, stream, gray: bool, meanwhile) -> np.ndarray:
        """One batch decode's per-image statuses (all failed where the call itself fails), with `meanwhile()` run
        between starting it and waiting for it; `decode_seconds` counts the time spent waiting for the decoder.
        A batch started ahead (handed to the lanes, or `start_here`) is only waited for; else a small one decodes
        on `stream` in this thread."""
        ahead, prepared.ahead = prepared.ahead, None
        if self._here is not ahead:
            self._finish_here()  # a decode started for a batch that failed before its step: done first
        start = time.perf_counter()
        if ahead is not None:
            self.decoded_ahead += 1
        else:
            prepared.attempt = self._attempt
            parts = self._lane_parts(len(prepared.shapes))
            if len(parts) > 1:
                ahead = self._hand_to_lanes(prepared, parts, stream, gray)
        if ahead is None:
            with self._lane(0).lock:
                which = np.arange(len(prepared.shapes))
                calls = [which[chunk] for chunk in self._call_parts(which)]
                statuses = self._decode_calls(self._first_decoder(stream), prepared, calls, stream, gray, meanwhile)
        else:
            try:
                if meanwhile is not None:
                    meanwhile()
            finally:  # the parts read the batch's code streams and write its memory: always waited for
                statuses = ahead.statuses()  # done on the device too: `stream` reads the images after this
                if self._here is ahead:
                    self._here = None
        self.decode_seconds += time.perf_counter() - start
        return statuses

    def _decode_calls(self, decoder, prepared: Prepared, calls: list[np.ndarray], stream, gray: bool,
                      meanwhile=None) -> np.ndarray:
        """The per-image statuses of decoding the batch's images in `calls` (the indices of each call, in turn) on
        `stream`, `meanwhile()` run while the first call decodes. nvImageCodec splits a call between its backends
        by the call's images, so the calls of a coalesced batch are those each batch would make alone
        (`_call_parts`, `_lane_parts`): the same images take the same backend, the same pixels."""
        statuses = []
        for part in calls:
            started = self._start(decoder, prepared, part, stream, gray)
            try:
                if meanwhile is not None:
                    meanwhile()
            finally:  # the decode writes into the batch's memory: always waited for
                meanwhile = None
                statuses.append(started.finish() if started is not None else np.zeros(len(part), np.uint32))
        if prepared.pinned is not None:  # the decoder's copies of the encoded bytes may still be queued on `stream`
            hold_until_read(stream, prepared.pinned)
        return statuses[0] if len(statuses) == 1 else np.concatenate(statuses)

    def _call_parts(self, items) -> list[slice]:
        """The slices of `items` decoded in one call each: all of them, or for more than the decoder's capacity
        (a coalesced batch) consecutive runs of `capacity`, one per batch."""
        count = len(items)
        if not 0 < self.capacity < count:
            return [slice(0, count)]
        return [slice(begin, begin + self.capacity) for begin in range(0, count, self.capacity)]

    def _lane_parts(self, count: int) -> list[list[np.ndarray]]:
        """The calls of each lane that takes part in a batch of `count` images. Every batch of `capacity` (a
        coalesced batch holds several) is split between the lanes as `split` splits that batch alone; batches that
        are not split (below hw_decoder_load 1, or small) go whole to MEMBER_LANES lanes in turn, each lane's
        decoder warmed up at `capacity` as the first is, so each call sends the same images to the same backends."""
        chunks = self._call_parts(range(count))
        if len(chunks) > 1 and self.lane_count() == 1 and self.c_api and self.hw_load > 0:
            per_lane: list[list[np.ndarray]] = [[] for _ in range(MEMBER_LANES)]
            for k, chunk in enumerate(chunks):
                per_lane[k % MEMBER_LANES].append(np.arange(chunk.start, chunk.stop))
        else:
            lanes = self.ready_lanes()
            per_lane = [[] for _ in range(lanes)]
            for chunk in chunks:
                for j, part in enumerate(split(chunk.stop - chunk.start, lanes)):
                    per_lane[j].append(part + chunk.start)
        return [calls for calls in per_lane if calls]

    def _start(self, decoder, prepared: Prepared, which: np.ndarray, stream, gray: bool):
        """The C API's started decode of the batch's images `which` on `stream`, or None where the call failed
        (those images then go to the CPU fallback)."""
        try:
            return decoder.start(prepared.streams, which, prepared.shapes[which], prepared.addresses[which],
                                 stream.ptr, gray, bool(self.args["adjust_orientation"]))
        except capi.CApiError:
            return None

    def _hand_to_lanes(self, prepared: Prepared, parts: list[list[np.ndarray]], stream, gray: bool) -> LaneDecode:
        """The batch's decode, lane j's calls (from `_lane_parts`) on lane j's thread, decoder and stream. The lanes'
        streams wait for what `stream` (the pipeline's, current when the batch's memory was allocated from its
        pool) has queued so far: work still reading a block that came back to the pool before the decode writes
        it."""
        queued = events.record(stream)

        def part(j: int, calls: list[np.ndarray]):
            def work(lane: DecodeLane) -> np.ndarray:
                events.wait(lane.stream, queued)
                return self._decode_calls(self._lane_decoder(j, lane), prepared, calls, lane.stream, gray)
            return work

        return LaneDecode([(np.concatenate(calls), self._lane(j).submit(part(j, calls)))
                           for j, calls in enumerate(parts)], len(prepared.shapes))

    def start_ahead(self, prepared: Prepared, stream) -> None:
        """Hand a prepared batch's decode to the lanes now (call in the look-ahead, context active), so that it
        runs while the batch before is still in its later steps on `stream`: DALI's mixed stage runs ahead of its
        GPU stage the same way. The lanes decode batches in turn; `run` waits for this one."""
        if prepared.shapes is None or prepared.ahead is not None or len(prepared.shapes) < self.ahead_from:
            return  # a small batch decodes faster in the step's own thread than after a hand-off to another
        self.allocate(prepared, stream)  # done by `prepare` already, where the step prepared it (the lanes warm
        prepared.attempt = self._attempt  # their decoders up themselves before their first part)
        prepared.ahead = self._hand_to_lanes(prepared, self._lane_parts(len(prepared.shapes)), stream,
                                             self.output_type == GRAY)

    def start_here(self, prepared: Prepared, stream) -> None:
        """Start a prepared batch's decode now, where its step runs next in this thread (fed inputs, no look-ahead):
        a batch for the lanes goes to them, a smaller one is submitted on `stream` here. The host work up to the
        step's run (the rest of the CPU stage, the next steps' plans) then overlaps the decode, as DALI's executor
        queues a batch's decode before its later stages' host work. Call with the GPU context active."""
        if prepared.shapes is None or prepared.ahead is not None or not len(prepared.shapes):
            return
        self._finish_here()
        count, gray = len(prepared.shapes), self.output_type == GRAY
        prepared.attempt = self._attempt
        several_calls = 0 < self.capacity < count  # a coalesced batch
        if count >= SPLIT_FROM or several_calls:  # a small batch (a request) is not split: no lanes to ask about
            parts = self._lane_parts(count)
            if len(parts) > 1:
                prepared.ahead = self._hand_to_lanes(prepared, parts, stream, gray)
                return
        if several_calls:  # one lane: the run makes the calls in turn
            return
        lock = self._lane(0).lock
        with lock:
            started = self._start(self._first_decoder(stream), prepared, np.arange(count), stream, gray)
        prepared.ahead = self._here = StartedHere(lock, started, count, prepared, stream)

    def _finish_here(self) -> None:
        """Wait for the decode `start_here` started last whose step never waited for it (its batch failed before
        the step, and an exception may still hold the batch): before this decoder decodes again or is closed, so
        that a decoder has one started decode at a time and none outlives it. Call without lane 0's lock."""
        here, self._here = self._here, None
        if here is not None:
            try:
                here.statuses()
            except Exception:  # noqa: BLE001 - its batch failed already; its decode only has to end
                pass

    def run(self, prepared: Prepared, stream, meanwhile=None) -> list:
        """Decode the batch on `stream`; every output is checked, and a None is decoded again on the CPU.
        `meanwhile()` is called once, while the decode runs where it can (the C API path), else before it."""
        self.warm_up(stream)
        if prepared.shapes is not None:
            return self._run_c(prepared, stream, meanwhile)
        if meanwhile is not None:
            meanwhile()
        cp = cupy()
        nv = cpu_decode.nvimgcodec_module()
        gray = self.output_type == GRAY
        if self.output_type == YCBCR:
            return [self._cpu_decode(prepared, i) for i in range(len(prepared.streams))]
        params = nv.DecodeParams(color_spec=nv.ColorSpec.GRAY if gray else nv.ColorSpec.SRGB,
                                 apply_exif_orientation=self.args["adjust_orientation"])
        start = time.perf_counter()
        streams, images = prepared.streams, []
        for part in (streams[chunk] for chunk in self._call_parts(streams)):  # at most `capacity` images a call
            try:
                images.extend(self.decoder.decode(part, params=params, cuda_stream=stream.ptr))
            except Exception:  # noqa: BLE001 - a failing batch call: decode one by one below
                images.extend([None] * len(part))
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


@gpu_kernel("decoders.image", "decoders.image_random_crop")
class MixedDecodeKernel:
    """The mixed decoders as a GPU step: the host half (`prepare`: headers, crop windows, the outputs' memory) runs
    ahead in the CPU stage; `run` decodes on the pipeline's stream."""

    def __init__(self, setup):
        self.seed = setup.seed
        self.decoder = MixedDecoder(setup.args, setup.device_id, setup.num_threads,
                                    random_crop=setup.op == "decoders.image_random_crop",
                                    capacity=setup.batch_size, c_api=setup.options.nvimgcodec_capi,
                                    memory=setup.options.decoder_memory,
                                    cpus=pipeline_cpus(setup.options.cpu_affinity, setup.device_id))

    def prepare(self, batch):
        encoded = batch.value(0)
        if hasattr(encoded, "as_cpu"):  # it came out of the GPU stage
            encoded = encoded.as_cpu()
        prepared = self.decoder.prepare(sample_list(encoded), self.seed, batch.first_sample)
        with batch.active():  # the outputs' memory and records now: the next steps can plan on them
            self.decoder.allocate(prepared, batch.stream)
        return prepared

    def launch_ahead(self, batch, now: bool = False) -> None:
        """Hand the decode of what `prepare` made of this batch (`batch.ahead`) to the decode lanes, from the
        look-ahead, while the batch before runs its later steps: the decoder does not wait for them. `now`: the
        GPU stage runs this batch next in this thread (fed inputs, or no look-ahead), so even a small batch starts
        here, and the stage's host work until the decode step overlaps the decode."""
        (self.decoder.start_here if now else self.decoder.start_ahead)(batch.ahead, batch.stream)

    def run(self, batch):
        prepared = batch.ahead
        if prepared is None:  # its input came out of the GPU stage itself (e.g. after a .cpu()), or a branch
            prepared = self.prepare(batch)
        return self.decoder.run(prepared, batch.stream, batch.meanwhile)

    def warm_up(self, stream) -> None:
        self.decoder.warm_up(stream)

    def warm_up_in_lanes(self) -> None:
        self.decoder.warm_up_in_lanes()

    def release(self) -> None:
        self.decoder.release()

