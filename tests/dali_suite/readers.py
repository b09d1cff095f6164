"""DALI's data-loading examples: docs/examples/general/data_loading/numpy_reader.ipynb, dataloading_tfrecord.ipynb,
dataloading_webdataset.ipynb and the sharding arguments of the readers (docs/advanced_topics_sharding)."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

import numpy as np

from dali_suite import Lib, Pipe, SuiteData, case

LOADING = "DALI docs/examples/general/data_loading/"


@case(LOADING + "numpy_reader.ipynb (file_root + file_filter)", iterations=2)
def numpy_reader_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.readers.numpy(device="cpu", file_root=data.numpy_dir, file_filter="*.npy")

    return pipe()


@case(LOADING + "numpy_reader.ipynb (files, ROI: roi_start/roi_end, out_of_bounds_policy)", iterations=2)
def numpy_reader_roi(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    files = sorted(str(p) for p in Path(data.numpy_dir).glob("*.npy"))

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        whole = fn.readers.numpy(files=files, name="a")
        roi = fn.readers.numpy(files=files, roi_start=[1, 1], roi_end=[3, 3], name="b")
        padded = fn.readers.numpy(files=files, rel_roi_start=[0.5, 0.0], rel_roi_end=[1.5, 1.0],
                                  out_of_bounds_policy="pad", fill_value=-1.0, name="c")
        return whole, roi, padded

    return pipe()


@case(LOADING + "dataloading_tfrecord.ipynb", iterations=2, atol=1)
def tfrecord_reader_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types, tfrec = lib.fn, lib.types, lib.tfrecord

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        inputs = fn.readers.tfrecord(path=data.tfrecord, index_path=data.tfrecord_index, features={
            "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
            "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
            "image/object/bbox/xmin": tfrec.VarLenFeature(tfrec.float32, 0.0)})
        images = fn.decoders.image(inputs["image/encoded"], device="cpu", output_type=types.RGB)
        resized = fn.resize(images, resize_shorter=24)
        return resized, inputs["image/class/label"], inputs["image/object/bbox/xmin"]

    return pipe()


def _webdataset(root: Path, jpegs) -> str:
    path = root.parent / "shard0.tar"
    if not path.exists():
        with tarfile.open(path, "w") as tar:
            for i, jpeg in enumerate(jpegs):
                for ext, payload in (("jpg", jpeg.tobytes()), ("cls", str(i % 3).encode())):
                    info = tarfile.TarInfo(f"sample{i:04d}.{ext}")
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    return str(path)


@case(LOADING + "dataloading_webdataset.ipynb", iterations=2)
def webdataset_reader_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types
    tar = _webdataset(Path(data.numpy_dir), data.jpegs)

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        img_raw, cls = fn.readers.webdataset(paths=tar, ext=["jpg", "cls"], missing_component_behavior="error")
        img = fn.decoders.image(img_raw, output_type=types.RGB)
        return img, cls

    return pipe()


@case("DALI docs/advanced_topics_sharding.rst (readers.file shard_id / num_shards, pad_last_batch)",
      iterations=3)
def file_reader_sharded(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn

    @lib.pipeline_def(batch_size=5, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=data.images, shard_id=1, num_shards=2, pad_last_batch=True,
                                        stick_to_shard=True)
        return fn.peek_image_shape(jpegs), labels

    return pipe()


@case("DALI dali/test/python/operator_1/test_io_file_read.py (file names as data)")
def io_file_read_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    files = sorted(str(p) for p in Path(data.numpy_dir).glob("*.npy"))
    names = [np.frombuffer(f.encode(), np.uint8).copy() for f in files[:2]]

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        paths = fn.external_source(source=lambda: names, batch=True)
        return fn.io.file.read(paths)

    return pipe()


@case("DALI docs/examples/general/data_loading/numpy_reader.ipynb (decoders.numpy of raw .npy bytes)")
def numpy_decoder_example(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    files = sorted(str(p) for p in Path(data.numpy_dir).glob("*.npy"))

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        raw, _ = fn.readers.file(files=files)
        return fn.decoders.numpy(raw)

    return pipe()


@case("DALI docs/examples/use_cases/pytorch/resnet50 (older: readers.file with files= and labels=)", iterations=2)
def file_reader_files_labels(lib: Lib, data: SuiteData) -> Pipe:
    fn = lib.fn
    files = sorted(str(p) for p in Path(data.images).rglob("*.jpg"))[:6]
    labels = [10 * i + 3 for i in range(len(files))]

    @lib.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        jpegs, lb = fn.readers.file(files=files, labels=labels, pad_last_batch=False)
        return fn.peek_image_shape(jpegs), lb

    return pipe()


RECORDIO_MAGIC = 0xCED7230A


def _recordio(root: Path, jpegs) -> tuple[str, str]:
    """An MXNet RecordIO file of the JPEGs (IRHeader: flag 0, one float label, id) and its index."""
    rec, idx = root.parent / "images.rec", root.parent / "images.idx"
    if not rec.exists():
        data, lines = b"", []
        for i, jpeg in enumerate(jpegs):
            payload = struct.pack("<IfQQ", 0, float(i % 3), i, 0) + jpeg.tobytes()
            magic = struct.pack("<I", RECORDIO_MAGIC)
            assert all(payload[k:k + 4] != magic for k in range(0, len(payload) - 3, 4)), "the writer does not split"
            lines.append(f"{i}\t{len(data)}\n")
            data += struct.pack("<II", RECORDIO_MAGIC, len(payload)) + payload + b"\0" * (-len(payload) % 4)
        rec.write_bytes(data)
        idx.write_text("".join(lines))
    return str(rec), str(idx)


@case(LOADING + "dataloading_recordio.ipynb (readers.mxnet)", atol=(1 / 57.1 + 1e-5, 0), iterations=2)
def mxnet_reader_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types
    rec, idx = _recordio(Path(data.numpy_dir), data.jpegs)

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.mxnet(path=[rec], index_path=[idx])
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_shorter=24)
        output = fn.crop_mirror_normalize(images, dtype=types.FLOAT, crop=(20, 20), mean=[0.485 * 255, 0.456 * 255,
                                                                                            0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
        return output, labels

    return pipe()


def _caffe_lmdb(root: Path, jpegs) -> str:
    """A Caffe LMDB of encoded Datums (the JPEGs, labels 0..2), written with lmdb and headrace's Datum message."""
    import lmdb

    from headrace.readers.lmdb_records import messages

    path = root.parent / "caffe_lmdb"
    if not path.exists():
        datum = messages()["Datum"]
        env = lmdb.open(str(path), map_size=1 << 24)
        with env.begin(write=True) as txn:
            for i, jpeg in enumerate(jpegs):
                txn.put(f"{i:05d}".encode(), datum(data=jpeg.tobytes(), label=i % 3, encoded=True).SerializeToString())
        env.close()
    return str(path)


@case(LOADING + "dataloading_lmdb.ipynb (readers.caffe)", iterations=2)
def caffe_reader_example(lib: Lib, data: SuiteData) -> Pipe:
    fn, types = lib.fn, lib.types
    db = _caffe_lmdb(Path(data.numpy_dir), data.jpegs)

    @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.caffe(path=db)
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        return fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="HWC", crop=(24, 24),
                                        mean=[0.0], std=[1.0], mirror=1), labels

    return pipe()
