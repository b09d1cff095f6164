"""The fused resize + crop_mirror_normalize's plans kept by image shape (headrace_kernels.gpu.plan_cache).

Without a GPU: a host buffer stands in for device memory (its address is real, so the test reads the tap tables
where the records point) and the kept plans must equal a fresh plan: same records, apart from the input addresses
and where the tables lie, and the same tables (exact: integers and float32 made by the same code). On a GPU: a
served pipeline's outputs are bit for bit those of the same pipeline with the cache off, over batches whose image
sizes recur and change, and with a CPU fallback in a batch on kept records."""

from __future__ import annotations

import ctypes
import types as pytypes

import numpy as np
import pytest
from triton_helpers import served_preprocess

from headrace import types
from headrace.data.synthetic import synthetic_image
from headrace.schema import get_schema
from headrace_kernels import nvimgcodec_capi
from headrace_kernels.gpu import decode, image_ops, plan_cache, tap_tables
from tests.conftest import encode

ADDRESS_FIELDS = ("in", "out", "tmp", "row_idx", "row_w", "col_idx", "col_w")


class _HostBuffer:
    """Host bytes standing in for a device buffer: `.data.ptr` is their address, `set` copies into them, a slice
    is a buffer of its own over the same bytes, `reshape` views them as an array."""

    def __init__(self, size: int, dtype, array: np.ndarray | None = None):
        self.array = np.zeros(size, dtype) if array is None else array
        self.data = pytypes.SimpleNamespace(ptr=self.array.ctypes.data)

    @property
    def size(self) -> int:
        return self.array.size

    def __getitem__(self, part: slice) -> _HostBuffer:
        view = self.array[part]
        return _HostBuffer(view.size, view.dtype, view)

    def set(self, host: np.ndarray) -> None:
        self.array[:] = host

    def reshape(self, shape: tuple) -> np.ndarray:
        return self.array.reshape(shape)


def _host_triangle_tables(grid, block, arguments) -> None:
    """kernels/image.cu's triangle_tables on the host: each TapAxis record's table, written where it points, by
    the CPU's code (`DeviceTables.on_host`'s reference)."""
    records, count = arguments
    axes = np.frombuffer(records.array[:count * tap_tables.AXIS.itemsize].tobytes(), tap_tables.AXIS)
    for axis in axes:
        one = tap_tables.triangle_axes([axis["in_size"]], [axis["out_size"]], bool(axis["antialias"]),
                                       [axis["lo"]], [axis["hi"]], [axis["shift"]])
        for address, values in zip((axis["index"], axis["weight"]), tap_tables.host_tables(one), strict=True):
            ctypes.memmove(int(address), values.ctypes.data, values.nbytes)


def _args(op: str, given: dict) -> dict:
    return get_schema(op).resolve(given)


CMN = _args("crop_mirror_normalize", {"dtype": types.FLOAT, "output_layout": "CHW", "crop": (224, 224),
                                      "mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4]})
RESIZE = _args("resize", {"resize_shorter": 256})


def _read(address: int, count: int, dtype) -> np.ndarray:
    size = count * np.dtype(dtype).itemsize
    return np.frombuffer((ctypes.c_char * size).from_address(address), dtype=dtype).copy()


@pytest.fixture
def host_memory(monkeypatch):
    """Host buffers for device memory; the image kernels stand in by name (a placement only looks them up)."""
    monkeypatch.setattr(image_ops, "cupy", lambda: pytypes.SimpleNamespace(
        empty=_HostBuffer, ndarray=lambda size, dtype, memory: _HostBuffer(size, dtype), uint8=np.uint8))
    monkeypatch.setattr(image_ops, "stream_scratch", lambda size, purpose: None)
    monkeypatch.setattr(image_ops, "pinned_bytes", lambda nbytes: np.zeros(nbytes, np.uint8))
    monkeypatch.setattr(image_ops, "send_bytes", lambda device, host: device[:host.size].set(host))
    monkeypatch.setattr(image_ops, "_kernel",
                        lambda name: _host_triangle_tables if name == "triangle_tables" else name)


def _packed(shapes: list[tuple[int, int, int]]) -> tuple[list, np.ndarray, np.ndarray]:
    array = np.array(shapes, np.int64)
    addresses = np.uint64(1 << 40) + np.arange(len(shapes), dtype=np.uint64) * np.uint64(1 << 24)
    return [None] * len(shapes), addresses, array


def test_kept_plans_equal_a_fresh_plan(host_memory):
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    for shapes in ([(427, 640, 3), (300, 200, 3)], [(300, 200, 3), (427, 640, 3), (224, 224, 3), (427, 640, 3)]):
        images, addresses, array = _packed(shapes)
        kept = cache.plan(images, addresses, array)
        fresh = image_ops.plan_crop_mirror_normalize(images, [CMN] * len(shapes), False, [RESIZE] * len(shapes),
                                                     (addresses, array))
        assert kept[1:] == fresh[1:]
        rec, expected = kept[0].rec, fresh[0].rec
        assert rec["in"].tolist() == addresses.tolist()
        others = [name for name in expected.dtype.names if name not in ADDRESS_FIELDS]
        for name in others:
            np.testing.assert_array_equal(rec[name], expected[name], err_msg=name)
        which, tables, starts = fresh[0].tables.on_host()  # the reference of the device-made tables
        for j, i in enumerate(which.tolist()):
            rows, cols = int(rec["rs_h"][i] * rec["ty"][i]), int(rec["rs_w"][i] * rec["tx"][i])
            for field, table, start, count in zip(("row_idx", "row_w", "col_idx", "col_w"), tables,
                                                  (starts[0], starts[0], starts[1], starts[1]),
                                                  (rows, rows, cols, cols), strict=True):
                np.testing.assert_array_equal(_read(int(rec[field][i]), count, table.dtype),
                                              table[int(start[j]):int(start[j]) + count], err_msg=field)
    assert len(cache) == 3
    assert (cache.hits, cache.misses) == (3, 3)


def test_a_batch_of_known_shapes_sends_no_tables(host_memory):
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    cache.plan(*_packed([(427, 640, 3)]))
    buffers = len(cache._tables)
    plan = cache.plan(*_packed([(427, 640, 3)] * 4))
    assert len(cache._tables) == buffers == 1
    assert plan[0].table_memory is cache._tables  # held by the batch while its kernels may read them


def _packed_at(shapes: list[tuple[int, int, int]], base: int) -> tuple[list, np.ndarray, np.ndarray]:
    """`_packed` with the images from `base` on."""
    images, addresses, array = _packed(shapes)
    return images, addresses - np.uint64(1 << 40) + np.uint64(base), array


def _launch_addresses(batch: image_ops.Batch) -> tuple[np.ndarray, list[tuple[int, int, int, int]]]:
    """The records a placed batch's launches read (from its device buffer), and per launch the addresses its kernel
    reads from record 0 of its chunk: (in, out, tmp, record address), each record field plus the launch's base
    argument (kernels/image.cu: in_base, out_base, tmp_base; the vertical pass has no out_base)."""
    device, launches = batch.placed[4], batch.placed[5]
    rec = np.frombuffer(device.array[:len(batch.inputs) * image_ops.SAMPLE.itemsize].tobytes(), image_ops.SAMPLE)
    read = []
    for name, _, _, arguments in launches:
        i = (arguments[0].data.ptr - device.data.ptr) // image_ops.SAMPLE.itemsize
        if name.startswith("resample_vertical<"):
            in_base, tmp_base = map(int, arguments[2:])
            out = -1
        else:
            in_base, out_base, tmp_base = map(int, arguments[5:])
            out = int(rec["out"][i]) + out_base
        read.append((int(rec["in"][i]) + in_base, out, int(rec["tmp"][i]) + tmp_base, arguments[0].data.ptr))
    return rec, read


def test_kept_placements_place_each_batch_of_their_shapes(host_memory, monkeypatch):
    """A batch of shapes seen before is placed from the kept placement, as the first was: CHW float32 outputs of
    3x224x224 back to back, the store pass over 7x28 blocks of 32x8 threads per sample; with a row block too small
    for two samples' vertical passes (RESIZE_ROWS_BYTES), one chunk per sample, each chunk's passes reading its own
    record and its rows at the block's start. Each batch gets outputs of its own. The second batch of the shapes has
    its records kept (offsets); from the third on, batches share them, and the launches' base arguments point them
    at each batch's own buffers."""
    monkeypatch.setattr(image_ops, "RESIZE_ROWS_BYTES", 1)
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    shapes = [(300, 200, 3), (427, 640, 3), (300, 200, 3)]
    packed = [_packed_at(shapes, base) for base in (1 << 40, 1 << 41, 3 << 40, 1 << 42)]
    plans = [cache.plan(*batch) for batch in packed]
    assert len(cache._placements) == 1
    size, normalize = 3 * 224 * 224, int(plans[0][4])
    for plan, (_, addresses, _) in zip(plans, packed, strict=True):
        batch = plan[0]
        flat, offsets, out_shapes, rows, device, launches = batch.placed
        assert offsets.tolist() == [0, size, 2 * size, 3 * size] and out_shapes == [(3, 224, 224)] * 3
        assert flat.array.size == 3 * size and flat.array.dtype == np.float32
        rec, read = _launch_addresses(batch)
        row_bytes = rec["rs_h"].astype(np.int64) * rec["col_n"] * 3 * 4
        assert rows.array.size == row_bytes.max()
        assert len(launches) == 6
        for i, (vertical, store) in enumerate(zip(launches[::2], launches[1::2], strict=True)):
            assert vertical[0].startswith("resample_vertical<") and store[0].startswith("image_store<")
            record = device.data.ptr + i * image_ops.SAMPLE.itemsize
            assert read[2 * i] == (int(addresses[i]), -1, rows.data.ptr, record)
            assert read[2 * i + 1] == (int(addresses[i]), flat.data.ptr + i * size * 4, rows.data.ptr, record)
            assert vertical[1][:2] == (-(-int(rec["col_n"][i] * 3) // 128), int(rec["rs_h"][i]))
            assert vertical[2] == (128, 1, 1) and int(vertical[3][1]) == 3
            assert store[1] == (7, 28, 1) and store[2] == (32, 8, 1)
            assert tuple(map(int, store[3][1:5])) == (3, 3, 1, normalize)
    first, second, third, fourth = (plan[0] for plan in plans)
    for batch in (first, second):  # records with addresses, sent with the batch: no bases
        assert all(int(base) == 0 for launch in batch.placed[5] for base in launch[3][-2:])
        assert not batch.shared_records
    assert len({id(batch.placed[4]) for batch in (first, second, third)}) == 3 and third.placed[4] is fourth.placed[4]
    assert len({id(batch.placed[0]) for batch in (first, second, third, fourth)}) == 4
    assert second.placed[1] is first.placed[1] and not second.placed[1].flags.writeable  # kept, read-only
    assert third.shared_records and not third.rec.flags.writeable and third.rec is fourth.rec


def test_kept_records_hold_each_sample_s_offsets(host_memory):
    """One row block for the batch (each resampled sample's rows at its own offset in it), a sample copied as it is
    (already at the resize's size: no rows), inputs laid in descending order in one buffer (offsets from the first
    wrap around below it): a batch on kept records reads and writes where a batch on records of its own does."""
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    shapes = [(300, 200, 3), (256, 341, 3), (427, 640, 3)]
    size = 3 * 224 * 224

    def descending(base: int) -> tuple[list, np.ndarray, np.ndarray]:
        images, _, array = _packed(shapes)
        return images, np.uint64(base) - np.arange(3, dtype=np.uint64) * np.uint64(1 << 24), array

    packed = [descending(base) for base in (1 << 41, 1 << 42, 3 << 41)]
    plans = [cache.plan(*batch) for batch in packed]
    own, kept = plans[1][0], plans[2][0]
    assert kept.shared_records and not own.shared_records
    assert kept.rec["mode"].tolist() == [image_ops.MODE_TAPS, image_ops.MODE_COPY, image_ops.MODE_TAPS]
    rows_at = cache._placements[tuple(shapes)].rows_at
    assert int(rows_at[2]) > 0 and int(kept.rec["tmp"][2]) == int(rows_at[2])  # after the first sample's rows
    for batch, (_, addresses, _) in ((own, packed[1]), (kept, packed[2])):
        rec, read = _launch_addresses(batch)
        flat, rows = batch.placed[0], batch.placed[3]
        assert [r[3] for r in read] == [batch.placed[4].data.ptr] * 2  # one chunk, from record 0
        in_base, tmp_base = map(int, batch.placed[5][0][3][2:])
        out_base = int(batch.placed[5][1][3][6])
        for i in range(3):
            assert (int(rec["in"][i]) + in_base) % (1 << 64) == int(addresses[i])
            assert int(rec["out"][i]) + out_base == flat.data.ptr + i * size * 4
        for i in (0, 2):
            assert int(rec["tmp"][i]) + tmp_base - rows.data.ptr == int(rows_at[i])


def test_inputs_laid_out_otherwise_get_records_of_their_own(host_memory):
    """The kept records hold each input's offset from the first: a batch of the same shapes whose inputs lie
    elsewhere (not one decoder allocation) is placed on records of its own, with addresses."""
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    shapes = [(300, 200, 3), (427, 640, 3)]
    cache.plan(*_packed(shapes))
    cache.plan(*_packed(shapes))
    images, addresses, array = _packed(shapes)
    addresses[1] += np.uint64(4096)
    plan = cache.plan(images, addresses, array)
    assert not plan[0].shared_records and plan[0].rec["in"].tolist() == addresses.tolist()
    rec, read = _launch_addresses(plan[0])  # one chunk: both passes start at record 0, with no base
    assert rec["in"].tolist() == addresses.tolist() and [r[0] for r in read] == [int(addresses[0])] * 2


def test_a_moved_input_gets_a_copy_of_the_kept_records(host_memory):
    """`adopt_inputs` (a CPU fallback decoded an image elsewhere) never writes into kept records: the batch gets a
    copy of them in a device buffer of its own, with the moved image's offset from the launches' input base; `launch`
    sends it."""
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    shapes = [(300, 200, 3), (427, 640, 3)]
    for _ in range(2):
        cache.plan(*_packed(shapes))
    images = [pytypes.SimpleNamespace(shape=shape, dtype=np.uint8, strides=(shape[1] * 3, 3, 1)) for shape in shapes]
    _, addresses, array = _packed(shapes)
    plan = cache.plan(images, addresses, array)
    batch = plan[0]
    kept_rec, kept_device = batch.rec, batch.placed[4]
    kept_bytes = kept_device.array.copy()
    moved = pytypes.SimpleNamespace(shape=shapes[1], dtype=np.uint8, strides=(640 * 3, 3, 1),
                                    data=pytypes.SimpleNamespace(ptr=int(addresses[0]) - 4096))
    assert batch.shared_records
    assert image_ops.adopt_inputs(plan, [images[0], moved])
    assert not batch.shared_records and not batch.records_sent and batch.rec is not kept_rec
    assert batch.placed[4] is not kept_device and batch.inputs[1] is moved
    launches = batch.placed[5]
    ran = []
    batch.placed = (*batch.placed[:5], [(lambda *a, name=name: ran.append(name), grid, block, arguments)
                                        for name, grid, block, arguments in launches])
    image_ops.launch(*plan)  # sends the batch's own records, then runs the (standing-in) kernels
    assert batch.records_sent and ran == [launch[0] for launch in launches]
    batch.placed = (*batch.placed[:5], launches)
    np.testing.assert_array_equal(kept_device.array, kept_bytes)  # the kept records are as they were
    rec, read = _launch_addresses(batch)
    assert all(r[3] == batch.placed[4].data.ptr for r in read)
    in_base = int(batch.placed[5][0][3][-2])
    assert [(int(r) + in_base) % (1 << 64) for r in rec["in"]] == [int(addresses[0]), moved.data.ptr]
    odd = pytypes.SimpleNamespace(shape=(1, 1, 3), dtype=np.uint8, strides=(3, 3, 1))
    assert not image_ops.adopt_inputs(plan, [images[0], odd])  # another shape: the plan no longer applies


def test_a_failed_keep_leaves_its_shapes_planned_as_before(host_memory, monkeypatch):
    """Keeping the records can fail (no device memory): that batch's plan fails (the step plans it again), and the
    next batches of those shapes are placed on records of their own until keeping succeeds."""
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    shapes = [(300, 200, 3)]
    cache.plan(*_packed(shapes))

    def no_memory(placement, batch) -> None:
        raise MemoryError("out of device memory (standing in)")

    with monkeypatch.context() as patched:
        patched.setattr(image_ops.Placement, "keep", no_memory)
        with pytest.raises(MemoryError):
            cache.plan(*_packed(shapes))
    assert cache._placements[tuple(shapes)].kept is None
    again = cache.plan(*_packed(shapes))
    assert not again[0].shared_records and again[0].rec["in"].tolist() == _packed(shapes)[1].tolist()
    assert cache.plan(*_packed(shapes))[0].shared_records


def test_it_stops_where_shapes_do_not_recur(host_memory):
    cache = plan_cache.FusedPlanCache(CMN, RESIZE, capacity=4)
    for h in range(300, 304):
        assert cache.plan(*_packed([(h, 500, 3)])) is not None
    assert cache.plan(*_packed([(400, 500, 3)])) is None  # full, and no shape had come twice
    assert not cache.enabled and len(cache) == 0
    assert cache.plan(*_packed([(300, 500, 3)])) is None


def test_it_starts_over_where_shapes_recur(host_memory):
    cache = plan_cache.FusedPlanCache(CMN, RESIZE, capacity=2)
    for _ in range(3):
        cache.plan(*_packed([(300, 500, 3), (200, 500, 3)]))
    assert cache.plan(*_packed([(100, 500, 3)])) is not None
    assert cache.enabled and len(cache) == 1


def test_mixed_channel_counts_are_left_to_the_caller(host_memory):
    cache = plan_cache.FusedPlanCache(CMN, RESIZE)
    assert cache.plan(*_packed([(300, 500, 3), (300, 500, 1)])) is None
    assert cache.plan(*_packed([])) is None


@pytest.mark.gpu
def test_served_outputs_with_kept_plans_equal_outputs_without():
    rng = np.random.default_rng(21)
    images = [encode(synthetic_image(rng, h, w)) for h, w in [(427, 640), (300, 200), (427, 640), (512, 384)]]
    batches = [[images[0]], [images[1], images[0]], [images[2]] * 3, [images[3], images[1]], [images[0]],
               [images[1], images[2]], [images[2]] * 3]  # the last three: batches of shapes seen before

    def run(cache: str) -> tuple[list[np.ndarray], tuple | None]:
        pipe = served_preprocess(device="gpu", batch_size=8, device_id=0,  # decode, resize, crop, normalize
                                 executor_options={"plan_cache": cache == "1"})
        pipe.build()
        step = next(k for k in pipe._executor.gpu.kernels() if hasattr(k, "cache"))
        outputs = [pipe.run(images=batch)[0].as_cpu().as_array() for batch in batches]
        kept = None if step.cache is None else (len(step.cache), step.cache.hits)
        pipe.close()
        return outputs, kept

    with_cache, kept = run("1")
    without, none = run("0")
    assert kept == (3, 11) and none is None  # 3 sizes; 11 of the 14 samples planned from a kept size
    for a, b in zip(with_cache, without, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_a_cpu_fallback_in_a_batch_on_kept_records_gives_the_bits_without_the_cache(monkeypatch):
    """Batches of shapes seen before (the third on kept records) whose first image the GPU decoders report as not
    decoded: the CPU fallback's image (inverted here, so that reading the GPU's decode instead would show) lies
    elsewhere, and the batch gets a copy of the kept records to point at it; its outputs are those of the same
    pipeline without the cache, and differ from the batch decoded on the GPU."""
    rng = np.random.default_rng(22)
    images = [encode(synthetic_image(rng, h, w)) for h, w in [(427, 640), (300, 200)]]
    finish, cpu_decode = nvimgcodec_capi.StartedDecode.finish, decode.MixedDecoder._cpu_decode

    def first_not_decoded(started):
        statuses = finish(started).copy()
        statuses[0] = nvimgcodec_capi.PROCESSING_BACKEND_UNSUPPORTED + 1  # any status but success
        return statuses

    def run(cache: bool) -> tuple[np.ndarray, list[np.ndarray], int]:
        pipe = served_preprocess(device="gpu", batch_size=8, device_id=0, executor_options={"plan_cache": cache})
        pipe.build()
        decoder = next(k.decoder for k in pipe._executor.gpu.kernels() if hasattr(k, "launch_ahead"))
        decoded = pipe.run(images=images)[0].as_cpu().as_array()
        pipe.run(images=images)
        before = decoder.fallbacks
        with monkeypatch.context() as patched:
            patched.setattr(nvimgcodec_capi.StartedDecode, "finish", first_not_decoded)
            patched.setattr(decode.MixedDecoder, "_cpu_decode", lambda self, prepared, i: 255 - cpu_decode(
                self, prepared, i))
            outs = [pipe.run(images=images)[0].as_cpu().as_array() for _ in range(2)]
        fallbacks = decoder.fallbacks - before
        pipe.close()
        return decoded, outs, fallbacks

    (decoded, with_cache, fell_back), (_, without, fell_back_without) = run(True), run(False)
    assert fell_back == fell_back_without == 2
    for a, b in zip(with_cache, without, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a[1], decoded[1])
        assert not np.array_equal(a[0], decoded[0])
