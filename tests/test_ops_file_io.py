"""io.file.read and decoders.numpy against DALI's CPU operators (exact: bytes and arrays) and against Python's own
reads and numpy's np.load; bad input is an error naming the op, the sample and what is wrong."""

from __future__ import annotations

import io

import numpy as np
import pytest
from ops_support import needs_dali, run_dali, run_headrace

from headrace import types
from headrace.errors import SampleError

RNG = np.random.default_rng(8)


def encoded(path) -> np.ndarray:
    return np.frombuffer(str(path).encode("utf-8"), dtype=np.uint8)


def npy(array: np.ndarray) -> np.ndarray:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


@pytest.fixture
def files(tmp_path):
    contents = [RNG.integers(0, 256, 1000, dtype=np.uint8).tobytes(), b"hello", "ünïcödé".encode()]
    paths = [tmp_path / "a.bin", tmp_path / "b b.txt", tmp_path / "ç.dat"]
    for path, data in zip(paths, contents, strict=True):
        path.write_bytes(data)
    return paths, contents


def test_file_read_gives_the_bytes(files):
    paths, contents = files
    _same(run_headrace("io.file.read", [encoded(p) for p in paths]),
          [np.frombuffer(c, np.uint8) for c in contents])


@needs_dali[0]
@needs_dali[1]
def test_file_read_matches_dali(files):
    paths, _ = files
    names = [encoded(p) for p in paths]
    _same(run_headrace("io.file.read", names), run_dali("io.file.read", names))
    _same(run_headrace("io.file.read", names, dont_use_mmap=True), run_dali("io.file.read", names, dont_use_mmap=True))


def test_file_read_of_an_empty_file(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    (got,) = run_headrace("io.file.read", [encoded(tmp_path / "empty")])
    assert got.dtype == np.uint8 and got.shape == (0,)


def test_file_read_errors(tmp_path):
    (tmp_path / "a").write_bytes(b"a")
    with pytest.raises(SampleError, match=r"io.file.read.*sample 0.*nope.*No such file"):
        run_headrace("io.file.read", [encoded(tmp_path / "nope")])
    with pytest.raises(SampleError, match=r"io.file.read.*sample 0.*not a regular file \(a directory\)"):
        run_headrace("io.file.read", [encoded(tmp_path)])
    with pytest.raises(SampleError, match=r"io.file.read.*sample 1.*NUL byte"):
        run_headrace("io.file.read", [encoded(tmp_path / "a"), np.array([47, 0, 97], np.uint8)])
    with pytest.raises(SampleError, match=r"io.file.read.*sample 0.*1D uint8.*float32"):
        run_headrace("io.file.read", [np.zeros(3, np.float32)])


ARRAYS = [RNG.standard_normal((3, 5)).astype(np.float32), RNG.standard_normal((4, 2)).astype(np.float32)]
KINDS = [
    [RNG.integers(-100, 100, (2, 3, 4), dtype=np.int16), RNG.integers(-100, 100, (1, 1, 7), dtype=np.int16)],
    [RNG.integers(0, 2, (5,), dtype=np.uint8).astype(np.bool_), np.ones(3, np.bool_)],
    [RNG.standard_normal((4, 4)).astype(np.float16), RNG.standard_normal((2, 9)).astype(np.float16)],
    [np.array(3.5, np.float64), np.array(-1.0, np.float64)],
    [np.arange(6, dtype=np.uint64).reshape(2, 3), np.zeros((0, 3), np.uint64)],
]


@pytest.mark.parametrize("arrays", [ARRAYS, *KINDS], ids=["f32", "i16", "bool", "f16", "scalar", "u64-empty"])
def test_numpy_decodes_what_np_save_wrote(arrays):
    _same(run_headrace("decoders.numpy", [npy(a) for a in arrays]), arrays)


def test_numpy_decodes_fortran_order():
    arrays = [np.asfortranarray(a) for a in ARRAYS]
    got = run_headrace("decoders.numpy", [npy(a) for a in arrays])
    _same(got, [np.ascontiguousarray(a) for a in arrays])
    assert all(g.flags.c_contiguous for g in got)


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("arrays", [ARRAYS, *KINDS], ids=["f32", "i16", "bool", "f16", "scalar", "u64-empty"])
def test_numpy_matches_dali(arrays):
    data = [npy(a) for a in arrays]
    _same(run_headrace("decoders.numpy", data), run_dali("decoders.numpy", data))


@needs_dali[0]
@needs_dali[1]
@pytest.mark.parametrize("dtype", [types.UINT8, types.INT32, types.FLOAT16, types.FLOAT])
def test_numpy_dtype_converts_as_dali(dtype):
    values = [np.array([300.7, -2.0, 2.5, -1.5, 0.5, 77.0], np.float32), np.array([1e10, -1e10], np.float32)]
    data = [npy(v) for v in values]
    _same(run_headrace("decoders.numpy", data, dtype=dtype), run_dali("decoders.numpy", data, dtype=dtype))


def test_numpy_errors():
    good = npy(ARRAYS[0])
    with pytest.raises(SampleError, match=r"decoders.numpy.*sample 0.*header says 60 bytes.*has 57"):
        run_headrace("decoders.numpy", [good[:-3]])
    with pytest.raises(SampleError, match=r"decoders.numpy.*sample 0.*not a readable .npy file"):
        run_headrace("decoders.numpy", [good[:5]])
    with pytest.raises(SampleError, match=r"decoders.numpy.*sample 0.*big-endian"):
        run_headrace("decoders.numpy", [npy(ARRAYS[0].astype(">f4"))])
    with pytest.raises(SampleError, match=r"decoders.numpy.*sample 0.*complex64 is not supported"):
        run_headrace("decoders.numpy", [npy(ARRAYS[0].astype(np.complex64))])
    with pytest.raises(SampleError, match=r"decoders.numpy.*sample 0.*1D uint8"):
        run_headrace("decoders.numpy", [good.reshape(1, -1)])


def test_read_then_decode(tmp_path):
    paths = [tmp_path / f"{i}.npy" for i in range(2)]
    for path, array in zip(paths, ARRAYS, strict=True):
        np.save(path, array)
    import headrace
    from headrace import fn

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        names = fn.external_source(source=lambda: [encoded(p) for p in paths], batch=True)
        return fn.decoders.numpy(fn.io.file.read(names))

    p = pipe()
    (out,) = p.run()
    p.close()
    _same([np.array(out.at(i)) for i in range(2)], ARRAYS)
