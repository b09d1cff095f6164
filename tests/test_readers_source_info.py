"""Each reader's source_info against DALI's CPU build (fn.get_property(key='source_info')): readers.file and
readers.numpy give the path as listed (relative to file_root; a file of numpy's own file_root listing as './name'),
readers.coco the annotation's file_name, tfrecord and mxnet '<file> at index <offset>', caffe '<db> at key <key>',
webdataset '<archive>:<offset>:<component>' of the first output. Errors still name the full path: a sample's source
is that path, carrying DALI's text as `.source_info` (headrace.readers.file.SampleSource)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali

import headrace
from headrace.cli import main as cli_main
from headrace.readers.file import SampleSource


def _ours(build, batch_size: int = 3) -> tuple[list[str], list[str]]:
    """(DALI-style source_info, the batch's source strings) of the first batch's samples of `build`'s first output."""
    @headrace.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=1)
    def pipe():
        out = build(headrace)
        return out[0] if isinstance(out, tuple | list) else out

    p = pipe()
    (batch,) = p.run()
    p.close()
    sources = [batch.source_info(i) for i in range(batch_size)]
    return [getattr(s, "source_info", s) for s in sources], [str(s) for s in sources]


def _dali(build, batch_size: int = 3) -> list[str]:
    import nvidia.dali

    @nvidia.dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=1)
    def pipe():
        out = build(nvidia.dali)
        return nvidia.dali.fn.get_property(out[0] if isinstance(out, tuple | list) else out, key="source_info")

    p = pipe()
    p.build()
    (batch,) = p.run()
    return [bytes(np.asarray(batch.at(i))).decode() for i in range(batch_size)]


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for cls in ("c0", "c1"):
        (root / "imgs" / cls).mkdir(parents=True)
        for i in range(2):
            (root / "imgs" / cls / f"{i}.jpg").write_bytes(bytes([i]) * 10)
    (root / "list.txt").write_text("c0/0.jpg 0\n./c1/1.jpg 1\nc1//0.jpg 1\n")
    return root


FILE_CASES = {"file_root": lambda r: dict(file_root=str(r / "imgs")),
              "file_root_slash": lambda r: dict(file_root=str(r / "imgs") + "/"),
              "file_list": lambda r: dict(file_root=str(r / "imgs"), file_list=str(r / "list.txt")),
              "files": lambda r: dict(file_root=str(r / "imgs"), files=["c1/1.jpg", "./c0/0.jpg", "c0//1.jpg"]),
              "absolute_files": lambda r: dict(files=[str(r / "imgs/c1/1.jpg"), str(r / "imgs/c0/0.jpg")] * 2)}


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("case", FILE_CASES)
def test_readers_file_gives_the_path_as_listed(images, case):
    args = FILE_CASES[case](images)
    info, _ = _ours(lambda lib: lib.fn.readers.file(**args))
    assert info == _dali(lambda lib: lib.fn.readers.file(**args))


def test_errors_still_name_the_full_path(tmp_path):
    """source_info is relative to file_root, but a decoder's error names the sample's file by its full path."""
    from headrace.errors import SampleError

    (tmp_path / "c0").mkdir()
    bad = tmp_path / "c0" / "bad.jpg"
    bad.write_bytes(b"not a jpeg")
    info, _ = _ours(lambda lib: lib.fn.readers.file(file_root=str(tmp_path)), batch_size=1)
    assert info == ["c0/bad.jpg"]

    @headrace.pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        jpegs, _ = headrace.fn.readers.file(file_root=str(tmp_path))
        return headrace.fn.decoders.image(jpegs)

    p = pipe()
    with pytest.raises(SampleError) as error:
        p.run()
    p.close()
    assert error.value.source == str(bad) and str(bad) in str(error.value)


def test_a_sample_source_keeps_both_through_pickling():
    import pickle

    source = pickle.loads(pickle.dumps(SampleSource("/data/c0/0.jpg", "c0/0.jpg")))
    assert source == "/data/c0/0.jpg" and source.source_info == "c0/0.jpg" and isinstance(source, SampleSource)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("case", ["root", "files", "file_list", "absolute"])
def test_readers_numpy(tmp_path, case):
    (tmp_path / "sub").mkdir()
    for name in ("a.npy", "b.npy", "sub/c.npy"):
        with open(tmp_path / name, "wb") as f:
            np.save(f, np.zeros((2, 2), np.float32))
    (tmp_path / "list.txt").write_text("sub/c.npy\n./a.npy\nb.npy\n")
    args = {"root": dict(file_root=str(tmp_path)),
            "files": dict(file_root=str(tmp_path), files=["sub/c.npy", "a.npy", "./b.npy"]),
            "file_list": dict(file_root=str(tmp_path), file_list=str(tmp_path / "list.txt")),
            "absolute": dict(files=[str(tmp_path / "sub/c.npy"), str(tmp_path / "a.npy")] * 2)}[case]
    info, _ = _ours(lambda lib: lib.fn.readers.numpy(**args))
    assert info == _dali(lambda lib: lib.fn.readers.numpy(**args))


@pytest.mark.dali
@needs_dali
def test_readers_coco(tmp_path):
    from test_readers_coco import make_coco

    args = dict(file_root=str(tmp_path / "images"), annotations_file=str(make_coco(tmp_path, seed=1, images=4)))
    assert _ours(lambda lib: lib.fn.readers.coco(**args))[0] == _dali(lambda lib: lib.fn.readers.coco(**args))


@pytest.mark.dali
@needs_dali
def test_readers_tfrecord(tmp_path):
    import nvidia.dali.tfrecord as dali_tfrecord
    from test_readers_tfrecord import make_example

    from headrace import tfrecord

    rng = np.random.default_rng(3)
    path, index = tmp_path / "a.tfrecord", tmp_path / "a.idx"
    path.write_bytes(b"".join(tfrecord.encode_record(make_example(i, rng)) for i in range(4)))
    assert cli_main(["tfrecord2idx", str(path), str(index)]) == 0

    def build(lib):
        module = dali_tfrecord if lib is not headrace else tfrecord
        return lib.fn.readers.tfrecord(path=[str(path)], index_path=[str(index)],
                                       features={"label": module.FixedLenFeature([], module.int64, -1)})["label"]

    assert _ours(build)[0] == _dali(build)


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("indexed", [True, False])
def test_readers_webdataset(tmp_path, indexed):
    from test_readers_webdataset import write_archive

    path = tmp_path / "s.tar"
    write_archive(path, 0, 4, np.random.default_rng(5))
    assert cli_main(["wds2idx", str(path)]) == 0
    index = dict(index_paths=[str(tmp_path / "s.idx")]) if indexed else {}
    for ext in (["cls", "jpg;PNG"], ["jpg;PNG", "i32"], ["txt"]):  # "txt": no such component, ''
        def build(lib, ext=ext):
            return lib.fn.readers.webdataset(paths=[str(path)], ext=ext, **index)

        assert _ours(build)[0] == _dali(build), ext


@pytest.mark.dali
@needs_dali
def test_readers_mxnet(tmp_path):
    from test_readers_recordio import encode_recordio, image_record

    paths, lines, stream = [], [], 0
    for k in range(2):
        data = b""
        for i in range(2):
            payload, _, _ = image_record(2 * k + i, np.random.default_rng(i))
            lines.append(f"{2 * k + i}\t{stream + len(data)}\n")
            data += encode_recordio(payload)
        (tmp_path / f"{k}.rec").write_bytes(data)
        paths.append(str(tmp_path / f"{k}.rec"))
        stream += len(data)
    (tmp_path / "all.idx").write_text("".join(lines))

    def build(lib):
        return lib.fn.readers.mxnet(path=paths, index_path=[str(tmp_path / "all.idx")])

    assert _ours(build, 4)[0] == _dali(build, 4)


@pytest.mark.dali
@needs_dali
def test_readers_caffe(tmp_path):
    pytest.importorskip("lmdb")
    from test_readers_caffe import messages, write_db

    datum = messages()["Datum"]
    db = write_db(tmp_path / "db", {f"{k:05d}".encode(): datum(data=b"abc", label=k, encoded=True).SerializeToString()
                                    for k in range(4)})
    assert _ours(lambda lib: lib.fn.readers.caffe(path=db))[0] == _dali(lambda lib: lib.fn.readers.caffe(path=db))


@pytest.mark.dali
@needs_dali
def test_readers_caffe2(tmp_path):
    pytest.importorskip("lmdb")
    from test_readers_caffe import messages, tensor, write_db

    protos = messages()["TensorProtos"]
    db = write_db(tmp_path / "db", {f"r{k}".encode(): protos(protos=[tensor("STRING", [b"abc"]), tensor("INT32", [k])])
                                    .SerializeToString() for k in range(4)})
    assert _ours(lambda lib: lib.fn.readers.caffe2(path=db))[0] == _dali(lambda lib: lib.fn.readers.caffe2(path=db))
