"""readers.webdataset and `headrace wds2idx`: tar shards written here with tarfile, read by headrace and by DALI's CPU
build from the same archives, with the index files the subcommand wrote and without any; outputs equal exactly
(dtype, shape and bytes), sample for sample, for several shard settings and missing-component policies. Shuffling,
checkpoints, the iterator's epoch size and bad archives or indexes are checked on headrace alone."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali

from headrace import SchemaError, fn, pipeline_def, types
from headrace.cli import main as cli_main
from headrace.errors import SampleError

PER_ARCHIVE = (6, 5)


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def write_archive(path, first: int, count: int, rng: np.random.Generator) -> None:
    """Samples first..first+count-1: 'NNNN.jpg' (or .PNG every third), 'NNNN.cls' (the number as text), 'NNNN.i32'
    (int32 values); sample 4 has no .cls; a directory, a hidden file and a symlink are left out by the readers. (A
    hidden file inside a folder, 'data/.x.jpg', DALI's scan without an index takes for a sample 'data/' where its
    wds2idx leaves it out, as headrace does; and when an archive's first file is hidden, DALI's scan makes an empty
    first sample of it. The archives here keep it at the top and after the first sample.)"""
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as archive:
        directory = tarfile.TarInfo("data")
        directory.type = tarfile.DIRTYPE
        archive.addfile(directory)
        for n in range(first, first + count):
            key = f"data/s{n:04d}"
            _add(archive, f"{key}.{'PNG' if n % 3 == 2 else 'jpg'}",
                 rng.integers(0, 256, 10 + 7 * n, dtype=np.uint8).tobytes())
            if n != 4:
                _add(archive, f"{key}.cls", str(n).encode())
            _add(archive, f"{key}.i32", np.arange(n, 2 * n + 1, dtype=np.int32).tobytes())
            if n == first:
                _add(archive, ".hidden.jpg", b"hidden")
        link = tarfile.TarInfo("data/zlink.jpg")
        link.type = tarfile.SYMTYPE
        link.linkname = "data/s0000.jpg"
        archive.addfile(link)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two archives and their index files (written by `headrace wds2idx`)."""
    root = tmp_path_factory.mktemp("wds")
    rng = np.random.default_rng(5)
    paths, indices, first = [], [], 0
    for k, count in enumerate(PER_ARCHIVE):
        path = root / f"shard-{k}.tar"
        write_archive(path, first, count, rng)
        first += count
        assert cli_main(["wds2idx", str(path)]) == 0  # default index name: shard-k.idx
        paths.append(str(path))
        indices.append(str(root / f"shard-{k}.idx"))
    return paths, indices


def headrace_pipe(paths, index_paths, ext, batch_size=4, checkpoint=None, **kwargs):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=3, enable_checkpointing=True)
    def pipe():
        out = fn.readers.webdataset(paths=paths, index_paths=index_paths, ext=ext, name="Reader", **kwargs)
        return out if isinstance(out, tuple) else (out,)

    return pipe(checkpoint=checkpoint)


def samples(pipe, batches: int) -> list[tuple[np.ndarray, ...]]:
    out = []
    for _ in range(batches):
        tensors = pipe.run()
        out += [tuple(np.asarray(t.at(i)) for t in tensors) for i in range(len(tensors[0]))]
    return out


def numbers(pipe, batches: int) -> list[int]:
    """The sample numbers (the .cls component, text) of what the pipeline reads."""
    return [int(s[0].tobytes()) for s in samples(pipe, batches)]


def _dali_wds2idx() -> str | None:
    """DALI's own wds2idx script: beside this Python (a virtual environment's bin) or on the PATH."""
    beside = Path(sys.executable).parent / "wds2idx"
    return str(beside) if beside.exists() else shutil.which("wds2idx")


def test_wds2idx_writes_dali_format_v1_2(shards):
    paths, indices = shards
    lines = open(indices[0]).read().splitlines()
    assert lines[0] == f"v1.2 {PER_ARCHIVE[0]}"
    with tarfile.open(paths[0]) as archive:
        members = {m.name: m for m in archive if m.isreg()}
    first = lines[1].split()
    assert first == ["jpg", str(members["data/s0000.jpg"].offset_data), str(members["data/s0000.jpg"].size),
                     "data/s0000.jpg", "cls", str(members["data/s0000.cls"].offset_data), "1", "data/s0000.cls",
                     "i32", str(members["data/s0000.i32"].offset_data), "4", "data/s0000.i32"]
    assert all(".hidden" not in line and "zlink" not in line for line in lines)



@pytest.mark.dali
@pytest.mark.skipif(_dali_wds2idx() is None, reason="DALI's wds2idx script is not installed")
def test_wds2idx_writes_what_dalis_script_writes(shards, tmp_path):
    paths, indices = shards
    subprocess.run([_dali_wds2idx(), paths[0], str(tmp_path / "dali.idx")], check=True, capture_output=True)
    assert (tmp_path / "dali.idx").read_text() == open(indices[0]).read()


def test_components_by_extension_and_dtype(shards):
    paths, indices = shards
    got = samples(headrace_pipe(paths, indices, ["jpg;png", "cls", "i32"], batch_size=11, dtypes=[
        types.UINT8, types.UINT8, types.INT32], case_sensitive_extensions=False), 1)
    assert len(got) == 11
    for n, (image, label, values) in enumerate(got):
        assert image.dtype == np.uint8 and image.size == 10 + 7 * n
        assert label.tobytes() == (b"" if n == 4 else str(n).encode())
        assert values.dtype == np.int32 and values.tolist() == list(range(n, 2 * n + 1))


def _dali_samples(paths, index_paths, ext, batches, **kwargs):
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    @dali_pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def dali_pipe():
        out = dfn.readers.webdataset(paths=paths, ext=ext, name="Reader", **(
            {"index_paths": index_paths} if index_paths else {}), **kwargs)
        return tuple(out) if isinstance(out, list | tuple) else (out,)

    pipe = dali_pipe()
    pipe.build()
    return samples(pipe, batches), pipe.reader_meta("Reader")


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("indexed", [True, False])
@pytest.mark.parametrize("settings", [
    {}, dict(num_shards=3, shard_id=1), dict(num_shards=2, shard_id=1, stick_to_shard=True),
    dict(num_shards=3, shard_id=2, pad_last_batch=True, missing_component_behavior="skip"),
    dict(case_sensitive_extensions=False, missing_component_behavior="Empty")])
def test_outputs_equal_dali_sample_for_sample(shards, indexed, settings):
    from nvidia.dali import types as dali_types

    paths, indices = shards
    ext = ["jpg;png", "cls", "i32"]
    theirs, dali_meta = _dali_samples(paths, indices if indexed else None, ext, 7, dtypes=[
        dali_types.UINT8, dali_types.UINT8, dali_types.INT32], **settings)
    pipe = headrace_pipe(paths, indices if indexed else [], ext, dtypes=[types.UINT8, types.UINT8, types.INT32],
                         **settings)
    ours = samples(pipe, 7)
    assert len(ours) == len(theirs)
    for number, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for output, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f"sample {number}, {output}"
    meta = pipe.reader_meta("Reader")
    for key in ("epoch_size", "epoch_size_padded", "number_of_shards", "shard_id", "pad_last_batch"):
        assert meta[key] == dali_meta[key], key


def test_missing_components_skip_or_error(shards):
    paths, indices = shards
    assert 4 not in numbers(headrace_pipe(paths, indices, ["cls"], batch_size=10,
                                          missing_component_behavior="skip"), 1)
    with pytest.raises(SchemaError, match=r"readers.webdataset \(node 'Reader'\): index file .*shard-0.idx.*line 6.*"
                                          r"data/s0004.*no component for output\(s\) \[1\]"):
        headrace_pipe(paths, indices, ["jpg;PNG", "cls"], missing_component_behavior="error").build()
    with pytest.raises(SchemaError, match=r"archive .*shard-0.tar.*sample 5.*data/s0004"):
        headrace_pipe(paths, [], ["jpg;PNG", "cls"], missing_component_behavior="error").build()
    with pytest.raises(SchemaError, match="missing_component_behavior.*got 'sometimes'"):
        headrace_pipe(paths, indices, ["cls"], missing_component_behavior="sometimes").build()


def test_random_shuffle_and_shuffle_after_epoch(shards):
    paths, indices = shards
    got = numbers(headrace_pipe(paths, indices, ["cls"], batch_size=5, missing_component_behavior="skip",
                                random_shuffle=True), 4)  # 10 samples with a .cls: two epochs
    assert sorted(got[:10]) == sorted(got[10:]) == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10]
    assert got[:10] != got[10:]
    epochs = numbers(headrace_pipe(paths, indices, ["cls"], batch_size=10, missing_component_behavior="skip",
                                   shuffle_after_epoch=True), 4)
    orders = {tuple(epochs[k:k + 10]) for k in range(0, 40, 10)}
    assert orders <= {(0, 1, 2, 3, 5, 6, 7, 8, 9, 10), (6, 7, 8, 9, 10, 0, 1, 2, 3, 5)}  # whole archives in turn
    assert len(orders) == 2


def test_checkpoint_resumes_bit_for_bit(shards):
    paths, indices = shards
    ext = ["jpg;png", "i32"]
    reference = samples(headrace_pipe(paths, indices, ext, random_shuffle=True), 8)
    first = headrace_pipe(paths, indices, ext, random_shuffle=True)
    samples(first, 3)  # past the first epoch's end (11 samples)
    resumed = headrace_pipe(paths, indices, ext, random_shuffle=True, checkpoint=first.checkpoint())
    for a, b in zip(samples(resumed, 5), reference[12:], strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_torch_iterator_reads_the_epoch_size_through_reader_name(shards):
    from headrace_torch import GenericIterator, LastBatchPolicy

    paths, indices = shards

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=3)
    def pipe():
        values = fn.readers.webdataset(paths=paths, index_paths=indices, ext=["i32"], dtypes=[types.INT32],
                                       name="Reader")
        return fn.reductions.min(values)  # sample n holds n..2n: its first value, one per sample

    iterator = GenericIterator(pipe(), ["first"], reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
    seen = [int(v) for batch in iterator for v in batch[0]["first"].reshape(-1)]
    assert len(iterator) == 3 and seen == list(range(11))  # 11 samples in batches of 4, the last one partial


def test_bad_index_or_archive_is_refused_naming_the_file_and_line(shards, tmp_path):
    paths, indices = shards
    lines = open(indices[0]).read().splitlines()
    bad = tmp_path / "bad.idx"
    bad.write_text("\n".join([lines[0], lines[1], "jpg 513 10 data/x.jpg", *lines[3:]]) + "\n")
    with pytest.raises(SchemaError, match=r"index file .*bad.idx.*line 3: bad offset"):
        headrace_pipe([paths[0]], [str(bad)], ["jpg"]).build()
    bad.write_text("v9 3\n")
    with pytest.raises(SchemaError, match=r"bad.idx.*line 1: expected '<version> <samples>'"):
        headrace_pipe([paths[0]], [str(bad)], ["jpg"]).build()
    short = tmp_path / "short.tar"
    short.write_bytes(open(paths[0], "rb").read()[:3000])
    with pytest.raises(SchemaError, match=r"index file .*shard-0.idx', line 2: 'data/s0000\.\w+' .*runs past the "
                                          r"end of the archive"):
        headrace_pipe([str(short)], [indices[0]], ["jpg;png"]).build()
    with pytest.raises(SchemaError, match=r"archive .*short.tar' is cut or damaged after byte 2560"):
        headrace_pipe([str(short)], [], ["jpg;png"]).build()
    assert cli_main(["wds2idx", str(short), str(tmp_path / "short.idx")]) == 1
    with pytest.raises(SchemaError, match=r"shard-0.idx', line 2: 'data/s0000.jpg' has 10 bytes, not a whole number "
                                          r"of int32 values"):
        headrace_pipe(paths, indices, ["jpg"], dtypes=[types.INT32]).build()
    with pytest.raises(SchemaError, match=r"argument 'dtypes': one of .* per `ext` set \(2\), got \['INT32'\]"):
        headrace_pipe(paths, indices, ["jpg", "cls"], dtypes=[types.INT32]).build()


def test_an_archive_cut_after_the_reader_was_made_is_an_error_naming_the_sample(shards, tmp_path):
    paths, indices = shards
    cut = tmp_path / "cut.tar"
    data = open(paths[1], "rb").read()
    cut.write_bytes(data)
    pipe = headrace_pipe([str(cut)], [indices[1]], ["i32"], batch_size=5)  # indexed while whole ...
    pipe.build()
    last = open(indices[1]).read().splitlines()[-1].split()
    cut.write_bytes(data[:int(last[-3]) - 100])  # ... then cut inside the last sample
    with pytest.raises(SampleError, match=r"readers.webdataset \(node 'Reader'\): .*cut.tar.*sample 'data/s0010' "
                                          r"\(line 6\).*file ends"):
        samples(pipe, 1)


@pytest.mark.filterwarnings("ignore:headrace. batch:RuntimeWarning")  # batches read ahead meet the image again
def test_a_decoder_skipping_a_bad_image_gets_the_readers_next_sample(tmp_path):
    """decoders.image(on_error="skip") downstream: the slot of an undecodable image gets the reader's next unread
    sample (all of its outputs together), as readers.file's replacements."""
    import cv2

    path = tmp_path / "images.tar"
    with tarfile.open(path, "w") as archive:
        for n in range(6):
            image = np.full((4, 5, 3), 40 * n, np.uint8)
            data = b"not a jpeg" if n == 1 else cv2.imencode(".png", image)[1].tobytes()
            _add(archive, f"{n}.png", data)
            _add(archive, f"{n}.cls", str(n).encode())

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=3)
    def pipe():
        image, label = fn.readers.webdataset(paths=[str(path)], ext=["png", "cls"], name="Reader")
        return fn.decoders.image(image, on_error="skip"), label

    p = pipe()
    with pytest.warns(RuntimeWarning, match=r"images.tar \[sample '1'"):
        images, labels = p.run()
    assert [bytes(np.asarray(labels.at(i))) for i in range(3)] == [b"0", b"3", b"2"]
    assert [int(np.asarray(images.at(i))[0, 0, 0]) for i in range(3)] == [0, 120, 80]
