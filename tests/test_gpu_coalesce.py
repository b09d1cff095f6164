"""The executor option coalesce_batches: the GPU stage runs consecutive batches as one, and every batch comes out
the same bits as without it (each batch decoded in a call of its own), also across a checkpoint taken inside a run
and around a bad sample (only the batch holding it fails); pipelines it cannot take run batch by batch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from headrace import fn, pipeline_def, types

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

from tests.gpu_helpers import (
    assert_same_batches,
    batch_outputs,
    decode_batches,
    folder_with_a_bad_jpeg,
    host_array,
    rn50_batches,
)

pytestmark = pytest.mark.gpu


def _ssd(root: str, annotations: str, group: int, checkpoint=None):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=11, enable_checkpointing=True,
                  executor_options={"coalesce_batches": group})
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="gpu")

    pipe = ssd() if checkpoint is None else ssd(checkpoint=checkpoint)
    pipe.build()
    return pipe


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=40, seed=3, size=(90, 120))


def test_ssd_pipeline_coalesced_gives_the_same_bits(coco):
    plain = _ssd(*coco, group=1)
    coalesced = _ssd(*coco, group=3)
    assert plain._executor.gpu.group == 1 and coalesced._executor.gpu.group == 3
    assert coalesced._executor.gpu.merge_cpu_ops  # random_bbox_crop and the draws run once on a run's batches
    # two whole runs of three and part of a third
    assert_same_batches(batch_outputs(plain, 8), batch_outputs(coalesced, 8))
    plain.close()
    coalesced.close()


def test_small_batches_coalesce_by_default(coco):
    pipe = _ssd(*coco, group=0)  # the default: batches of 4, eight to a run
    assert pipe._executor.gpu.group == 8
    pipe.close()


def test_checkpoint_inside_a_coalesced_run_resumes_the_same_bits(coco):
    plain = _ssd(*coco, group=1)
    reference = batch_outputs(plain, 7)
    plain.close()
    pipe = _ssd(*coco, group=3)
    first = batch_outputs(pipe, 4)  # the checkpoint falls inside the second run of three
    state = pipe.checkpoint()
    pipe.close()
    resumed = _ssd(*coco, group=3, checkpoint=state)
    assert_same_batches(reference, first + batch_outputs(resumed, 3))
    resumed.close()


def test_rn50_training_crops_coalesced_give_the_same_bits(image_folder):
    def runs_of(group: int):
        def check(pipe) -> None:
            assert pipe._executor.gpu.group == group
        return check

    assert_same_batches(rn50_batches(image_folder, {"coalesce_batches": 1}, runs_of(1)),
                        rn50_batches(image_folder, {"coalesce_batches": 4}, runs_of(4)))


def test_a_bad_image_fails_only_its_own_batch(tmp_path):
    folder_with_a_bad_jpeg(tmp_path)
    reference = decode_batches(tmp_path, {"coalesce_batches": 1})
    failed = [number for number, b in enumerate(reference) if isinstance(b, str)]
    assert len(failed) == 1 and f"of batch {failed[0]} " in reference[failed[0]]
    assert_same_batches(reference, decode_batches(tmp_path, {"coalesce_batches": 3}))


def test_pipelines_it_cannot_take_run_batch_by_batch():
    batch = [np.full((8, 8, 3), i, np.uint8) for i in range(4)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=2, executor_options={"coalesce_batches": 4})
    def fed():
        data = fn.external_source(source=lambda: batch)
        return fn.flip(data.gpu(), horizontal=1)

    pipe = fed()
    pipe.build()
    assert pipe._executor.gpu.group == 1  # an external source: batches need not be full
    (out,) = pipe.run()
    np.testing.assert_array_equal(host_array(out), np.stack(batch)[:, :, ::-1])
    pipe.close()
