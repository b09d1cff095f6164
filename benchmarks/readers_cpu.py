"""The readers' speed on the CPU, side by side in one process: each headrace reader against DALI's CPU build reading
the same generated files (issue 19, "Speed").

The data is generated once per set of arguments: ImageNet-like JPEGs (random smooth colour fields with shapes and
noise, ~500x400, quality 95: ~110 KB each) written as a folder per class (readers.file), two TFRecord files of
tf.train.Examples with their index files (`headrace tfrecord2idx`; readers.tfrecord), two webdataset tar shards of
.jpg + .cls with their index files (`headrace wds2idx`; readers.webdataset), a RecordIO .rec + .idx written to
dmlc-core's spec (readers.mxnet), an LMDB of Caffe Datums (readers.caffe), a COCO set (images + instances JSON;
readers.coco), and ~1 MB float32 .npy arrays (numpy.save; readers.numpy).

Two kinds of pipeline, each written once and built with either library's `pipeline_def`:
- "reader": the reader alone, random_shuffle=True, its outputs are the pipeline's outputs;
- "+rn50": the readers.tfrecord and readers.webdataset outputs through the ResNet-50 training preprocessing
  (decoders.image_random_crop, resize 224x224, crop_mirror_normalize to float16 CHW with a random mirror), as
  headrace/demo.py and DALI's ResNet-50 example write it.
Batch 32, 2 threads, device_id None. In every round each case runs, each library a few warm-up batches and then its
timed whole epochs (reader alone: several epochs, as one epoch takes a fraction of a second); the order of the two
libraries alternates (A B, B A, ...), so load from neighbours on a shared machine falls on both alike. The table
gives the median samples/s of the rounds, the MB/s of record bytes read, the ratio of the medians and the range of
the per-round ratios, and every round's figures.

    python benchmarks/readers_cpu.py                 # 400 JPEG records, 320 arrays, 6 rounds
    python benchmarks/readers_cpu.py --quick         # 192 records, 96 arrays, 3 rounds, fewer timed epochs
    python benchmarks/readers_cpu.py --only file tfrecord+rn50
    python benchmarks/readers_cpu.py --device gpu    # GPU 0: readers.numpy(device="gpu") in GB/s against
                                                     # numpy.load + CuPy upload and kvikio alone (and DALI's GPU
                                                     # reader where its GPU build is installed)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import struct
import tarfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
from rounds import Runner, timed_epoch
from tqdm import tqdm

LIBRARIES = ("headrace", "dali")
READERS = ("file", "tfrecord", "webdataset", "mxnet", "caffe", "numpy", "coco")
CASES = (*READERS, "tfrecord+rn50", "webdataset+rn50")
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
RECORDIO_MAGIC = 0xCED7230A
CLASSES = 10


# ----------------------------------------------------------------------------------------------------------- data


def make_jpegs(count: int, seed: int) -> list[bytes]:
    """`count` ImageNet-like JPEGs (~500x400, quality 95, ~110 KB): headrace's synthetic photo-like fields with
    extra noise, so they compress as camera pictures do."""
    import cv2

    from headrace.data.synthetic import synthetic_image

    rng = np.random.default_rng(seed)
    out = []
    for _ in tqdm(range(count), desc="encoding JPEGs", unit="img", leave=False):
        height, width = int(400 * rng.uniform(0.9, 1.1)), int(500 * rng.uniform(0.9, 1.1))
        image = synthetic_image(rng, height, width).astype(np.float32)
        image = np.clip(image + rng.normal(0, 8, image.shape), 0, 255).astype(np.uint8)
        ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 95])
        if not ok:
            raise RuntimeError("OpenCV could not encode a JPEG")
        out.append(encoded.tobytes())
    return out


def write_folder(root: Path, jpegs: Iterable[bytes]) -> None:
    """readers.file: one folder per class."""
    for i, data in enumerate(jpegs):
        folder = root / f"class_{i % CLASSES:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"img_{i:06d}.jpg").write_bytes(data)


def write_tfrecords(root: Path, jpegs: list[bytes], files: int = 2) -> None:
    """readers.tfrecord: tf.train.Examples ('image/encoded', 'image/class/label') over `files` files, indexed by
    `headrace tfrecord2idx`."""
    from headrace import tfrecord
    from headrace.cli import main as cli_main

    example_cls = tfrecord.example_class()
    root.mkdir(parents=True, exist_ok=True)
    for k, part in enumerate(np.array_split(np.arange(len(jpegs)), files)):
        records = []
        for i in part:
            example = example_cls()
            example.features.feature["image/encoded"].bytes_list.value.append(jpegs[i])
            example.features.feature["image/class/label"].int64_list.value.append(int(i) % CLASSES)
            records.append(tfrecord.encode_record(example.SerializeToString()))
        path = root / f"train-{k:05d}.tfrecord"
        path.write_bytes(b"".join(records))
        if cli_main(["tfrecord2idx", str(path), str(root / f"train-{k:05d}.idx")]) != 0:
            raise RuntimeError(f"tfrecord2idx failed on {path}")


def write_webdataset(root: Path, jpegs: list[bytes], shards: int = 2) -> None:
    """readers.webdataset: tar shards of 'NNNNNN.jpg' + 'NNNNNN.cls', indexed by `headrace wds2idx`."""
    from headrace.cli import main as cli_main

    root.mkdir(parents=True, exist_ok=True)
    for k, part in enumerate(np.array_split(np.arange(len(jpegs)), shards)):
        path = root / f"shard-{k:05d}.tar"
        with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as archive:
            for i in part:
                for name, data in ((f"{i:06d}.jpg", jpegs[i]), (f"{i:06d}.cls", str(int(i) % CLASSES).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))
        if cli_main(["wds2idx", str(path)]) != 0:
            raise RuntimeError(f"wds2idx failed on {path}")


def encode_recordio(payload: bytes) -> bytes:
    """One record as dmlc-core's recordio writes it: split where the payload holds the (4-aligned) magic number,
    which is dropped; each part behind its header (magic, continuation flag << 29 | length), padded to 4 bytes."""
    magic = struct.pack("<I", RECORDIO_MAGIC)
    cuts = [k for k in range(0, len(payload) - 3, 4) if payload[k:k + 4] == magic]
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(payload[start:cut])
        start = cut + 4
    pieces.append(payload[start:])
    out = []
    for k, piece in enumerate(pieces):
        flag = 0 if len(pieces) == 1 else 1 if k == 0 else 3 if k == len(pieces) - 1 else 2
        out.append(struct.pack("<II", RECORDIO_MAGIC, flag << 29 | len(piece)) + piece + b"\0" * (-len(piece) % 4))
    return b"".join(out)


def write_recordio(root: Path, jpegs: list[bytes]) -> None:
    """readers.mxnet: one .rec of MXNet image records (IRHeader: flag 0, one float label, id) and its .idx, as
    im2rec writes them."""
    root.mkdir(parents=True, exist_ok=True)
    chunks, lines, offset = [], [], 0
    for i, data in enumerate(jpegs):
        record = encode_recordio(struct.pack("<IfQQ", 0, float(i % CLASSES), i, 0) + data)
        lines.append(f"{i}\t{offset}\n")
        chunks.append(record)
        offset += len(record)
    (root / "train.rec").write_bytes(b"".join(chunks))
    (root / "train.idx").write_text("".join(lines))


def write_lmdb(root: Path, jpegs: list[bytes]) -> None:
    """readers.caffe: an LMDB of encoded Caffe Datums (lmdb + protobuf, as Caffe's convert_imageset writes)."""
    import lmdb

    from headrace.readers.lmdb_records import messages

    datum = messages()["Datum"]
    env = lmdb.open(str(root), map_size=max(1 << 26, 4 * sum(map(len, jpegs))))
    with env.begin(write=True) as txn:
        for i, data in enumerate(jpegs):
            txn.put(f"{i:08d}".encode(), datum(data=data, label=i % CLASSES, encoded=True).SerializeToString())
    env.close()


def write_coco(root: Path, jpegs: list[bytes], seed: int) -> None:
    """readers.coco: the images and an instances JSON with 1 to 4 boxes (and polygons) per image."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for i, data in enumerate(jpegs):
        name = f"{i:012d}.jpg"
        (root / "images" / name).write_bytes(data)
        width, height = 500, 400
        images.append({"id": i + 1, "file_name": name, "width": width, "height": height})
        for _ in range(int(rng.integers(1, 5))):
            x, y = float(rng.uniform(0, width - 60)), float(rng.uniform(0, height - 60))
            w, h = float(rng.uniform(20, width - x)), float(rng.uniform(20, height - y))
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "iscrowd": 0,
                                "category_id": int(rng.integers(1, 11)), "bbox": [x, y, w, h], "area": w * h,
                                "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]]})
    categories = [{"id": c, "name": f"class{c}", "supercategory": "thing"} for c in range(1, 11)]
    (root / "instances.json").write_text(json.dumps({"images": images, "annotations": annotations,
                                                     "categories": categories}))


def write_arrays(root: Path, count: int, seed: int) -> None:
    """readers.numpy: `count` float32 arrays of 256x1024 (1 MiB each), numpy.save."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in tqdm(range(count), desc="writing arrays", unit="file", leave=False):
        np.save(root / f"arr_{i:05d}.npy", rng.standard_normal((256, 1024), dtype=np.float32))


def make_dataset(folder: Path, records: int, arrays: int, seed: int) -> Path:
    """Every format's files under `folder`, made once per set of arguments ('done' marks a complete set)."""
    if (folder / "done").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    jpegs = make_jpegs(records, seed)
    write_folder(folder / "file", jpegs)
    write_tfrecords(folder / "tfrecord", jpegs)
    write_webdataset(folder / "webdataset", jpegs)
    write_recordio(folder / "mxnet", jpegs)
    write_lmdb(folder / "caffe", jpegs)
    write_coco(folder / "coco", jpegs, seed)
    write_arrays(folder / "numpy", arrays, seed)
    (folder / "done").write_text(json.dumps({"records": records, "arrays": arrays,
                                             "jpeg_bytes": sum(map(len, jpegs))}))
    return folder


# ------------------------------------------------------------------------------------------------------ pipelines


def reader_outputs(fn, tfrecord, reader: str, data: Path, shuffle: bool = True) -> tuple:
    """The reader `reader` over its files in `data`, for headrace's or DALI's `fn` and `tfrecord` modules: its
    outputs, the encoded image first where it gives one."""
    if reader == "file":
        return tuple(fn.readers.file(file_root=str(data / "file"), random_shuffle=shuffle, name="Reader"))
    if reader == "tfrecord":
        root = data / "tfrecord"
        out = fn.readers.tfrecord(path=sorted(str(p) for p in root.glob("*.tfrecord")),
                                  index_path=sorted(str(p) for p in root.glob("*.idx")),
                                  features={"image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, ""),
                                            "image/class/label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)},
                                  random_shuffle=shuffle, name="Reader")
        return out["image/encoded"], out["image/class/label"]
    if reader == "webdataset":
        root = data / "webdataset"
        return tuple(fn.readers.webdataset(paths=sorted(str(p) for p in root.glob("*.tar")),
                                           index_paths=sorted(str(p) for p in root.glob("*.idx")),
                                           ext=["jpg", "cls"], random_shuffle=shuffle, name="Reader"))
    if reader == "mxnet":
        return tuple(fn.readers.mxnet(path=[str(data / "mxnet" / "train.rec")],
                                      index_path=[str(data / "mxnet" / "train.idx")], random_shuffle=shuffle,
                                      name="Reader"))
    if reader == "caffe":
        return tuple(fn.readers.caffe(path=str(data / "caffe"), random_shuffle=shuffle, name="Reader"))
    if reader == "numpy":
        return (fn.readers.numpy(file_root=str(data / "numpy"), file_filter="*.npy", random_shuffle=shuffle,
                                 name="Reader"),)
    if reader == "coco":
        return tuple(fn.readers.coco(file_root=str(data / "coco" / "images"),
                                     annotations_file=str(data / "coco" / "instances.json"), random_shuffle=shuffle,
                                     name="Reader"))
    raise ValueError(f"unknown reader {reader!r}")


def rn50_train(fn, types, jpegs, labels) -> tuple:
    """The ResNet-50 training preprocessing (headrace/demo.py, DALI's ResNet-50 example) on encoded images."""
    images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0],
                                           random_aspect_ratio=[0.75, 1.333])
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=MEAN, std=STD,
                                      mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


class PipelineRunner(Runner):
    """headrace or DALI, one case: a reader alone, or (case 'READER+rn50') the reader inside RN50 training."""

    def __init__(self, name: str, case: str, data: Path, batch_size: int, threads: int, seed: int):
        self.name = name
        if name == "headrace":
            from headrace import fn, pipeline_def, tfrecord, types
        else:
            import nvidia.dali.tfrecord as tfrecord
            from nvidia.dali import fn, pipeline_def, types
        reader, _, full = case.partition("+")

        @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, seed=seed)
        def pipe():
            outputs = reader_outputs(fn, tfrecord, reader, data)
            return rn50_train(fn, types, outputs[0], outputs[1]) if full else outputs

        self.pipe = pipe()
        self.pipe.build()
        self.batches = -(-self.pipe.epoch_size("Reader") // batch_size)

    def epoch(self) -> Iterator[int]:
        for _ in range(self.batches):
            outputs = self.pipe.run()
            yield len(outputs[0])

    def close(self) -> None:
        if hasattr(self.pipe, "close"):
            self.pipe.close()
        del self.pipe


# ------------------------------------------------------------------------------------------------------- CPU mode


def record_megabytes(case: str, data: Path, records: int) -> float:
    """Mean MB of file data per sample of `case` (the JPEG, or the .npy file)."""
    if case.startswith("numpy"):
        files = list((data / "numpy").glob("*.npy"))
        return sum(p.stat().st_size for p in files) / len(files) / 1e6
    return json.loads((data / "done").read_text())["jpeg_bytes"] / records / 1e6


def timed_stretch(runner: Runner, label: str, epochs: int, min_seconds: float, unit: str = "rec") -> tuple[int, float]:
    """(samples, seconds) of at least `epochs` whole epochs, and more whole epochs until `min_seconds` have passed
    (an epoch of a reader alone is a fraction of a second: too short to time alone)."""
    samples, seconds, epoch = 0, 0.0, 0
    while epoch < epochs or seconds < min_seconds:
        n, s = timed_epoch(runner, f"{label} epoch {epoch}", unit=unit)
        samples, seconds, epoch = samples + n, seconds + s, epoch + 1
    return samples, seconds


def main_cpu(args: argparse.Namespace, data: Path) -> None:
    """Every case, headrace and DALI, in alternating rounds; the table of medians, ratios and per-round figures."""
    import nvidia.dali

    import headrace

    load = os.getloadavg()
    print(f"data: {args.records} JPEG records (~{record_megabytes('file', data, args.records) * 1e3:.0f}"
          f" KB each), {args.arrays} arrays of 1 MiB, in {data}; batch {args.batch_size}, {args.threads} threads, "
          f"{os.cpu_count()} CPUs (load average {load[0]:.2f} at the start: other processes share the machine)")
    print(f"versions: headrace {getattr(headrace, '__version__', '?')}, DALI {nvidia.dali.__version__}; "
          f"{args.rounds} rounds of: per library {args.warmup_batches} warm-up batches, then at least "
          f"{args.reader_epochs} timed epoch(s) (reader alone) or {args.epochs} (+rn50), and whole epochs until "
          f"{args.min_seconds:g} s; all files in the page cache (the readers' CPU cost, not the disk's)")

    per_round: dict[tuple[str, str], list[float]] = {}
    failed: dict[tuple[str, str], str] = {}
    for case in args.only:
        runners: dict[str, Runner] = {}
        for name in LIBRARIES:
            try:
                runners[name] = PipelineRunner(name, case, data, args.batch_size, args.threads, args.seed)
            except Exception as exc:  # noqa: BLE001 - one failure should not cost the other figures
                failed[(case, name)] = f"build failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                traceback.print_exc()
        epochs = args.epochs if "+" in case else args.reader_epochs
        for round_ in range(args.rounds):
            order = list(LIBRARIES) if round_ % 2 == 0 else list(LIBRARIES)[::-1]
            for name in order:
                runner = runners.get(name)
                if runner is None:
                    continue
                try:
                    timed_epoch(runner, f"{case} round {round_} {name} warm-up", args.warmup_batches)
                    samples, seconds = timed_stretch(runner, f"{case} round {round_} {name}", epochs,
                                                     args.min_seconds)
                except Exception as exc:  # noqa: BLE001
                    failed[(case, name)] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                    traceback.print_exc()
                    runners.pop(name).close()
                    continue
                per_round.setdefault((case, name), []).append(samples / seconds)
                print(f"{case:16s} round {round_}: {name:9s} {samples / seconds:8.1f} samples/s ({samples} samples, "
                      f"{seconds:.2f} s)")
        for runner in runners.values():
            runner.close()

    print(f"\nsamples/s, median of {args.rounds} alternating rounds (batch {args.batch_size}, {args.threads} threads, "
          f"{os.cpu_count()} CPUs; load average now {os.getloadavg()[0]:.2f})")
    print(f"{'case':16s} {'headrace':>9s} {'DALI':>9s} {'ratio':>6s} {'per-round ratios':>17s}  {'MB/s hr':>8s} "
          f"{'MB/s DALI':>9s}  per round (headrace | DALI)")
    for case in args.only:
        ours, theirs = per_round.get((case, "headrace")), per_round.get((case, "dali"))
        if not ours or not theirs:
            why = "; ".join(f"{name}: {failed[(case, name)]}" for name in LIBRARIES if (case, name) in failed)
            print(f"{case:16s} not compared ({why or 'no rounds'})")
            continue
        mb = record_megabytes(case, data, args.records)
        a, b = statistics.median(ours), statistics.median(theirs)
        ratios = [x / y for x, y in zip(ours, theirs, strict=False)]
        print(f"{case:16s} {a:9.1f} {b:9.1f} {a / b:5.2f}x {min(ratios):7.2f}-{max(ratios):.2f}     "
              f"{a * mb:8.1f} {b * mb:9.1f}  " + " ".join(f"{r:.0f}" for r in ours) + " | "
              + " ".join(f"{r:.0f}" for r in theirs))
    print("(ratio: headrace's median / DALI's; per-round ratios: each round's headrace / DALI; MB/s: record bytes "
          "read, the JPEG or the .npy file)")


# ------------------------------------------------------------------------------------------------------- GPU mode


def gpu_name() -> str:
    try:
        from headrace_kernels.gpu.runtime import cupy

        cp = cupy()
        return cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as exc:  # noqa: BLE001
        return f"? ({type(exc).__name__})"


class NumpyGpuRunner(Runner):
    """readers.numpy(device='gpu') in headrace's (or DALI's GPU build's) pipeline on GPU 0."""

    def __init__(self, name: str, data: Path, batch_size: int, threads: int, seed: int):
        self.name = name
        if name == "headrace":
            from headrace import fn, pipeline_def
        else:
            from nvidia.dali import fn, pipeline_def

        @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=0, seed=seed)
        def pipe():
            return fn.readers.numpy(device="gpu", file_root=str(data / "numpy"), file_filter="*.npy",
                                    random_shuffle=True, name="Reader")

        self.pipe = pipe()
        self.pipe.build()
        self.batches = -(-self.pipe.epoch_size("Reader") // batch_size)
        self.sync = _device_synchronize

    def epoch(self) -> Iterator[int]:
        for _ in range(self.batches):
            (arrays,) = self.pipe.run()
            self.sync()  # the batch counts once it is in GPU memory
            yield len(arrays)

    def close(self) -> None:
        if hasattr(self.pipe, "close"):
            self.pipe.close()
        del self.pipe


def _device_synchronize() -> None:
    from headrace_kernels.gpu.runtime import cupy

    cupy().cuda.runtime.deviceSynchronize()


class PlainGpuRunner(Runner):
    """A loop over the files in batches, `threads` threads: 'numpy+upload' (numpy.load, then cupy.asarray) or
    'kvikio' (the whole file read into a CuPy buffer with kvikio.CuFile.pread, header included)."""

    def __init__(self, name: str, data: Path, batch_size: int, threads: int, seed: int):
        from concurrent.futures import ThreadPoolExecutor

        from headrace_kernels.gpu.runtime import cupy

        self.name, self.cp = name, cupy()
        self.files = sorted(str(p) for p in (data / "numpy").glob("*.npy"))
        self.rng = np.random.default_rng(seed)
        self.batch_size = batch_size
        self.pool = ThreadPoolExecutor(threads)
        if name == "kvikio":
            import kvikio

            self.kvikio = kvikio
        self.read: Callable[[str], object] = self.read_kvikio if name == "kvikio" else self.read_numpy

    def read_numpy(self, path: str):
        array = self.cp.asarray(np.load(path))
        self.cp.cuda.get_current_stream().synchronize()
        return array

    def read_kvikio(self, path: str):
        size = os.path.getsize(path)
        buffer = self.cp.empty(size, dtype=self.cp.uint8)
        with self.kvikio.CuFile(path, "r") as handle:
            got = handle.pread(buffer, size, 0).get()
        if got != size:
            raise OSError(f"kvikio read {got} of {size} bytes of {path}")
        return buffer

    def epoch(self) -> Iterator[int]:
        order = self.rng.permutation(len(self.files))
        for start in range(0, len(order), self.batch_size):
            batch = list(self.pool.map(self.read, [self.files[i] for i in order[start:start + self.batch_size]]))
            _device_synchronize()
            yield len(batch)

    def close(self) -> None:
        self.pool.shutdown()


def kvikio_mode() -> str:
    """'compat' or 'gds': how kvikio reads here (its defaults say)."""
    try:
        import kvikio
    except ImportError as exc:
        return f"kvikio not installed ({exc})"
    defaults = getattr(kvikio, "defaults", None)
    probe = getattr(defaults, "is_compat_mode_preferred", None) or getattr(defaults, "compat_mode", None)
    try:
        return "compat" if (probe() if callable(probe) else True) else "gds"
    except Exception as exc:  # noqa: BLE001
        return f"? ({type(exc).__name__})"


def main_gpu(args: argparse.Namespace, data: Path) -> None:
    """--device gpu: readers.numpy(device='gpu') GB/s against numpy.load + upload and kvikio alone, alternating."""
    files = list((data / "numpy").glob("*.npy"))
    file_gb = sum(p.stat().st_size for p in files) / len(files) / 1e9
    print(f"GPU mode, GPU 0: {gpu_name()}; {len(files)} .npy files of {file_gb * 1e3:.2f} MB in {data / 'numpy'} "
          f"(in the page cache after the first round); batch {args.batch_size}, {args.threads} threads; kvikio mode: "
          f"{kvikio_mode()}")
    makers: dict[str, Callable[[], Runner]] = {
        "headrace": lambda: NumpyGpuRunner("headrace", data, args.batch_size, args.threads, args.seed),
        "dali": lambda: NumpyGpuRunner("dali", data, args.batch_size, args.threads, args.seed),
        "numpy+upload": lambda: PlainGpuRunner("numpy+upload", data, args.batch_size, args.threads, args.seed),
        "kvikio": lambda: PlainGpuRunner("kvikio", data, args.batch_size, args.threads, args.seed),
    }
    runners: dict[str, Runner] = {}
    for name, make in makers.items():
        try:
            runners[name] = make()
        except Exception as exc:  # noqa: BLE001 - DALI's CPU build has no GPU reader; kvikio may be missing
            print(f"{name}: left out ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})")
    if not runners:
        print("nothing to time here: no GPU reader could be built (see above)")
        return
    per_round: dict[str, list[float]] = {name: [] for name in runners}
    order = list(runners)
    for round_ in range(args.rounds):
        for name in list(order if round_ % 2 == 0 else order[::-1]):
            runner = runners[name]
            try:
                timed_epoch(runner, f"round {round_} {name} warm-up", args.warmup_batches, unit="file")
                samples, seconds = timed_stretch(runner, f"round {round_} {name}", args.reader_epochs,
                                                 args.min_seconds, "file")
            except Exception as exc:  # noqa: BLE001 - DALI's GDS reads fail where cuFile is not set up
                print(f"{name}: left out, its reads failed ({type(exc).__name__}: "
                      f"{[line for line in str(exc).splitlines() if line.strip()][-3:]})")
                order.remove(name)
                del per_round[name]
                runners.pop(name).close()
                continue
            per_round[name].append(samples * file_gb / seconds)
            print(f"round {round_}: {name:13s} {per_round[name][-1]:7.2f} GB/s ({samples} files, {seconds:.2f} s)")
    for runner in runners.values():
        runner.close()
    print(f"\nGB/s into GPU memory, median of {args.rounds} alternating rounds")
    for name, rates in per_round.items():
        extra = ""
        if name != "headrace" and per_round.get("headrace"):
            extra = f"  (headrace / {name}: {statistics.median(per_round['headrace']) / statistics.median(rates):.2f}x)"
        print(f"  {name:13s} {statistics.median(rates):7.2f} GB/s  per round: "
              + " ".join(f"{r:.2f}" for r in rates) + extra)
    try:
        from headrace_kernels.gpu import numpy_read

        if numpy_read.last_mode is not None:
            print(f"  headrace's reads ran in kvikio's {numpy_read.last_mode} mode")
    except ImportError:
        pass


# ----------------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=400, help="JPEG records to generate (~110 KB each)")
    parser.add_argument("--arrays", type=int, default=320, help=".npy arrays to generate (1 MiB each)")
    parser.add_argument("--workdir", type=Path, default=Path("build/bench"), help="where generated data goes")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup-batches", type=int, default=3,
                        help="untimed batches before each timed stretch: more than a pipeline prepares ahead")
    parser.add_argument("--reader-epochs", type=int, default=4, help="timed epochs per round, reader alone")
    parser.add_argument("--epochs", type=int, default=1, help="timed epochs per round, +rn50")
    parser.add_argument("--min-seconds", type=float, default=2.0,
                        help="each timed stretch runs whole epochs until this long (quick: 1)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds; the order alternates (A B, B A, ...)")
    parser.add_argument("--only", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: readers.numpy(device='gpu') against numpy.load + upload and kvikio, GB/s")
    parser.add_argument("--quick", action="store_true",
                        help="192 records, 96 arrays, 3 rounds, 2 timed epochs of a reader alone, 1 s stretches")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.arrays, args.rounds, args.reader_epochs, args.min_seconds = 192, 96, 3, 2, 1.0
    folder = args.workdir / f"readers_{args.records}_{args.arrays}_{args.seed}"
    start = time.perf_counter()
    data = make_dataset(folder, args.records, args.arrays, args.seed)
    if time.perf_counter() - start > 1:
        print(f"data written in {time.perf_counter() - start:.1f} s")
    (main_gpu if args.device == "gpu" else main_cpu)(args, data)


if __name__ == "__main__":
    main()
