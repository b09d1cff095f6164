"""readers.numpy against DALI's CPU build on .npy files written here with numpy.save: the listing, the arrays, every
ROI form and out-of-bounds policy, sharding and padding (exact, sample for sample), shuffling (the same samples per
epoch), checkpoints, the torch iterator, bad files; the GPU read (kvikio) against the CPU one (marker gpu).

Also the helpers the other reader tests share (`read_reader`, `read_dali`, `assert_resumes`)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali

from headrace import fn, pipeline_def
from headrace.errors import HeadraceError, SchemaError

SHARDINGS = [{}, dict(num_shards=3, shard_id=1), dict(num_shards=2, shard_id=1, stick_to_shard=True),
             dict(num_shards=3, shard_id=2, pad_last_batch=True)]


def _samples(outs) -> list[tuple]:
    return [tuple(np.array(o.at(i)) for o in outs) for i in range(len(outs[0]))]


def read_reader(op: str, batch_size: int, batches: int, **args) -> tuple[list[tuple], dict]:
    """`batches` batches of headrace's reader `op` as one list of samples (a tuple of arrays each), and its meta."""
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=7)
    def pipe():
        out = getattr(fn.readers, op)(name="Reader", **args)
        return tuple(out) if isinstance(out, tuple | list) else out

    p = pipe()
    samples = [s for _ in range(batches) for s in _samples(p.run())]
    meta = p.reader_meta("Reader")
    p.close()
    return samples, meta


def read_dali(op: str, batch_size: int, batches: int, **args) -> tuple[list[tuple], dict]:
    """The same through DALI's CPU build."""
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    @dali_pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=7)
    def pipe():
        out = getattr(dfn.readers, op)(name="Reader", **args)
        return tuple(out) if isinstance(out, tuple | list) else out

    p = pipe()
    p.build()
    samples = [s for _ in range(batches) for s in _samples(p.run())]
    return samples, p.reader_meta("Reader")


def assert_same(ours: list[tuple], theirs: list[tuple]) -> None:
    assert len(ours) == len(theirs)
    for n, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert len(a) == len(b), n
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), (n, x, y)


def assert_same_meta(ours: dict, theirs: dict) -> None:
    for key in ("epoch_size", "epoch_size_padded", "number_of_shards", "shard_id", "pad_last_batch",
                "stick_to_shard"):
        assert ours[key] == theirs[key], key


def key(sample: tuple) -> bytes:
    return b"|".join(np.ascontiguousarray(a).tobytes() + str(a.shape).encode() for a in sample)


def assert_same_epochs(ours: list[tuple], theirs: list[tuple], epoch: int) -> None:
    """Shuffled: each epoch holds the same samples (as a multiset), whatever the order."""
    for start in range(0, len(ours), epoch):
        assert Counter(map(key, ours[start:start + epoch])) == Counter(map(key, theirs[start:start + epoch]))


def assert_resumes(op: str, batch_size: int, **args) -> None:
    """A pipeline restored from a checkpoint taken after 3 batches gives the next batches bit for bit."""
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=11, enable_checkpointing=True)
    def pipe():
        out = getattr(fn.readers, op)(name="Reader", **args)
        return tuple(out) if isinstance(out, tuple | list) else out

    reference = pipe()
    expected = [_samples(reference.run()) for _ in range(7)]
    first = pipe()
    for _ in range(3):
        first.run()
    state = first.checkpoint()
    resumed = pipe(checkpoint=state)
    for want in expected[3:]:
        assert_same(_samples(resumed.run()), want)
    for p in (reference, first, resumed):
        p.close()


def _save(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:  # np.save would add '.npy' to a name ending otherwise
        np.save(f, array)


@pytest.fixture(scope="module")
def npy_root(tmp_path_factory) -> Path:
    """13 float32 2-D arrays in .npy files (DALI wants one type and number of dimensions per batch): in the root and
    in sub-folders (plus one two levels deep, which DALI does not list), C and Fortran order, an empty one, a name in
    capitals, and a file the filter leaves out."""
    root = tmp_path_factory.mktemp("npy")
    rng = np.random.default_rng(3)
    for folder in ("sub", "Another", "sub/deeper"):
        (root / folder).mkdir()
    shapes = {"b.npy": (6, 7), "a.npy": (5, 4), "Z.NPY": (3, 9), "empty.npy": (0, 3), "sub/f.npy": (4, 6),
              "sub/c.npy": (7, 2), "sub/h.npy": (5, 6), "Another/x.npy": (2, 3), "Another/y.npy": (5, 6),
              "Another/z.npy": (1, 8), "sub/deeper/d.npy": (2, 2), "w.npy": (6, 1), "v.npy": (2, 2)}
    for name, shape in shapes.items():
        array = rng.random(shape, dtype=np.float32)
        _save(root / name, np.asfortranarray(array) if name in ("sub/f.npy", "Another/y.npy") else array)
    (root / "notes.txt").write_text("not an array")
    return root


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory) -> Path:
    """Arrays of several types and of 0 to 3 dimensions, C and Fortran order (read one per batch, for DALI)."""
    rng = np.random.default_rng(4)
    mixed = tmp_path_factory.mktemp("npy_mixed")
    arrays = {
        "a_zero_d.npy": np.float64(2.5),
        "b_int16.npy": rng.integers(-500, 500, (6, 7), dtype=np.int16),
        "c_uint8.npy": rng.integers(0, 255, (4, 9), dtype=np.uint8),
        "d_bool.npy": rng.integers(0, 2, (7, 6)).astype(bool),
        "e_half.npy": rng.random((5, 6)).astype(np.float16),
        "f_int64.npy": rng.integers(-(2**40), 2**40, (5, 3, 4), dtype=np.int64),
        "g_uint32_f.npy": np.asfortranarray(rng.integers(0, 9, (5, 6), dtype=np.uint32)),
        "h_double_f.npy": np.asfortranarray(rng.random((4, 6, 2))),
        "i_int8.npy": rng.integers(-9, 9, (8,), dtype=np.int8),
    }
    for name, array in arrays.items():
        _save(mixed / name, array)
    return mixed


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("sharding", SHARDINGS)
def test_listing_arrays_and_shards_match_dali(npy_root, sharding):
    """11 files (root and sub-folders; Z.NPY does not match *.npy) in DALI's order, epoch after epoch."""
    ours, meta = read_reader("numpy", 5, 6, file_root=str(npy_root), **sharding)
    theirs, dali_meta = read_dali("numpy", 5, 6, file_root=str(npy_root), **sharding)
    assert_same(ours, theirs)
    assert_same_meta(meta, dali_meta)
    assert meta["epoch_size"] == 11


@pytest.mark.dali
@needs_dali
def test_every_type_and_0d_to_3d_arrays_match_dali(mixed_root):
    ours, _ = read_reader("numpy", 1, 10, file_root=str(mixed_root))
    theirs, _ = read_dali("numpy", 1, 10, file_root=str(mixed_root))
    assert_same(ours, theirs)


@pytest.mark.dali
@needs_dali
def test_files_and_file_list_match_dali(npy_root, tmp_path):
    names = ["sub/f.npy", "w.npy", "Another/y.npy", "a.npy"]
    listing = tmp_path / "list.txt"
    listing.write_text("\n".join(names) + "\n")
    for args in (dict(files=names), dict(file_list=str(listing)), dict(file_filter="*y.npy")):
        ours, _ = read_reader("numpy", 3, 3, file_root=str(npy_root), **args)
        theirs, _ = read_dali("numpy", 3, 3, file_root=str(npy_root), **args)
        assert_same(ours, theirs)


ROIS = [
    dict(roi_start=[1, 2], roi_end=[4, 6]),
    dict(roi_start=[2], roi_shape=[3], roi_axes=[1]),
    dict(roi_end=[3], roi_axes=[0]),
    dict(rel_roi_start=[0.1, 0.25], rel_roi_end=[0.9, 0.75]),
    dict(rel_roi_start=[0.3, 0.1], rel_roi_shape=[0.5, 0.45]),
    dict(rel_roi_shape=[0.7], roi_axes=[1]),
    dict(roi_start=[-2, 3], roi_end=[4, 9], out_of_bounds_policy="pad", fill_value=-3.0),
    dict(roi_start=[-2, 3], roi_end=[4, 9], out_of_bounds_policy="trim_to_shape"),
    dict(roi_start=[7, 8], roi_end=[9, 10], out_of_bounds_policy="pad", fill_value=5.0),  # all outside
    dict(roi_start=[1, 1], roi_end=[1, 5]),  # empty
]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("roi", ROIS)
def test_rois_match_dali(npy_root, mixed_root, roi):
    """Every ROI form on C-order and Fortran-order 2-D arrays of several types."""
    files = ["b.npy", "sub/h.npy", "Another/y.npy", "sub/f.npy"]
    ours, _ = read_reader("numpy", 4, 1, file_root=str(npy_root), files=files, **roi)
    theirs, _ = read_dali("numpy", 4, 1, file_root=str(npy_root), files=files, **roi)
    assert_same(ours, theirs)
    files = ["b_int16.npy", "c_uint8.npy", "d_bool.npy", "e_half.npy", "g_uint32_f.npy"]
    ours, _ = read_reader("numpy", 1, 5, file_root=str(mixed_root), files=files, **roi)
    theirs, _ = read_dali("numpy", 1, 5, file_root=str(mixed_root), files=files, **roi)
    assert_same(ours, theirs)


@pytest.mark.dali
@needs_dali
def test_relative_rois_round_as_dali(mixed_root):
    """Relative ROIs over a grid of values, on 3-D arrays (one Fortran-order): the same rounding as DALI."""
    rng = np.random.default_rng(5)
    files = ["f_int64.npy", "h_double_f.npy"]
    for _ in range(6):
        start = rng.choice([0.0, 0.05, 0.1, 0.15, 0.25, 0.3, 0.375, 0.5], 3)
        shape = rng.choice([0.0, 0.1, 0.2, 0.25, 0.3, 0.45, 0.5], 3)
        for args in (dict(rel_roi_start=start.tolist(), rel_roi_shape=shape.tolist()),
                     dict(rel_roi_start=start.tolist(), rel_roi_end=(start + shape).tolist())):
            ours, _ = read_reader("numpy", 1, 2, file_root=str(mixed_root), files=files, **args)
            theirs, _ = read_dali("numpy", 1, 2, file_root=str(mixed_root), files=files, **args)
            assert_same(ours, theirs)


@pytest.mark.dali
@needs_dali
def test_shuffled_epochs_hold_dalis_samples(npy_root):
    """Shuffled, each epoch holds DALI's samples (in another order). Sharded, DALI shuffles the file list once before
    splitting it (a fixed permutation, which headrace makes too), so the shards hold DALI's samples as well; with
    shuffle_mode='permutation' (headrace's own) a shard is the unshuffled one, in a new order each epoch."""
    for args in (dict(random_shuffle=True), dict(shuffle_after_epoch=True)):
        ours, _ = read_reader("numpy", 11, 3, file_root=str(npy_root), **args)
        theirs, _ = read_dali("numpy", 11, 3, file_root=str(npy_root), **args)
        assert_same_epochs(ours, theirs, 11)
        assert [key(s) for s in ours[:11]] != [key(s) for s in ours[11:22]]  # a new order each epoch
    shard = dict(num_shards=2, shard_id=1, stick_to_shard=True)
    ours, _ = read_reader("numpy", 6, 3, file_root=str(npy_root), random_shuffle=True, **shard)
    theirs, _ = read_dali("numpy", 6, 3, file_root=str(npy_root), random_shuffle=True, **shard)
    assert_same_epochs(ours, theirs, 6)
    assert [key(s) for s in ours[:6]] != [key(s) for s in ours[6:12]]
    ours, _ = read_reader("numpy", 6, 3, file_root=str(npy_root), random_shuffle=True, shuffle_mode="permutation",
                          **shard)
    plain, _ = read_dali("numpy", 6, 3, file_root=str(npy_root), **shard)
    assert_same_epochs(ours, plain, 6)
    assert [key(s) for s in ours[:6]] != [key(s) for s in ours[6:12]]


@pytest.mark.dali
@needs_dali
def test_a_buffer_of_one_gives_dalis_shuffled_order_sample_for_sample(npy_root):
    """With initial_fill=1 random_shuffle is DALI's one-time permutation of the files alone, which headrace makes
    bit for bit: the samples (and shards) are DALI's in DALI's order."""
    shuffle = dict(file_root=str(npy_root), random_shuffle=True, initial_fill=1, num_shards=2, shard_id=1)
    ours, _ = read_reader("numpy", 3, 4, **shuffle)
    theirs, _ = read_dali("numpy", 3, 4, **shuffle)
    assert_same(ours, theirs)


def test_only_the_rois_span_is_read():
    """The reads cover the outermost stored axis's span of the ROI: a C-order ROI of whole rows reads exactly
    its own bytes; a Fortran-order one reads the span of the last axis."""
    from headrace.readers.numpy_files import NpyHeader, Roi, assemble

    array = np.arange(10 * 6, dtype=np.int32).reshape(10, 6)
    raw = np.frombuffer(array.tobytes(), np.uint8)
    reads = []

    def read(offset, nbytes):
        reads.append((offset, nbytes))
        return raw[offset - 128:offset - 128 + nbytes]

    header = NpyHeader((10, 6), np.dtype(np.int32), False, 128)
    out = assemble(np, read, header, Roi((3, 0), (7, 6)), "error", 0.0)
    assert np.array_equal(out, array[3:7]) and reads == [(128 + 3 * 24, 4 * 24)]
    reads.clear()
    fortran = np.asfortranarray(array)
    raw = np.frombuffer(fortran.tobytes(order="F"), np.uint8)
    out = assemble(np, read, NpyHeader((10, 6), np.dtype(np.int32), True, 128), Roi((2, 1), (5, 3)), "error", 0.0)
    assert np.array_equal(out, array[2:5, 1:3]) and reads == [(128 + 1 * 40, 2 * 40)]


def test_checkpoints_resume_exactly(npy_root):
    assert_resumes("numpy", 5, file_root=str(npy_root), random_shuffle=True, num_shards=2, shard_id=1)
    assert_resumes("numpy", 4, file_root=str(npy_root), shuffle_after_epoch=True, roi_end=[1], roi_axes=[0],
                   out_of_bounds_policy="trim_to_shape", files=["a.npy", "b.npy", "w.npy", "sub/f.npy", "Z.NPY"])
    assert_resumes("numpy", 2, file_root=str(npy_root), pad_last_batch=True, num_shards=3, shard_id=2,
                   cache_header_information=True)


def test_torch_iterator_reads_the_epoch_by_reader_name(tmp_path):
    """The iterator ends the epoch from reader_meta: 6 samples in batches of 4 are one full and one partial batch."""
    from headrace_torch import GenericIterator, LastBatchPolicy

    arrays = [np.random.default_rng(i).random((3 + i, 4 + i), dtype=np.float32) for i in range(6)]
    for i, array in enumerate(arrays):
        np.save(tmp_path / f"{i}.npy", array)

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=2)
    def pipe():
        return fn.readers.numpy(file_root=str(tmp_path), roi_start=[1, 1], roi_shape=[2, 3], name="Reader")

    it = GenericIterator(pipe(), ["x"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
    batches = [batch[0]["x"].numpy() for batch in it]
    assert [len(b) for b in batches] == [4, 2]
    for row, array in zip(np.concatenate(batches), arrays, strict=True):
        assert np.array_equal(row, array[1:3, 1:4])


def _read_error(root: Path, name: str, **args) -> str:
    with pytest.raises(HeadraceError) as info:
        read_reader("numpy", 1, 1, file_root=str(root), files=[name], **args)
    return str(info.value)


def test_bad_files_name_the_reader_the_file_and_why(tmp_path):
    np.save(tmp_path / "ok.npy", np.zeros((4, 4), np.float32))
    (tmp_path / "garbage.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    (tmp_path / "text.npy").write_bytes(b"just some text")
    full = (tmp_path / "ok.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(full[:-10])
    np.save(tmp_path / "big.npy", np.arange(3, dtype=">i4"))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    for name, why in [("garbage.npy", "not a readable .npy header"), ("text.npy", "not a readable .npy header"),
                      ("short.npy", "truncated"), ("big.npy", "big-endian"), ("objects.npy", "not a plain number"),
                      ("missing.npy", "cannot open it")]:
        message = _read_error(tmp_path, name)
        assert "readers.numpy" in message and name in message and why in message, message
    message = _read_error(tmp_path, "ok.npy", roi_start=[-1, 0], roi_end=[2, 2])
    assert "out of the array's shape (4, 4)" in message and "ok.npy" in message
    message = _read_error(tmp_path, "ok.npy", roi_start=[1, 2, 3])
    assert "roi_start has 3 values for 2 axes" in message
    np.save(tmp_path / "ints.npy", np.zeros((4, 4), np.int32))
    with pytest.raises(HeadraceError, match=r"share their type .*ok.npy' is float32 2-D, .*ints.npy' is int32 2-D"):
        read_reader("numpy", 2, 1, file_root=str(tmp_path), files=["ok.npy", "ints.npy"])
    with pytest.raises(SchemaError, match="roi_end and roi_shape are mutually exclusive"):
        read_reader("numpy", 1, 1, file_root=str(tmp_path), roi_end=[1], roi_shape=[1])
    with pytest.raises(SchemaError, match="readers.numpy .*file_root .*cannot be listed"):
        read_reader("numpy", 1, 1, file_root=str(tmp_path / "nowhere"))


class _FakeCuFile:
    """kvikio.CuFile's calls that numpy_read makes, reading into numpy arrays (no GPU here)."""

    def __init__(self, path: str, mode: str):
        self.fd = os.open(path, os.O_RDONLY)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)

    @staticmethod
    def is_compat_mode_preferred() -> bool:
        return True

    def pread(self, buffer: np.ndarray, size: int, file_offset: int):
        data = os.pread(self.fd, size, file_offset)
        buffer[:len(data)] = np.frombuffer(data, np.uint8)
        return type("Future", (), {"get": staticmethod(lambda: len(data))})()


def test_cached_headers_follow_a_rewritten_file(tmp_path):
    """cache_header_information: a file rewritten with another shape is read with its new header."""
    from headrace.readers.numpy_files import NumpyReader
    from headrace.schema import SCHEMAS

    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    args = SCHEMAS["readers.numpy"].resolve({"file_root": str(tmp_path), "cache_header_information": True})
    reader = NumpyReader("Reader", args, 1, 1, None)
    assert reader.read_item(0)[0].shape == (2, 3) and reader.headers
    np.save(tmp_path / "a.npy", np.ones((4, 5), np.float32))
    assert reader.read_item(0)[0].shape == (4, 5) and reader.read_item(0)[0].sum() == 20


def test_the_gpu_read_path_with_a_stand_in_for_kvikio_and_cupy(npy_root, monkeypatch):
    """numpy_read's logic on the CPU: spans read through kvikio's calls give the CPU reader's arrays, every ROI form,
    and the mode is reported (the real kvikio and CuPy run in test_gpu_reads_equal_cpu_reads)."""
    from types import SimpleNamespace

    from headrace.readers.numpy_files import assemble, parse_header, roi_of
    from headrace_kernels.gpu import numpy_read

    stream = SimpleNamespace(synchronize=lambda: None)
    monkeypatch.setattr(numpy_read, "cupy", lambda: SimpleNamespace(
        **{name: getattr(np, name) for name in ("empty", "uint8", "zeros", "full", "ascontiguousarray")},
        cuda=SimpleNamespace(get_current_stream=lambda: stream)))
    monkeypatch.setattr(numpy_read, "_kvikio", lambda: SimpleNamespace(CuFile=_FakeCuFile))
    for roi in [{}, *ROIS[:8]]:
        for name in ("b.npy", "sub/f.npy", "Another/y.npy"):
            path = str(npy_root / name)
            with open(path, "rb") as f:
                header = parse_header(f.fileno(), os.fstat(f.fileno()).st_size)
            got = numpy_read.read_array(path, header, roi_of(roi, header.shape),
                                        roi.get("out_of_bounds_policy", "error"), roi.get("fill_value", 0.0), assemble)
            cpu, _ = read_reader("numpy", 1, 1, file_root=str(npy_root), files=[name], **roi)
            assert np.array_equal(got, cpu[0][0]) and got.dtype == cpu[0][0].dtype
    assert numpy_read.last_mode == "compat"


@pytest.mark.gpu
def test_gpu_reads_equal_cpu_reads(npy_root):
    """kvikio's reads into GPU memory give the CPU reader's arrays, and the mode that ran is reported; a pipeline
    with readers.numpy(device='gpu') gives them too."""
    import cupy as cp

    pytest.importorskip("kvikio", reason="readers.numpy(device='gpu') reads through kvikio (kvikio-cu13)")
    from headrace.readers.numpy_files import assemble, parse_header, roi_of
    from headrace_kernels.gpu import numpy_read

    files = ["b.npy", "sub/f.npy", "Another/y.npy", "empty.npy"]
    for roi in ({}, dict(roi_start=[1, 1], roi_end=[3, 4], roi_axes=[0, 1], out_of_bounds_policy="trim_to_shape"),
                dict(roi_start=[-1], roi_end=[9], roi_axes=[0], out_of_bounds_policy="pad", fill_value=2.0)):
        for name in files:
            path = str(npy_root / name)
            with open(path, "rb") as f:
                header = parse_header(f.fileno(), os.fstat(f.fileno()).st_size)
            region = roi_of(roi, header.shape)
            got = numpy_read.read_array(path, header, region, roi.get("out_of_bounds_policy", "error"),
                                        roi.get("fill_value", 0.0), assemble)
            cpu, _ = read_reader("numpy", 1, 1, file_root=str(npy_root), files=[name], **roi)
            assert isinstance(got, cp.ndarray) and np.array_equal(cp.asnumpy(got), cpu[0][0])
    assert numpy_read.last_mode in ("gds", "compat")
    gpu_pipe_args = dict(file_root=str(npy_root), files=files[:2])

    @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=2)
    def pipe():
        return fn.readers.numpy(device="gpu", name="Reader", **gpu_pipe_args)

    p = pipe()
    (out,) = p.run()
    cpu, _ = read_reader("numpy", 2, 1, **gpu_pipe_args)
    for i in range(2):
        assert np.array_equal(cp.asnumpy(cp.asarray(out.at(i))), cpu[i][0])
    p.close()
