"""readers.file without shuffling: the order, the labels and reader_meta, against the folder itself and DALI."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from oprun import needs_dali

from headrace import fn, pipeline_def


def expected_files(root: Path) -> list[tuple[Path, int]]:
    """DALI's listing: class folders sorted, label = folder index, files sorted within a folder."""
    classes = sorted(d for d in os.listdir(root) if (root / d).is_dir())
    return [(root / c / f, label) for label, c in enumerate(classes) for f in sorted(os.listdir(root / c))]


def read_headrace(batch_size: int, batches: int, **reader_args):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=1)
    def pipe():
        return fn.readers.file(name="Reader", **reader_args)

    p = pipe()
    out = []
    for _ in range(batches):
        data, labels = p.run()
        out += [(bytes(np.asarray(data.at(i))), int(labels.at(i)[0])) for i in range(len(data))]
    meta = p.reader_meta("Reader")
    p.close()
    return out, meta


def test_order_and_labels_follow_the_sorted_folders(image_folder):
    files = expected_files(image_folder)
    got, meta = read_headrace(8, 10, file_root=str(image_folder))  # 80 samples: two epochs and a bit
    want = [(p.read_bytes(), label) for p, label in files]
    assert got == (want * 3)[:80]
    assert meta["epoch_size"] == len(files) == 37


def test_file_list_and_files(image_folder, tmp_path):
    files = expected_files(image_folder)[:5]
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{p.relative_to(image_folder)} {7 - i}\n" for i, (p, _) in enumerate(files)))
    got, _ = read_headrace(5, 1, file_root=str(image_folder), file_list=str(listing))
    assert got == [(p.read_bytes(), 7 - i) for i, (p, _) in enumerate(files)]
    got, _ = read_headrace(5, 1, files=[str(p) for p, _ in files], labels=[3, 1, 4, 1, 5])
    assert got == [(p.read_bytes(), label) for (p, _), label in zip(files, [3, 1, 4, 1, 5], strict=True)]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("batch_size", [8, 37])
def test_order_matches_dali(image_folder, batch_size):
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    @dali_pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=1)
    def dali_pipe():
        return tuple(dfn.readers.file(file_root=str(image_folder), name="Reader"))

    p = dali_pipe()
    p.build()
    dali = []
    for _ in range(3):
        data, labels = p.run()
        dali += [(bytes(np.asarray(data.at(i))), int(np.asarray(labels.at(i)).ravel()[0])) for i in range(len(data))]
    ours, meta = read_headrace(batch_size, 3, file_root=str(image_folder))
    assert ours == dali
    dali_meta = p.reader_meta("Reader")
    for key in ("epoch_size", "epoch_size_padded", "number_of_shards", "shard_id", "pad_last_batch",
                "stick_to_shard"):
        assert meta[key] == dali_meta[key], key
    assert p.epoch_size("Reader") == meta["epoch_size"]


@pytest.mark.dali
@needs_dali
@pytest.mark.parametrize("shards", [dict(num_shards=3, shard_id=1), dict(num_shards=2, shard_id=1, stick_to_shard=True),
                                    dict(num_shards=3, shard_id=2, pad_last_batch=True)])
def test_sharded_order_matches_dali(image_folder, shards):
    """Sharded reading (no shuffle) gives DALI's samples in DALI's order, epoch after epoch."""
    from nvidia.dali import fn as dfn
    from nvidia.dali import pipeline_def as dali_pipeline_def

    @dali_pipeline_def(batch_size=5, num_threads=1, device_id=None, seed=1)
    def dali_pipe():
        return tuple(dfn.readers.file(file_root=str(image_folder), name="Reader", **shards))

    p = dali_pipe()
    p.build()
    dali = []
    for _ in range(8):
        data, labels = p.run()
        dali += [(bytes(np.asarray(data.at(i))), int(np.asarray(labels.at(i)).ravel()[0])) for i in range(len(data))]
    ours, meta = read_headrace(5, 8, file_root=str(image_folder), **shards)
    assert ours == dali
    dali_meta = p.reader_meta("Reader")
    for key in ("epoch_size", "number_of_shards", "shard_id", "pad_last_batch", "stick_to_shard"):
        assert meta[key] == dali_meta[key], key


@pytest.mark.parametrize("how", ["read", "map"])
def test_batch_reads_equal_file_reads_and_report_errors_per_file(tmp_path, how):
    """headrace_kernels.batch_read (libc through numba, GIL released per batch) returns each file's bytes exactly,
    copied or mapped, empty files too, and hands a missing file to the per-file reader, whose error names it."""
    from headrace_kernels.batch_read import BatchFileReader

    if not BatchFileReader.available():
        pytest.skip("batch reads need Linux")
    rng = np.random.default_rng(0)
    paths = []
    for i, size in enumerate([0, 1, 4096, 100_003, 7]):
        path = tmp_path / f"f{i}.bin"
        path.write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        paths.append(str(path))
    paths.append(str(tmp_path / "missing.bin"))
    reader = BatchFileReader(paths)

    def fallback(index):
        if not os.path.exists(paths[index]):
            raise OSError(f"cannot read '{paths[index]}'")
        return np.fromfile(paths[index], np.uint8)

    batch = getattr(reader, how)
    order = [3, 0, 4, 1, 2, 3]
    for index, data in zip(order, batch(order, fallback), strict=True):
        assert data.dtype == np.uint8 and data.tobytes() == open(paths[index], "rb").read()
        if how == "map" and data.size:
            assert not data.flags.writeable  # a view of the read-only mapping (an empty file: the fallback's)
    with pytest.raises(OSError, match="missing.bin"):
        batch([1, 5], fallback)


@pytest.mark.parametrize("dont_use_mmap", [False, True])
def test_file_samples_are_the_files_bytes_mapped_or_copied(tmp_path, dont_use_mmap):
    """By default a batch's files are mapped into memory and its samples are views of them (DALI's default);
    dont_use_mmap reads copies. Either way a sample holds its file's bytes, an empty file gives an empty sample, and
    the files may go meanwhile."""
    contents = {"a.bin": os.urandom(70_000), "b.bin": b"", "c.bin": os.urandom(5)}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)

    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=1)
    def pipe():
        data, _ = fn.readers.file(files=[str(tmp_path / n) for n in contents], dont_use_mmap=dont_use_mmap)
        return data

    p = pipe()
    (batch,) = p.run()
    for name in contents:
        (tmp_path / name).unlink()  # a mapping keeps the unlinked file's pages
    samples = [np.asarray(batch.at(i)) for i in range(3)]
    assert [bytes(s) for s in samples] == list(contents.values())
    assert samples[0].flags.writeable == dont_use_mmap  # a copy, or a view of the read-only mapping
    p.close()


def test_readers_that_feed_the_gpu_stage_are_found(tmp_path):
    """The executor tells a reader whose samples a GPU-stage op reads (a mixed decoder) to copy its files instead of
    mapping them: gpu_fed_nodes names it, not a reader whose samples a CPU decoder reads before `.gpu()`."""
    from headrace.engine.gpu_stage import gpu_fed_nodes, gpu_stage_nodes
    from headrace.pipeline import Pipeline

    p = Pipeline(batch_size=2, num_threads=1, device_id=0)
    with p:
        mixed_data, _ = fn.readers.file(file_root=str(tmp_path), name="Mixed")
        cpu_data, labels = fn.readers.file(file_root=str(tmp_path), name="Cpu")
        p.set_outputs(fn.decoders.image(mixed_data, device="mixed"), fn.decoders.image(cpu_data).gpu(), labels)
    nodes = p.graph.nodes
    fed = gpu_fed_nodes(nodes, gpu_stage_nodes(nodes))
    names = {node.name: node.schema.name for node in nodes}
    assert {names[n] for n in fed} == {"readers.file", "decoders.image"}  # the mixed one's reader, the CPU decode
    assert "Mixed" in fed and "Cpu" not in fed
