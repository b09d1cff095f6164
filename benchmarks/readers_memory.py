"""The readers' host memory while they read a data set many batches large (issue 19, "Host memory bounded"): each
headrace reader, and DALI's CPU build reading the same files, reads two whole epochs in a fresh process whose
/proc/<pid>/status is sampled after every batch.

Every format's files are written once per set of arguments into a temporary folder (kept for later runs), with the
ecosystem's writers, as the readers' tests write them: a folder per class of files (readers.file; readers.coco links
the same files and adds an instances JSON), two TFRecord files of tf.train.Examples indexed by `headrace
tfrecord2idx`, two webdataset tar shards (tarfile) indexed by `headrace wds2idx`, a RecordIO .rec + .idx, LMDBs of
Caffe Datums and of Caffe2 TensorProtos (lmdb + protobuf) and float32 .npy files (numpy.save). The records are
random bytes of ~`--record-kb` KB: the readers do not decode, so what they hold is what counts.

What the figures mean. RssAnon is the process's own (heap) memory: what a reader that kept its records, an index of
its data or a cache would grow. RssFile is file pages mapped into the process: a reader that mmaps its files (DALI's
readers by default, `dont_use_mmap=False`; headrace's LMDB readers through liblmdb) sees the pages it touched there,
up to the whole file while it stays mapped; those pages are the page cache's, shared and dropped under memory
pressure without swapping. A reader that read()s its files copies them into anonymous memory it frees after the
batch; the page cache then holds the file, outside the process. A streaming reader's RssAnon stays flat from epoch 1
to epoch 2 and does not follow the data set's size.

    python benchmarks/readers_memory.py                     # 1.5 GB per format, batch 32, random_shuffle
    python benchmarks/readers_memory.py --quick             # 120 MB per format
    python benchmarks/readers_memory.py --size-gb 4 --only tfrecord caffe --libraries headrace
    python benchmarks/readers_memory.py --no-shuffle        # DALI's shuffle buffer (initial_fill) left out
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

FORMATS = ("file", "tfrecord", "webdataset", "numpy", "mxnet", "caffe", "caffe2", "coco")
LIBRARIES = ("headrace", "dali")
MMAPS = {"headrace": {"caffe", "caffe2", "tfrecord", "webdataset", "mxnet"}, "dali": set(FORMATS)}
"""Which readers map their files (RssFile grows with what they touched): headrace's LMDB readers (liblmdb maps the
database) and its record readers (TFRecord, tar shards, RecordIO: views of a mapping, not copies), and DALI's
readers with their default dont_use_mmap=False (its LMDB readers through liblmdb)."""
STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")
CLASSES = 10
MB = 1 << 20


# ----------------------------------------------------------------------------------------------------------- memory


def memory_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS), RssAnon, RssFile and RssShmem of a process, in bytes, from /proc/<pid>/status."""
    out = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in STATUS_FIELDS:
                out[name] = int(value.split()[0]) * 1024
    return out


# ------------------------------------------------------------------------------------------------------------- data


def payloads(total_bytes: int, record_bytes: int, seed: int) -> Iterator[bytes]:
    """Random records of 0.5 to 1.5 times `record_bytes`, `total_bytes` of them in all (at least 4 records)."""
    rng = np.random.default_rng(seed)
    written, count = 0, 0
    while written < total_bytes or count < 4:
        data = rng.bytes(int(record_bytes * rng.uniform(0.5, 1.5)))
        written, count = written + len(data), count + 1
        yield data


def _index(tool: str, *paths: Path) -> None:
    """`headrace tfrecord2idx` / `headrace wds2idx`, as a user indexes the files (their report left out)."""
    import contextlib

    from headrace.cli import main as cli_main

    with contextlib.redirect_stdout(io.StringIO()):
        status = cli_main([tool, *map(str, paths)])
    if status != 0:
        raise RuntimeError(f"headrace {tool} failed on {paths[0]}")


def write_file(root: Path, records: Iterator[bytes]) -> None:
    """readers.file: one folder per class (readers_cpu.py's layout)."""
    from readers_cpu import write_folder

    write_folder(root, records)


def write_tfrecord(root: Path, records: Iterator[bytes], files: int = 2) -> None:
    """readers.tfrecord: tf.train.Examples ('image/encoded', 'image/class/label'), records dealt over `files` files,
    each indexed by `headrace tfrecord2idx`."""
    from headrace import tfrecord

    example_cls = tfrecord.example_class()
    root.mkdir(parents=True, exist_ok=True)
    paths = [root / f"train-{k:05d}.tfrecord" for k in range(files)]
    outs = [open(p, "wb") for p in paths]
    try:
        for i, data in enumerate(records):
            example = example_cls()
            example.features.feature["image/encoded"].bytes_list.value.append(data)
            example.features.feature["image/class/label"].int64_list.value.append(i % CLASSES)
            outs[i % files].write(tfrecord.encode_record(example.SerializeToString()))
    finally:
        for out in outs:
            out.close()
    for k, path in enumerate(paths):
        _index("tfrecord2idx", path, root / f"train-{k:05d}.idx")


def write_webdataset(root: Path, records: Iterator[bytes], shards: int = 2) -> None:
    """readers.webdataset: tar shards of 'NNNNNNN.jpg' + 'NNNNNNN.cls', indexed by `headrace wds2idx`."""
    root.mkdir(parents=True, exist_ok=True)
    paths = [root / f"shard-{k:05d}.tar" for k in range(shards)]
    archives = [tarfile.open(p, "w", format=tarfile.GNU_FORMAT) for p in paths]
    try:
        for i, data in enumerate(records):
            for name, blob in ((f"{i:07d}.jpg", data), (f"{i:07d}.cls", str(i % CLASSES).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                archives[i % shards].addfile(info, io.BytesIO(blob))
    finally:
        for archive in archives:
            archive.close()
    for path in paths:
        _index("wds2idx", path)


def write_mxnet(root: Path, records: Iterator[bytes]) -> None:
    """readers.mxnet: one .rec of MXNet image records (IRHeader, one float label) and its .idx, as im2rec writes."""
    import struct

    from readers_cpu import encode_recordio

    root.mkdir(parents=True, exist_ok=True)
    offset = 0
    with open(root / "train.rec", "wb") as rec, open(root / "train.idx", "w") as idx:
        for i, data in enumerate(records):
            record = encode_recordio(struct.pack("<IfQQ", 0, float(i % CLASSES), i, 0) + data)
            idx.write(f"{i}\t{offset}\n")
            rec.write(record)
            offset += len(record)


def _write_lmdb(root: Path, values: Iterator[bytes], total_bytes: int) -> None:
    import lmdb

    env = lmdb.open(str(root), map_size=2 * total_bytes + (64 << 20))
    txn = env.begin(write=True)
    for i, value in enumerate(values):
        txn.put(f"{i:08d}".encode(), value)
        if i % 256 == 255:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()


def write_caffe(root: Path, records: Iterator[bytes], total_bytes: int) -> None:
    """readers.caffe: an LMDB of encoded Caffe Datums (as Caffe's convert_imageset writes)."""
    from headrace.readers.lmdb_records import messages

    datum = messages()["Datum"]
    _write_lmdb(root, (datum(data=d, label=i % CLASSES, encoded=True).SerializeToString()
                       for i, d in enumerate(records)), total_bytes)


def write_caffe2(root: Path, records: Iterator[bytes], total_bytes: int) -> None:
    """readers.caffe2: an LMDB of Caffe2 TensorProtos (the image as a STRING tensor, an INT32 label)."""
    from headrace.readers.lmdb_records import messages

    proto, protos = messages()["TensorProto"], messages()["TensorProtos"]
    _write_lmdb(root, (protos(protos=[proto(data_type=4, string_data=[d]), proto(data_type=2, int32_data=[i % 10])])
                       .SerializeToString() for i, d in enumerate(records)), total_bytes)


def write_coco(root: Path, images: Path, seed: int) -> None:
    """readers.coco: the images of `images` (hard links, else copies) and an instances JSON of 1 to 4 boxes each."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    entries, annotations = [], []
    for i, source in enumerate(sorted(images.rglob("*.jpg"))):
        name = f"{i:012d}.jpg"
        try:
            os.link(source, root / "images" / name)
        except OSError:
            (root / "images" / name).write_bytes(source.read_bytes())
        entries.append({"id": i + 1, "file_name": name, "width": 500, "height": 400})
        for _ in range(int(rng.integers(1, 5))):
            x, y = float(rng.uniform(0, 440)), float(rng.uniform(0, 340))
            w, h = float(rng.uniform(20, 500 - x)), float(rng.uniform(20, 400 - y))
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "iscrowd": 0, "area": w * h,
                                "category_id": int(rng.integers(1, 11)), "bbox": [x, y, w, h]})
    categories = [{"id": c, "name": f"class{c}", "supercategory": "thing"} for c in range(1, 11)]
    (root / "instances.json").write_text(json.dumps({"images": entries, "annotations": annotations,
                                                     "categories": categories}))


def write_numpy(root: Path, total_bytes: int, array_bytes: int, seed: int) -> None:
    """readers.numpy: float32 arrays of (rows, 256), ~`array_bytes` each (numpy.save)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    rows = max(1, array_bytes // 1024)
    for i in range(max(4, -(-total_bytes // (rows * 1024)))):
        np.save(root / f"arr_{i:06d}.npy", rng.standard_normal((rows, 256), dtype=np.float32))


def folder_bytes(root: Path) -> int:
    """The bytes of the regular files under `root` (links counted once per name: coco's images are readers.file's)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def make_dataset(root: Path, fmt: str, total_bytes: int, record_bytes: int, seed: int = 1) -> Path:
    """The files of format `fmt` under root/fmt, written once ('done' marks a complete set); returns that folder."""
    folder = root / fmt
    if (folder / "done").is_file():
        return folder
    records = payloads(total_bytes, record_bytes, seed)
    if fmt == "coco":
        write_coco(folder, make_dataset(root, "file", total_bytes, record_bytes, seed), seed)
    elif fmt == "numpy":
        write_numpy(folder, total_bytes, record_bytes, seed)
    elif fmt in ("caffe", "caffe2"):
        (write_caffe if fmt == "caffe" else write_caffe2)(folder, records, total_bytes)
    else:
        {"file": write_file, "tfrecord": write_tfrecord, "webdataset": write_webdataset,
         "mxnet": write_mxnet}[fmt](folder, records)
    (folder / "done").write_text(str(folder_bytes(folder)))
    return folder


def dataset_bytes(folder: Path) -> int:
    """The data set's size on disk, as make_dataset measured it."""
    return int((folder / "done").read_text())


# -------------------------------------------------------------------------------------------------------- pipelines


def reader_outputs(fn: Any, tfrecord: Any, fmt: str, data: Path, shuffle: bool) -> tuple:
    """The reader of format `fmt` over its files in `data`, for headrace's or DALI's `fn` and `tfrecord` modules."""
    common = {"random_shuffle": shuffle, "name": "Reader"}
    if fmt == "file":
        return tuple(fn.readers.file(file_root=str(data), **common))
    if fmt == "tfrecord":
        out = fn.readers.tfrecord(path=sorted(str(p) for p in data.glob("*.tfrecord")),
                                  index_path=sorted(str(p) for p in data.glob("*.idx")),
                                  features={"image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, ""),
                                            "image/class/label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)},
                                  **common)
        return out["image/encoded"], out["image/class/label"]
    if fmt == "webdataset":
        return tuple(fn.readers.webdataset(paths=sorted(str(p) for p in data.glob("*.tar")),
                                           index_paths=sorted(str(p) for p in data.glob("*.idx")),
                                           ext=["jpg", "cls"], **common))
    if fmt == "mxnet":
        return tuple(fn.readers.mxnet(path=[str(data / "train.rec")], index_path=[str(data / "train.idx")], **common))
    if fmt in ("caffe", "caffe2"):
        return tuple(getattr(fn.readers, fmt)(path=str(data), **common))
    if fmt == "numpy":
        return (fn.readers.numpy(file_root=str(data), file_filter="*.npy", **common),)
    if fmt == "coco":
        return tuple(fn.readers.coco(file_root=str(data / "images"), annotations_file=str(data / "instances.json"),
                                     **common))
    raise ValueError(f"unknown format {fmt!r}")


def build(library: str, fmt: str, data: Path, batch_size: int, threads: int, shuffle: bool) -> Any:
    """A built CPU pipeline (device_id None) of the reader alone, with headrace or DALI."""
    if library == "headrace":
        from headrace import fn, pipeline_def, tfrecord
    else:
        import nvidia.dali.tfrecord as tfrecord
        from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, seed=7)
    def pipe():
        return reader_outputs(fn, tfrecord, fmt, data, shuffle)

    built = pipe()
    built.build()
    return built


def emit(record: dict) -> None:
    """One JSON line to the parent process, at once (it draws the progress bar from them)."""
    print(json.dumps(record), flush=True)


def child(library: str, fmt: str, folders: list[Path], batch_size: int, threads: int, epochs: int,
          shuffle: bool, keep: bool = False) -> None:
    """In a fresh process: per folder in turn, read `epochs` whole epochs, sampling /proc/self/status after every
    batch; JSON lines on stdout: 'start' (the batches to come), 'batch' (every 16th), and 'done' with the figures.
    `keep` copies and keeps every sample read: the control, a "reader" that does not stream."""
    kept: list[np.ndarray] = []
    for folder in folders:
        pipe = build(library, fmt, folder, batch_size, threads, shuffle)
        batches = -(-pipe.epoch_size("Reader") // batch_size)
        built = memory_status()
        emit({"event": "start", "folder": str(folder), "batches": batches * epochs})
        peak: dict[str, int] = {}
        ends, first = [], None
        for epoch in range(epochs):
            for k in range(batches):
                outputs = pipe.run()
                if keep:
                    kept += [np.array(sample) for sample in outputs[0]]
                del outputs
                now = memory_status()
                for name, value in now.items():
                    peak[name] = max(peak.get(name, 0), value)
                if first is None:
                    first = now
                if k % 16 == 15:
                    emit({"event": "batch", "done": epoch * batches + k + 1})
            ends.append(memory_status())
        if hasattr(pipe, "close"):
            pipe.close()
        del pipe
        emit({"event": "done", "folder": str(folder), "built": built, "first": first, "epochs": ends, "peak": peak,
              "batches": batches * epochs})


def measure(library: str, fmt: str, folders: list[Path], batch_size: int = 32, threads: int = 2, epochs: int = 2,
            shuffle: bool = True, progress: bool = True, keep: bool = False) -> list[dict]:
    """Run `child` in a fresh Python process; its 'done' records, one per folder (RuntimeError with its stderr if it
    fails)."""
    command = [sys.executable, __file__, "--child", library, fmt, "--batch-size", str(batch_size), "--threads",
               str(threads), "--epochs", str(epochs), *(["--no-shuffle"] if not shuffle else []),
               *(["--keep"] if keep else []),
               "--folders", *map(str, folders)]
    results: list[dict] = []
    bar = None
    with tempfile.TemporaryFile("w+") as stderr, \
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True) as process:
        for line in process.stdout:
            record = json.loads(line)
            if record["event"] == "done":
                results.append(record)
            if progress:
                from tqdm import tqdm

                if record["event"] == "start":
                    bar = tqdm(total=record["batches"], desc=f"{fmt} {library}", unit="batch", leave=False)
                elif record["event"] == "batch" and bar is not None:
                    bar.update(record["done"] - bar.n)
                elif record["event"] == "done" and bar is not None:
                    bar.close()
        process.wait()
        stderr.seek(0)
        errors = stderr.read()
    if process.returncode != 0:
        raise RuntimeError(f"{library} {fmt}: the reading process failed ({process.returncode}):\n{errors[-3000:]}")
    return results


# ------------------------------------------------------------------------------------------------------------ main


def row(fmt: str, library: str, size: int, result: dict | str) -> str:
    """One line of the table (MB)."""
    head = f"{fmt:10s} {library:8s} {size / MB:8.0f}"
    if isinstance(result, str):
        return f"{head}  {result}"
    peak, ends = result["peak"], result["epochs"]
    growth = ends[-1]["RssAnon"] - ends[0]["RssAnon"]
    return (f"{head} {peak['VmHWM'] / MB:8.0f} {ends[0]['VmRSS'] / MB:8.0f} {ends[-1]['VmRSS'] / MB:8.0f}  "
            f"{result['first']['RssAnon'] / MB:8.0f} {ends[0]['RssAnon'] / MB:8.0f} {ends[-1]['RssAnon'] / MB:8.0f} "
            f"{peak['RssAnon'] / MB:8.0f} {growth / MB:+7.1f}  {result['first']['RssFile'] / MB:7.0f} "
            f"{ends[-1]['RssFile'] / MB:8.0f} "
            f"{peak['RssFile'] / MB:8.0f}  {'yes' if fmt in MMAPS[library] else 'no':4s}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=1.5, help="data set size per format (GB; default 1.5)")
    parser.add_argument("--quick", action="store_true", help="a small run: 120 MB per format")
    parser.add_argument("--record-kb", type=int, default=256, help="mean record size (KB; default 256)")
    parser.add_argument("--only", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--libraries", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--no-shuffle", action="store_true", help="random_shuffle=False (no DALI shuffle buffer)")
    parser.add_argument("--data", type=Path, default=None, help="where the files are kept (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep every sample read (the control: no streaming)")
    parser.add_argument("--child", nargs=2, metavar=("LIBRARY", "FORMAT"), help=argparse.SUPPRESS)
    parser.add_argument("--folders", nargs="+", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.folders, args.batch_size, args.threads, args.epochs, not args.no_shuffle, args.keep)
        return

    from tqdm import tqdm

    size = int((0.12 if args.quick else args.size_gb) * 1e9)
    record = args.record_kb * 1024
    root = args.data or Path(tempfile.gettempdir()) / f"headrace-readers-memory-{size // 10**6}mb-{args.record_kb}kb"
    folders = {}
    for fmt in tqdm(args.only, desc="writing data sets", unit="format"):
        folders[fmt] = make_dataset(root, fmt, size, record)
    print(f"data: {size / 1e9:.2f} GB per format (records ~{args.record_kb} KB, random bytes) in {root}; batch "
          f"{args.batch_size}, {args.threads} threads, {args.epochs} epochs, random_shuffle={not args.no_shuffle}; "
          f"{os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM")
    lines = []
    for fmt in args.only:
        for library in args.libraries:
            try:
                result: dict | str = measure(library, fmt, [folders[fmt]], args.batch_size, args.threads,
                                             args.epochs, not args.no_shuffle, keep=args.keep)[0]
            except Exception as exc:  # noqa: BLE001 - one failure should not cost the other figures
                result = f"failed: {str(exc).strip().splitlines()[-1][:150]}"
            lines.append(row(fmt, library, dataset_bytes(folders[fmt]), result))
            tqdm.write(lines[-1])
    print("\nMB (2**20 bytes); peak RSS is VmHWM; anon = RssAnon (the process's own memory), file = RssFile (mapped "
          "file pages, the page cache's)")
    print(f"{'reader':10s} {'library':8s} {'data':>8s} {'peak RSS':>8s} {'RSS ep1':>8s} {'RSS ep2':>8s}  "
          f"{'anon b1':>8s} {'anon ep1':>8s} {'anon ep2':>8s} {'anonpeak':>8s} {'ep2-ep1':>7s}  {'file b1':>7s} "
          f"{'file ep2':>8s} "
          f"{'filepeak':>8s}  mmap")
    print("\n".join(lines))
    print("(b1: after the first batch (RssFile then is mostly the mapped libraries); ep1/ep2: after each epoch; "
          "ep2-ep1: RssAnon growth over the second epoch, ~0 for a reader that streams; mmap: the reader maps its "
          "files, so what it touched counts in RssFile)")


if __name__ == "__main__":
    main()
