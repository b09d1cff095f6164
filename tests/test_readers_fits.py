"""experimental.readers.fits on FITS files written here with astropy: every HDU index, element type (BZERO-offset
unsigned and signed-byte images, a BSCALE-scaled one), 1-D to 3-D images, RICE- and GZIP-compressed images (lossless
integer tiles), against the arrays written (exact) and astropy's own reading (exact); the listing, sharding, padding,
shuffling and checkpoints; bad input; device='gpu' against the CPU (marker gpu).

DALI's CPU build here cannot run this reader (even on device='cpu' it stops with 'CUDA driver version is insufficient'),
so the comparison with DALI runs only where DALI can (test_matches_dali_where_it_runs skips itself otherwise)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali
from test_readers_numpy import assert_same, assert_same_epochs, assert_same_meta, read_reader

from headrace import fn, pipeline_def, types
from headrace.errors import HeadraceError, SchemaError

fits = pytest.importorskip("astropy.io.fits", reason="experimental.readers.fits reads with astropy (the fits extra)")
RNG = np.random.default_rng(5)


def _images(i: int) -> list[np.ndarray]:
    """The three extension images of file i: uint16 (BZERO 32768), float32 3-D, int8 (BZERO -128) 1-D."""
    return [RNG.integers(0, 65536, (3 + i, 4), dtype=np.uint16), RNG.random((2, 3, 2 + i), dtype=np.float32),
            RNG.integers(-128, 128, (5 + i,), dtype=np.int8)]


@pytest.fixture(scope="module")
def fits_root(tmp_path_factory) -> tuple[Path, dict[str, list[np.ndarray]]]:
    """Seven files in file_root and a sub-folder (plus files the default filter leaves out), each a primary HDU
    without data and three image extensions; the arrays written, by name."""
    root = tmp_path_factory.mktemp("fits")
    (root / "sub").mkdir()
    written = {}
    for i, name in enumerate(["b.fits", "a.fits", "c.fits", "sub/e.fits", "sub/d.fits", "f.fits", "g.fits"]):
        images = _images(i)
        fits.HDUList([fits.PrimaryHDU(), *(fits.ImageHDU(a) for a in images)]).writeto(root / name)
        written[name] = images
    (root / "skip.fit").write_bytes(b"not listed")
    (root / "sub" / "nested").mkdir()
    return root, written


def _written_order(written: dict) -> list[str]:
    """DALI's listing of file_root: its own files sorted, then each sub-folder's."""
    top = sorted(n for n in written if "/" not in n)
    return top + sorted(n for n in written if "/" in n)


def test_every_hdu_type_and_shape_is_what_was_written(fits_root):
    root, written = fits_root
    ours, meta = _read(root, 7, hdu_indices=[2, 3, 4])
    assert meta["epoch_size"] == 7
    for sample, name in zip(ours, _written_order(written), strict=True):
        for got, want in zip(sample, written[name], strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), name
            assert got.dtype.isnative and got.flags.c_contiguous
    first, _ = _read(root, 1, files=["a.fits"])  # default hdu_indices=[2]: the first extension
    assert len(first[0]) == 1 and np.array_equal(first[0][0], written["a.fits"][0])
    reordered, _ = _read(root, 1, files=["a.fits"], hdu_indices=[4, 2, 4])
    assert [a.dtype for a in reordered[0]] == [np.int8, np.uint16, np.int8]


def _read(root: Path, batch_size: int, batches: int = 1, **args) -> tuple[list[tuple], dict]:
    """`batches` batches of experimental.readers.fits over `root`, as samples (one array per HDU) and the meta."""
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=7)
    def pipe():
        out = fn.experimental.readers.fits(file_root=str(root), name="Reader", **args)
        return tuple(out) if isinstance(out, tuple | list) else out

    p = pipe()
    samples = []
    for _ in range(batches):
        outs = p.run()
        samples += [tuple(np.array(o.at(i)) for o in outs) for i in range(batch_size)]
    meta = p.reader_meta("Reader")
    p.close()
    return samples, meta


def test_compressed_and_scaled_images_match_astropy(tmp_path):
    """RICE_1 and GZIP_1 tiles (integer images: lossless) are decompressed; a BSCALE/BZERO-scaled 16-bit image is
    float32 as CFITSIO's equivalent type says, with astropy's values."""
    ints = RNG.integers(-3000, 3000, (9, 11), dtype=np.int16)
    ints32 = RNG.integers(-(2**30), 2**30, (4, 6, 5), dtype=np.int32)
    scaled = fits.ImageHDU(RNG.random((6, 7), dtype=np.float32) * 100)
    scaled.scale("int16", bscale=0.25, bzero=10.0)
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(ints, compression_type="RICE_1"),
                  fits.CompImageHDU(ints32, compression_type="GZIP_1", tile_shape=(1, 3, 5)), scaled]
                 ).writeto(tmp_path / "c.fits")
    (rice, gzip, scale), = _read(tmp_path, 1, hdu_indices=[2, 3, 4])[0]
    assert rice.dtype == np.int16 and np.array_equal(rice, ints)
    assert gzip.dtype == np.int32 and np.array_equal(gzip, ints32)
    reference = fits.getdata(tmp_path / "c.fits", ext=3)
    assert scale.dtype == np.float32 and reference.dtype == np.float32 and np.array_equal(scale, reference)


def test_files_file_list_and_the_primary_hdu(fits_root, tmp_path):
    root, written = fits_root
    names = ["sub/d.fits", "a.fits", "a.fits"]
    (tmp_path / "list.txt").write_text("\n".join(names) + "\n")
    for args in (dict(files=names), dict(file_list=str(tmp_path / "list.txt"))):
        ours, _ = _read(root, 3, **args)
        assert [s[0].tobytes() for s in ours] == [written[n][0].tobytes() for n in names]
    primary = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    fits.PrimaryHDU(primary).writeto(tmp_path / "p.fits")
    ours, _ = _read(tmp_path, 1, files=["p.fits"], hdu_indices=[1])
    assert ours[0][0].dtype == np.int32 and np.array_equal(ours[0][0], primary)


@pytest.mark.parametrize("sharding", [dict(num_shards=3, shard_id=1),
                                      dict(num_shards=2, shard_id=1, stick_to_shard=True),
                                      dict(num_shards=3, shard_id=2, pad_last_batch=True)])
def test_shards_and_padding_are_readers_numpys(fits_root, tmp_path, sharding):
    """The same files as .npy give readers.numpy's samples and meta (whose sharding is DALI's, tests/
    test_readers_numpy.py), so the FITS reader's shards and padding are DALI's too."""
    root, written = fits_root
    order = _written_order(written)
    for name in order:
        np.save(tmp_path / name.replace("/", "_").replace(".fits", ".npy"), written[name][0])
    files = [name.replace("/", "_").replace(".fits", ".npy") for name in order]
    ours, meta = _read(root, 2, 5, **sharding)
    npy, npy_meta = read_reader("numpy", 2, 5, file_root=str(tmp_path), files=files, **sharding)
    assert_same_meta(meta, npy_meta)
    assert_same(ours, npy)


def test_shuffling_and_checkpoints(fits_root):
    root, _ = fits_root
    plain, _ = _read(root, 7, 1)
    for args in (dict(random_shuffle=True, initial_fill=3), dict(shuffle_after_epoch=True)):
        ours, _ = _read(root, 7, 2, **args)
        assert_same_epochs(ours, plain * 2, 7)
        assert [s[0].tobytes() for s in ours[:7]] != [s[0].tobytes() for s in ours[7:]]

    assert_resumes_fits(root, random_shuffle=True, initial_fill=3, hdu_indices=[2, 4])
    assert_resumes_fits(root, pad_last_batch=True, num_shards=3, shard_id=2)


def assert_resumes_fits(root: Path, **args) -> None:
    """A pipeline restored from a checkpoint after 3 batches gives the next batches bit for bit."""
    @pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=11, enable_checkpointing=True)
    def pipe():
        out = fn.experimental.readers.fits(file_root=str(root), **args)
        return tuple(out) if isinstance(out, tuple | list) else out

    reference = pipe()
    expected = [reference.run() for _ in range(6)]
    expected = [[np.array(o.at(i)) for o in outs for i in range(2)] for outs in expected]
    first = pipe()
    for _ in range(3):
        first.run()
    resumed = pipe(checkpoint=first.checkpoint())
    for want in expected[3:]:
        got = [np.array(o.at(i)) for o in resumed.run() for i in range(2)]
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    for p in (reference, first, resumed):
        p.close()


def _error(root: Path, **args) -> str:
    with pytest.raises(HeadraceError) as info:
        _read(root, 1, **args)
    return str(info.value)


def test_bad_input_names_the_reader_the_file_and_the_argument(tmp_path):
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(np.zeros((2, 2), np.float32)),
                  fits.BinTableHDU.from_columns([fits.Column(name="x", format="J", array=np.arange(3))])]
                 ).writeto(tmp_path / "t.fits")
    (tmp_path / "junk.fits").write_bytes(b"SIMPLE  = nonsense" + b" " * 100)
    for args, words in [(dict(files=["t.fits"], hdu_indices=[5]), ["has no HDU 5", "hdu_indices", "t.fits"]),
                        (dict(files=["t.fits"], hdu_indices=[3]), ["HDU 3", "not an image HDU", "t.fits"]),
                        (dict(files=["t.fits"], hdu_indices=[1]), ["HDU 1", "no image (NAXIS 0)", "t.fits"]),
                        (dict(files=["missing.fits"]), ["cannot open it", "missing.fits"]),
                        (dict(files=["junk.fits"]), ["junk.fits", "not a readable FITS file"])]:
        message = _error(tmp_path, **args)
        assert "experimental.readers.fits" in message and all(w in message for w in words), message
    with pytest.raises(SchemaError, match="2 dtypes for 1 hdu_indices"):
        _read(tmp_path, 1, files=["t.fits"], dtypes=[types.FLOAT, types.FLOAT])
    with pytest.raises(SchemaError, match="dtypes"):
        _read(tmp_path, 1, files=["t.fits"], dtypes=[types.BOOL])
    with pytest.raises(SchemaError, match="experimental.readers.fits .*file_root .*cannot be listed"):
        _read(tmp_path / "nowhere", 1)
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(np.zeros((2, 2), np.int16))]).writeto(tmp_path / "u.fits")
    with pytest.raises(HeadraceError, match=r"HDU 2 \(hdu_indices\) in a batch must share their type .*float32.*int16"):
        _read(tmp_path, 2, files=["t.fits", "u.fits"])


@pytest.mark.dali
@needs_dali
def test_matches_dali_where_it_runs(fits_root):
    """DALI's reader (CFITSIO) gives the same arrays; its CPU build needs a CUDA driver even on device='cpu', so this
    skips itself where it has none."""
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    root, _ = fits_root

    @dali_pipeline_def(batch_size=7, num_threads=1, device_id=None, seed=7)
    def pipe():
        return tuple(dfn.experimental.readers.fits(file_root=str(root), hdu_indices=[2, 3, 4], device="cpu"))

    p = pipe()
    try:
        p.build()
        outs = p.run()
    except RuntimeError as exc:
        if "CUDA" in str(exc):
            pytest.skip(f"DALI's FITS reader cannot run here: {str(exc).splitlines()[-3:]}")
        raise
    theirs = [tuple(np.array(o.at(i)) for o in outs) for i in range(7)]
    ours, _ = _read(root, 7, hdu_indices=[2, 3, 4])
    assert_same(ours, theirs)


@pytest.mark.gpu
def test_gpu_output_equals_cpu_output(fits_root):
    """device='gpu': the arrays read on the host and uploaded are the CPU reader's."""
    import cupy as cp

    root, _ = fits_root

    @pipeline_def(batch_size=3, num_threads=1, device_id=0, seed=2)
    def pipe():
        return tuple(fn.experimental.readers.fits(device="gpu", file_root=str(root), hdu_indices=[2, 3, 4]))

    p = pipe()
    outs = p.run()
    cpu, _ = _read(root, 3, hdu_indices=[2, 3, 4])
    for k, out in enumerate(outs):
        assert out.device == "gpu"
        for i in range(3):
            got = cp.asnumpy(cp.asarray(out.at(i)))
            assert got.dtype == cpu[i][k].dtype and np.array_equal(got, cpu[i][k])
    p.close()
