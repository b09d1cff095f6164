"""nvImageCodec's C API through ctypes: batch decodes that never hand the GIL back and forth per image.

Why: the Python binding's `Decoder.decode` releases and re-takes the GIL twice per image before it decodes (image
info, then output allocation). While another thread runs Python, every re-take waits out the interpreter's switch
interval, so a 256-image batch that decodes in 8 ms took over a second beside the CPU stage
(benchmarks/probes/gil_decode_probe.py). Here every per-image loop (parse, cut regions, create output images, decode,
destroy) is one numba function that calls the C functions without the GIL: one release per loop, per batch.

The structures are numpy dtypes with the offsets of nvimgcodec.h for the versions in `SUPPORTED` (checked against
the header by tests/test_nvimgcodec_capi.py); any other version, or a missing library, makes `available()` false
and callers use the Python binding."""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import threading
from pathlib import Path

import numpy as np

from headrace_kernels.host_arrays import addresses_and_sizes

SUPPORTED = range(900, 1000)  # nvImageCodec 0.9.x: MAKE_SEMANTIC_VERSION(major, minor, patch)

# nvimgcodecStructureType_t
ST_INSTANCE_CREATE_INFO, ST_DEVICE_ALLOCATOR, ST_PINNED_ALLOCATOR, ST_DECODE_PARAMS = 2, 3, 4, 5
ST_ORIENTATION, ST_REGION = 7, 8
ST_CODE_STREAM_VIEW, ST_IMAGE_INFO, ST_IMAGE_PLANE_INFO, ST_BACKEND, ST_BACKEND_PARAMS = 9, 11, 12, 17, 29
ST_EXECUTION_PARAMS, ST_PROPERTIES = 30, 1
# enums
BACKEND_CPU_ONLY, BACKEND_GPU_ONLY, BACKEND_HYBRID, BACKEND_HW_GPU_ONLY = 1, 2, 3, 4
LOAD_HINT_FIXED = 2
COLORSPEC_SRGB, COLORSPEC_GRAY = 1, 2
SAMPLEFORMAT_P_Y, SAMPLEFORMAT_I_RGB = 3, 8
SAMPLE_UINT8 = 0x0802
BUFFER_DEVICE, BUFFER_HOST = 1, 2
PROCESSING_SUCCESS = 1
PROCESSING_BACKEND_UNSUPPORTED = 0x13  # "no one from allowed backends is supported"
DEVICE_CPU_ONLY = -99999

_HEADER = [("struct_type", "<i4"), ("_pad0", "<i4"), ("struct_size", "<u8"), ("struct_next", "<u8")]


def _struct(fields: list, size: int) -> np.dtype:
    """A C structure as a numpy dtype: (name, type, offset) fields and the C sizeof."""
    names = [f[0] for f in fields]
    return np.dtype({"names": names, "formats": [f[1] for f in fields], "offsets": [f[2] for f in fields],
                     "itemsize": size})


def _with_header(fields: list, size: int) -> np.dtype:
    return _struct([("struct_type", "<i4", 0), ("struct_size", "<u8", 8), ("struct_next", "<u8", 16), *fields], size)


PROPERTIES = _with_header([("version", "<u4", 24), ("cudart_version", "<u4", 28)], 32)
ORIENTATION = _with_header([("rotated", "<i4", 24), ("flip_x", "<i4", 28), ("flip_y", "<i4", 32)], 40)
PLANE_INFO = _with_header([("width", "<u4", 24), ("height", "<u4", 28), ("row_stride", "<u8", 32),
                           ("num_channels", "<u4", 40), ("sample_type", "<i4", 44), ("precision", "u1", 48)], 56)
MAX_PLANES = 32
IMAGE_INFO = _with_header([("codec_name", "S256", 24), ("color_spec", "<i4", 280), ("chroma_subsampling", "<i4", 284),
                           ("sample_format", "<i4", 288), ("orientation", ORIENTATION, 296),
                           ("num_planes", "<u4", 336), ("plane_info", (PLANE_INFO, MAX_PLANES), 344),
                           ("buffer", "<u8", 2136), ("buffer_kind", "<i4", 2144), ("cuda_stream", "<u8", 2152)],
                          2160)
REGION = _with_header([("ndim", "<i4", 24), ("start", ("<i4", 5), 28), ("end", ("<i4", 5), 48),
                       ("out_of_bounds_policy", "<i4", 68), ("out_of_bounds_samples", ("<u4", 10), 72)], 112)
CODE_STREAM_VIEW = _with_header([("image_idx", "<u8", 24), ("region", REGION, 32), ("bitstream_offset", "<u8", 144)],
                                152)
DECODE_PARAMS = _with_header([("apply_exif_orientation", "<i4", 24)], 32)
BACKEND_PARAMS = _with_header([("load_hint", "<f4", 24), ("load_hint_policy", "<i4", 28)], 32)
BACKEND = _with_header([("kind", "<i4", 24), ("params", BACKEND_PARAMS, 32)], 64)
EXECUTION_PARAMS = _with_header([("device_allocator", "<u8", 24), ("pinned_allocator", "<u8", 32),
                                 ("max_num_cpu_threads", "<i4", 40), ("executor", "<u8", 48), ("device_id", "<i4", 56),
                                 ("pre_init", "<i4", 60), ("skip_pre_sync", "<i4", 64), ("num_backends", "<i4", 68),
                                 ("backends", "<u8", 72)], 80)
DEVICE_ALLOCATOR = _with_header([("device_malloc", "<u8", 24), ("device_free", "<u8", 32), ("device_ctx", "<u8", 40),
                                 ("device_mem_padding", "<u8", 48)], 56)
PINNED_ALLOCATOR = _with_header([("pinned_malloc", "<u8", 24), ("pinned_free", "<u8", 32), ("pinned_ctx", "<u8", 40),
                                 ("pinned_mem_padding", "<u8", 48)], 56)
INSTANCE_CREATE_INFO = _with_header([("load_builtin_modules", "<i4", 24), ("load_extension_modules", "<i4", 28),
                                     ("extension_modules_path", "<u8", 32), ("create_debug_messenger", "<i4", 40),
                                     ("debug_messenger_desc", "<u8", 48), ("message_severity", "<u4", 56),
                                     ("message_category", "<u4", 60)], 64)

STRUCTS = {  # C name: (layout, nvimgcodecStructureType_t)
    "nvimgcodecProperties_t": (PROPERTIES, ST_PROPERTIES), "nvimgcodecOrientation_t": (ORIENTATION, ST_ORIENTATION),
    "nvimgcodecImagePlaneInfo_t": (PLANE_INFO, ST_IMAGE_PLANE_INFO),
    "nvimgcodecImageInfo_t": (IMAGE_INFO, ST_IMAGE_INFO), "nvimgcodecRegion_t": (REGION, ST_REGION),
    "nvimgcodecCodeStreamView_t": (CODE_STREAM_VIEW, ST_CODE_STREAM_VIEW),
    "nvimgcodecDecodeParams_t": (DECODE_PARAMS, ST_DECODE_PARAMS),
    "nvimgcodecBackendParams_t": (BACKEND_PARAMS, ST_BACKEND_PARAMS), "nvimgcodecBackend_t": (BACKEND, ST_BACKEND),
    "nvimgcodecExecutionParams_t": (EXECUTION_PARAMS, ST_EXECUTION_PARAMS),
    "nvimgcodecDeviceAllocator_t": (DEVICE_ALLOCATOR, ST_DEVICE_ALLOCATOR),
    "nvimgcodecPinnedAllocator_t": (PINNED_ALLOCATOR, ST_PINNED_ALLOCATOR),
    "nvimgcodecInstanceCreateInfo_t": (INSTANCE_CREATE_INFO, ST_INSTANCE_CREATE_INFO)}


def new(name: str, count: int | None = None) -> np.ndarray:
    """Zeroed structure(s) with struct_type and struct_size filled in (nested headers too)."""
    template = _template(name)
    return np.tile(template.view(np.uint8), 1 if count is None else count).view(template.dtype)  # padding too


@functools.cache
def _template(name: str) -> np.ndarray:
    """One structure of `name` with its headers filled, copied by `new` (filling an image info's headers field by
    field took 10 us a call)."""
    array = np.zeros(1, STRUCTS[name][0])
    _fill_headers(array, name)
    array.flags.writeable = False
    return array


def _fill_headers(array: np.ndarray, name: str) -> None:
    dtype, struct_type = STRUCTS[name]
    array["struct_type"] = struct_type
    array["struct_size"] = dtype.itemsize
    nested = {"nvimgcodecImageInfo_t": [("orientation", "nvimgcodecOrientation_t"),
                                        ("plane_info", "nvimgcodecImagePlaneInfo_t")],
              "nvimgcodecCodeStreamView_t": [("region", "nvimgcodecRegion_t")],
              "nvimgcodecBackend_t": [("params", "nvimgcodecBackendParams_t")]}
    for field, inner in nested.get(name, []):
        _fill_headers(array[field], inner)


def pointer(array: np.ndarray, index: int = 0) -> int:
    return array.ctypes.data + index * array.dtype.itemsize


class CApiError(RuntimeError):
    pass


def _package_dir() -> Path | None:
    """The folder of the nvidia.nvimgcodec package, found without importing its Python binding (which the C API
    does not need, and whose import took a second of a fresh process's first batch on an H100)."""
    try:
        spec = importlib.util.find_spec("nvidia.nvimgcodec")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


class Library:
    """libnvimgcodec through ctypes (every call releases the GIL), and numba loops over its per-image calls."""

    def __init__(self, path: Path):
        self.path = path
        self.c = ctypes.CDLL(str(path))
        u64, i32, status = ctypes.c_uint64, ctypes.c_int32, ctypes.c_int
        signatures = {  # every pointer travels as a 64-bit integer (x86-64 / aarch64 ABI)
            "nvimgcodecGetProperties": [u64],
            "nvimgcodecInstanceCreate": [u64, u64],
            "nvimgcodecInstanceDestroy": [u64],
            "nvimgcodecCodeStreamCreateFromHostMem": [u64, u64, u64, u64, u64],
            "nvimgcodecCodeStreamDestroy": [u64],
            "nvimgcodecCodeStreamGetImageInfo": [u64, u64],
            "nvimgcodecCodeStreamGetSubCodeStream": [u64, u64, u64],
            "nvimgcodecImageCreate": [u64, u64, u64],
            "nvimgcodecImageDestroy": [u64],
            "nvimgcodecDecoderCreate": [u64, u64, u64, ctypes.c_char_p],
            "nvimgcodecDecoderDestroy": [u64],
            "nvimgcodecDecoderDecode": [u64, u64, u64, i32, u64, u64],
            "nvimgcodecFutureWaitForAll": [u64],
            "nvimgcodecFutureGetProcessingStatus": [u64, u64, u64],
            "nvimgcodecFutureDestroy": [u64],
        }
        for name, args in signatures.items():
            function = getattr(self.c, name)
            function.argtypes, function.restype = args, status
        properties = new("nvimgcodecProperties_t")
        self.check(self.c.nvimgcodecGetProperties(pointer(properties)), "nvimgcodecGetProperties")
        self.version = int(properties["version"][0])
        self._loops = None
        self._loops_lock = threading.Lock()

    @staticmethod
    def check(status: int, what: str) -> None:
        if status != 0:
            raise CApiError(f"{what} failed with nvimgcodecStatus_t {status}")

    @property
    def loops(self):
        """The numba loops of capi_loops bound to this library's functions (numba loads them from its disk cache,
        or compiles them, on first use)."""
        if self._loops is None:
            with self._loops_lock:
                if self._loops is None:
                    self._loops = _compile_loops(self.c)
        return self._loops


def _compile_loops(c):
    """The numba loops (headrace_kernels.capi_loops, cached on disk) with this library's functions bound in."""
    import types

    from headrace_kernels import capi_loops as loops
    from headrace_kernels.numba_calls import bind

    create, get_info = c.nvimgcodecCodeStreamCreateFromHostMem, c.nvimgcodecCodeStreamGetImageInfo
    get_sub, destroy_stream = c.nvimgcodecCodeStreamGetSubCodeStream, c.nvimgcodecCodeStreamDestroy
    create_image, destroy_image = c.nvimgcodecImageCreate, c.nvimgcodecImageDestroy
    decode, wait = c.nvimgcodecDecoderDecode, c.nvimgcodecFutureWaitForAll
    get_status, destroy_future = c.nvimgcodecFutureGetProcessingStatus, c.nvimgcodecFutureDestroy
    return types.SimpleNamespace(
        parse=bind(loops.parse, create, get_info), cut=bind(loops.cut, get_sub),
        destroy_streams=bind(loops.destroy_streams, destroy_stream),
        submit_decode=bind(loops.submit_decode, create_image, destroy_image, decode),
        finish_decode=bind(loops.finish_decode, wait, get_status, destroy_future, destroy_image))


def _addresses(array: np.ndarray) -> np.ndarray:
    """The address of every element of a contiguous 1-D array, as uint64."""
    start, step = array.ctypes.data, array.dtype.itemsize
    return np.arange(start, start + len(array) * step, step, dtype=np.uint64)


@functools.lru_cache(maxsize=1)
def library() -> Library | None:
    """The C library next to the installed Python binding, when its version's layouts are known here."""
    directory = _package_dir()
    if directory is None or not (directory / "libnvimgcodec.so.0").is_file():
        return None
    try:
        lib = Library(directory / "libnvimgcodec.so.0")
    except (OSError, AttributeError, CApiError):
        return None
    return lib if lib.version in SUPPORTED else None


def available() -> bool:
    return library() is not None


class Instance:
    """One nvimgcodecInstance_t with the built-in and extension modules (as the Python binding makes its own)."""

    _lock = threading.Lock()
    _shared: dict[str, Instance] = {}

    def __init__(self, lib: Library):
        self.lib = lib
        info = new("nvimgcodecInstanceCreateInfo_t")
        info["load_builtin_modules"] = 1
        info["load_extension_modules"] = 1
        handle = np.zeros(1, np.uint64)
        lib.check(lib.c.nvimgcodecInstanceCreate(pointer(handle), pointer(info)), "nvimgcodecInstanceCreate")
        self.handle = int(handle[0])

    @classmethod
    def shared(cls) -> Instance:
        lib = library()
        if lib is None:
            raise CApiError("nvImageCodec's C library is not available in a supported version")
        with cls._lock:
            instance = cls._shared.get("default")
            if instance is None:
                instance = cls._shared["default"] = cls(lib)
        return instance


class CodeStreams:
    """A batch of parsed code streams (with their image infos), and the sub code streams cut for regions. The
    encoded bytes must stay alive and unchanged until `close()`: nvImageCodec reads them in place."""

    def __init__(self, instance: Instance, encoded: list, located: tuple[np.ndarray, np.ndarray] | None = None):
        """`encoded`: C-contiguous uint8 arrays; `located`: their `host_arrays.addresses_and_sizes`, where the
        caller has them already."""
        self.instance, self.lib = instance, instance.lib
        n = len(encoded)
        self.encoded = encoded
        self.handles = np.zeros(n, np.uint64)
        self.parents = np.zeros(n, np.uint64)  # the whole streams of regions cut from them
        self.infos = new("nvimgcodecImageInfo_t", n)
        data_at, sizes = located if located is not None else addresses_and_sizes(encoded)
        sizes = sizes.astype(np.uint64)
        statuses = np.zeros(n, np.int32)
        self.lib.loops.parse(instance.handle, self.handles, _addresses(self.handles), data_at, sizes,
                             _addresses(self.infos), statuses)
        self.failed: dict[int, str] = {}
        for i in np.flatnonzero(statuses).tolist():
            self.failed[i] = "the encoded image is empty (0 bytes)" if statuses[i] == -1 else \
                f"not a decodable image (nvImageCodec status {statuses[i]} reading its header)"

    @property
    def heights(self) -> np.ndarray:
        return self.infos["plane_info"][:, 0]["height"].astype(np.int64)

    @property
    def widths(self) -> np.ndarray:
        return self.infos["plane_info"][:, 0]["width"].astype(np.int64)

    def cut(self, boxes: np.ndarray) -> None:
        """Replace each stream by its sub code stream of region (y, x, h, w) (rows of `boxes`)."""
        n = len(self.handles)
        views = new("nvimgcodecCodeStreamView_t", n)
        region = views["region"]
        region["ndim"] = 2
        region["start"][:, 0], region["start"][:, 1] = boxes[:, 0], boxes[:, 1]
        region["end"][:, 0], region["end"][:, 1] = boxes[:, 0] + boxes[:, 2], boxes[:, 1] + boxes[:, 3]
        self.parents, self.handles = self.handles, np.zeros(n, np.uint64)
        statuses = np.zeros(n, np.int32)
        self.lib.loops.cut(self.parents, _addresses(self.handles), _addresses(views), statuses)
        for i in np.flatnonzero(statuses).tolist():
            self.failed[i] = f"nvImageCodec could not cut the region {tuple(boxes[i])} (status {statuses[i]})"

    def close(self) -> None:
        """Destroy the streams (the handles are zeroed: a second call, the collector's, calls nothing)."""
        loops = self.lib.loops
        if self.handles.any():
            loops.destroy_streams(self.handles)
        if self.parents.any():  # regions were cut: their whole streams go too
            loops.destroy_streams(self.parents)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class StartedDecode:
    """A batch decode submitted by `Decoder.start`: `finish()` waits for it and returns the per-image statuses."""

    def __init__(self, lib: Library, n: int):
        self.lib = lib
        self.images = np.zeros(n, np.uint64)
        self.future = np.zeros(1, np.uint64)
        self.statuses = np.zeros(n, np.uint32)
        self.submitted = False
        self.keep: tuple = ()  # what nvImageCodec reads until the decode is done

    def finish(self) -> np.ndarray:
        if self.submitted:
            self.submitted = False
            count = np.zeros(1, np.uint64)
            status = self.lib.loops.finish_decode(self.images, self.future, self.statuses.ctypes.data,
                                                  count.ctypes.data)
            self.keep = ()
            self.lib.check(int(status), "nvImageCodec's batch decode (its statuses)")
        return self.statuses


class Decoder:
    """One nvimgcodecDecoder_t: `backends` is a list of (kind, load_hint); options default to the Python binding's
    (none in 0.9: fancy upsampling on, as libjpeg-turbo's default)."""

    def __init__(self, instance: Instance, device_id: int, num_threads: int, backends: list[tuple[int, float]],
                 options: str = "", allocators: tuple[int, int] = (0, 0)):
        self.instance, self.lib = instance, instance.lib
        self.backends = new("nvimgcodecBackend_t", len(backends))
        for i, (kind, load) in enumerate(backends):
            self.backends[i]["kind"] = kind
            self.backends[i]["params"]["load_hint"] = load
            self.backends[i]["params"]["load_hint_policy"] = LOAD_HINT_FIXED
        params = new("nvimgcodecExecutionParams_t")
        params["device_id"] = device_id
        # (device, pinned) allocators' addresses; 0: nvImageCodec's own (nvimgcodec_memory has a pool's). nvJPEG
        # takes custom allocators only as a pair, and nvImageCodec 0.9 reads the pinned one's padding wherever a
        # device allocator is given
        params["device_allocator"], params["pinned_allocator"] = allocators
        params["max_num_cpu_threads"] = num_threads
        params["num_backends"] = len(backends)
        params["backends"] = self.backends.ctypes.data
        handle = np.zeros(1, np.uint64)
        self.lib.check(self.lib.c.nvimgcodecDecoderCreate(instance.handle, pointer(handle), pointer(params),
                                                          options.encode()), "nvimgcodecDecoderCreate")
        self.handle = int(handle[0])
        if not self.handle:
            raise CApiError("nvimgcodecDecoderCreate returned no decoder")
        self.cpu_only = all(kind == BACKEND_CPU_ONLY for kind, _ in backends)
        self._params = {}  # the decode parameters by apply_exif_orientation, made once (nvImageCodec only reads them)
        for apply_exif in (False, True):
            params = self._params[apply_exif] = new("nvimgcodecDecodeParams_t")
            params["apply_exif_orientation"] = int(apply_exif)

    def decode(self, streams: CodeStreams, which: np.ndarray, shapes: np.ndarray, buffers: np.ndarray,
               stream_ptr: int, gray: bool, apply_exif: bool) -> np.ndarray:
        """Decode streams[which] into `buffers` (one address per decoded image, HWC uint8 of `shapes` rows (h, w,
        c), rows packed) and wait. Returns each image's nvimgcodecProcessingStatus_t (PROCESSING_SUCCESS: decoded)."""
        return self.start(streams, which, shapes, buffers, stream_ptr, gray, apply_exif).finish()

    def start(self, streams: CodeStreams, which: np.ndarray, shapes: np.ndarray, buffers: np.ndarray,
              stream_ptr: int, gray: bool, apply_exif: bool) -> StartedDecode:
        """Start decoding as `decode` does, without waiting: one numba call without the GIL creates the output
        images and submits the batch. The caller can work meanwhile, then calls `finish()` on the result (always:
        the streams, buffers and images must outlive the decode)."""
        n = len(which)
        started = StartedDecode(self.lib, n)
        if n == 0:
            return started
        infos = streams.infos[which]  # the streams' own infos (orientation included: the decoder reads it there)
        infos["chroma_subsampling"] = 0
        infos["color_spec"] = COLORSPEC_GRAY if gray else COLORSPEC_SRGB
        infos["sample_format"] = SAMPLEFORMAT_P_Y if gray else SAMPLEFORMAT_I_RGB
        infos["num_planes"] = 1
        plane = infos["plane_info"][:, 0]
        plane["height"], plane["width"], plane["num_channels"] = shapes[:, 0], shapes[:, 1], shapes[:, 2]
        plane["row_stride"] = shapes[:, 1] * shapes[:, 2]
        plane["sample_type"] = SAMPLE_UINT8
        plane["precision"] = 0
        infos["buffer"] = buffers
        infos["buffer_kind"] = BUFFER_HOST if self.cpu_only else BUFFER_DEVICE
        infos["cuda_stream"] = stream_ptr
        code_streams = np.ascontiguousarray(streams.handles[which])
        params = self._params[bool(apply_exif)]
        started.keep = (infos, code_streams)
        status = self.lib.loops.submit_decode(self.instance.handle, self.handle, started.images,
                                              _addresses(started.images), _addresses(infos), code_streams.ctypes.data,
                                              pointer(params), pointer(started.future))
        self.lib.check(int(status), "nvImageCodec's batch decode")
        started.submitted = True
        return started

    def close(self) -> None:
        if getattr(self, "handle", 0):
            self.lib.c.nvimgcodecDecoderDestroy(self.handle)
            self.handle = 0

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
