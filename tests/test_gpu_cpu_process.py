"""The executor option cpu_process on the GPU: the readers and CPU ops in a worker process give every batch the same
bits as in the pipeline's own process (coalesced or not), a checkpoint resumes the same bits, a bad image fails only
its own batch with the same message, and pipelines it cannot take keep their CPU stage at home."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from headrace import fn, pipeline_def, types
from headrace.demo import resnet50_train
from headrace.engine.cpu_process import CpuStageProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

from tests import gpu_helpers as helpers

pytestmark = pytest.mark.gpu


def _ssd(root: str, annotations: str, process: bool, group: int = 0, checkpoint=None, ahead: int = 1):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=11, enable_checkpointing=True,
                  executor_options={"cpu_process": process, "coalesce_batches": group, "cpu_process_ahead": ahead})
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="gpu")

    pipe = ssd() if checkpoint is None else ssd(checkpoint=checkpoint)
    pipe.build()
    assert isinstance(pipe._executor.gpu.reads, CpuStageProcess) == process
    return pipe


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=40, seed=3, size=(90, 120))


@pytest.mark.parametrize(("group", "ahead"), [(1, 1), (3, 1), (3, 2)])
def test_ssd_pipeline_gives_the_same_bits_in_a_worker(coco, group, ahead):
    home, worker = _ssd(*coco, False, group), _ssd(*coco, True, group, ahead=ahead)
    helpers.assert_same_batches(helpers.batch_outputs(home, 8), helpers.batch_outputs(worker, 8))
    home.close()
    worker.close()


@pytest.mark.parametrize("ahead", [1, 2])
def test_checkpoint_of_a_worker_pipeline_resumes_the_same_bits(coco, ahead):
    home = _ssd(*coco, False)
    reference = helpers.batch_outputs(home, 12)  # more than an epoch of 40 samples: the worker's readers go round
    home.close()
    pipe = _ssd(*coco, True, ahead=ahead)
    first = helpers.batch_outputs(pipe, 5)
    state = pipe.checkpoint()
    pipe.close()
    resumed = _ssd(*coco, True, checkpoint=state)  # the new worker starts from the restored readers
    helpers.assert_same_batches(reference, first + helpers.batch_outputs(resumed, 7))
    resumed.close()


def test_rn50_training_with_labels_from_the_worker(image_folder):
    helpers.assert_same_batches(helpers.rn50_batches(image_folder, {"cpu_process": False}),
                                helpers.rn50_batches(image_folder, {"cpu_process": True}))


def test_a_bad_image_fails_only_its_own_batch_in_a_worker(tmp_path):
    helpers.folder_with_a_bad_jpeg(tmp_path)
    reference = helpers.decode_batches(tmp_path, {"cpu_process": False, "coalesce_batches": 3})
    assert sum(isinstance(b, str) for b in reference) == 1
    worker = helpers.decode_batches(tmp_path, {"cpu_process": True, "coalesce_batches": 3})
    helpers.assert_same_batches(reference, worker)


def test_by_default_only_merged_runs_go_to_a_worker(coco, image_folder):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=11)
    def ssd():
        return example.ssd300_training(fn, types, *coco, device="gpu")

    default = ssd()
    default.build()
    # batches of 4: coalesced, random_bbox_crop and the draws merged
    assert default._executor.gpu.merge_cpu_ops and isinstance(default._executor.gpu.reads, CpuStageProcess)
    default.close()
    rn50 = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=256, num_threads=2, device_id=0)
    rn50.build()
    assert not isinstance(rn50._executor.gpu.reads, CpuStageProcess)  # batches of 256: not coalesced
    rn50.close()


def test_pipelines_it_cannot_take_keep_their_cpu_stage():
    batch = [np.full((8, 8, 3), i, np.uint8) for i in range(4)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=2, executor_options={"cpu_process": True})
    def fed():
        data = fn.external_source(source=lambda: batch)
        return fn.flip(data.gpu(), horizontal=1)

    pipe = fed()
    pipe.build()
    assert not isinstance(pipe._executor.gpu.reads, CpuStageProcess)  # an external source: not a reader
    (out,) = pipe.run()
    np.testing.assert_array_equal(helpers.host_array(out), np.stack(batch)[:, :, ::-1])
    pipe.close()
