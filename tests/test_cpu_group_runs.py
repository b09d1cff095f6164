"""The CPU stage of a coalesced GPU run (CpuStage.run_group): batches read one by one and their CPU ops run once
on the merged batch give every batch the values it gets alone, bit for bit, random draws included; a failing sample
fails only its own batch, with the message it has alone; pipelines whose CPU ops see the batch do not merge."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from headrace import fn, pipeline_def, types
from headrace.batch import BufferPool
from headrace.engine.cpu_stage import CpuStage
from headrace.errors import SampleError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

BATCH = 4


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=30, seed=5, size=(60, 80))


def _stage(pipeline, returned: bool = False) -> CpuStage:
    """The CPU stage of `pipeline`'s graph as a GPU stage's would be: nothing of it returned by the pipeline
    (`returned`: the pipeline's own outputs are)."""
    pipeline.build()
    executor = pipeline._executor
    return CpuStage(executor.nodes, executor.outputs if returned else [], BATCH, 2, executor.seed,
                    BufferPool(per_key=4), None, ThreadPoolExecutor(2))


def _ssd(root: str, annotations: str):
    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=13)
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="cpu")

    return ssd()


def _assert_same_values(alone: tuple, member: tuple) -> None:
    values, sources, _, size = alone
    got, got_sources, _, got_size = member
    assert (sources, size) == (got_sources, got_size)
    assert set(values) == set(got)
    for key, column in values.items():
        assert len(got[key]) == size, key
        for i, (a, b) in enumerate(zip(column, got[key], strict=True)):
            a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
            assert a.dtype == b.dtype and a.shape == b.shape, (key, i)
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=f"{key} sample {i}")


def test_merged_cpu_ops_give_each_batch_its_own_values(coco):
    reference, grouped = _stage(_ssd(*coco)), _stage(_ssd(*coco))
    assert grouped.ops_merge()
    finished = grouped.finish
    sizes: list[int] = []
    grouped.finish = lambda iteration, read: sizes.append(read[2]) or finished(iteration, read)
    alone = [reference.run(i) for i in range(9)]
    members = []
    for first in (0, 3, 6):  # 36 samples: past the 29-image epoch (skip_empty drops one)
        merged, group = grouped.run_group(first, 3, merge_ops=True)
        members += group
        for key, column in merged.items():  # the merged batch's values: the members' samples in order
            assert [id(sample) for sample in column] == [id(m[0][key][i]) for m in group for i in range(BATCH)]
    for number, (a, b) in enumerate(zip(alone, members, strict=True)):
        assert not isinstance(b, BaseException), number
        _assert_same_values(a, b)
    assert sizes == [3 * BATCH] * 3  # each run's ops ran once, on its merged batch


def test_a_failing_sample_fails_only_its_own_batch_with_its_own_message(coco, tmp_path):
    root, annotations = coco
    bad = tmp_path / "images"
    bad.mkdir()
    files = sorted(Path(root).rglob("*.jpg"))
    for path in files:
        (bad / path.name).symlink_to(path)
    victim = bad / files[6].name
    victim.unlink()
    victim.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG" * 8)
    reference, grouped = _stage(_ssd(str(bad), annotations)), _stage(_ssd(str(bad), annotations))
    alone: list = []
    for i in range(3):
        try:
            alone.append(reference.run(i))
        except SampleError as exc:
            alone.append(exc)
    failed = [i for i, a in enumerate(alone) if isinstance(a, SampleError)]
    assert len(failed) == 1, "the corrupt image falls in one of the three batches"
    merged, members = grouped.run_group(0, 3, merge_ops=True)
    assert merged is None  # the merged ops failed: each batch ran alone
    for number, (a, b) in enumerate(zip(alone, members, strict=True)):
        if isinstance(a, SampleError):
            assert isinstance(b, SampleError) and str(b) == str(a) and f"of batch {number} " in str(b)
        else:
            _assert_same_values(a, b)


def test_cpu_ops_that_see_the_batch_or_are_returned_do_not_merge(coco):
    assert not _stage(_ssd(*coco), returned=True).ops_merge()  # returned outputs are collected batch by batch

    @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=3)
    def shuffled():
        jpegs, boxes, labels = fn.readers.coco(file_root=coco[0], annotations_file=coco[1], name="Reader")
        return fn.permute_batch(labels, indices=[3, 2, 1, 0])

    assert not _stage(shuffled()).ops_merge()  # a whole-batch op

    @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=3)
    def user():
        jpegs, boxes, labels = fn.readers.coco(file_root=coco[0], annotations_file=coco[1], name="Reader")
        return fn.python_function(labels, function=lambda x: x + 1)

    assert not _stage(user()).ops_merge()  # user code
