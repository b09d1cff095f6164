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
from headrace.errors import SampleError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

pytestmark = pytest.mark.gpu


def _host(batch) -> np.ndarray:
    batch = batch.as_cpu() if batch.device == "gpu" else batch
    return np.stack([np.asarray(batch.at(i)) for i in range(len(batch))])


def _outputs(pipe, count: int) -> list:
    out = []
    for _ in range(count):
        try:
            out.append([_host(batch) for batch in pipe.run()])
        except SampleError as exc:
            out.append(str(exc))
    return out


def _assert_same(reference: list, got: list) -> None:
    assert len(reference) == len(got)
    for number, (a, b) in enumerate(zip(reference, got, strict=True)):
        if isinstance(a, str) or isinstance(b, str):
            assert a == b, f"batch {number}"
            continue
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape, f"batch {number}"
            np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8), err_msg=f"batch {number}")


def _ssd(root: str, annotations: str, process: bool, group: int = 0, checkpoint=None):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=11, enable_checkpointing=True,
                  executor_options={"cpu_process": process, "coalesce_batches": group})
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="gpu")

    pipe = ssd() if checkpoint is None else ssd(checkpoint=checkpoint)
    pipe.build()
    assert isinstance(pipe._executor.gpu.reads, CpuStageProcess) == process
    return pipe


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=40, seed=3, size=(90, 120))


@pytest.mark.parametrize("group", [1, 3])
def test_ssd_pipeline_gives_the_same_bits_in_a_worker(coco, group):
    home, worker = _ssd(*coco, False, group), _ssd(*coco, True, group)
    _assert_same(_outputs(home, 8), _outputs(worker, 8))
    home.close()
    worker.close()


def test_checkpoint_of_a_worker_pipeline_resumes_the_same_bits(coco):
    home = _ssd(*coco, False)
    reference = _outputs(home, 12)  # more than an epoch of 40 samples: the worker's readers go round
    home.close()
    pipe = _ssd(*coco, True)
    first = _outputs(pipe, 5)
    state = pipe.checkpoint()
    pipe.close()
    resumed = _ssd(*coco, True, checkpoint=state)  # the new worker starts from the restored readers
    _assert_same(reference, first + _outputs(resumed, 7))
    resumed.close()


def test_rn50_training_with_labels_from_the_worker(image_folder):
    def batches(process: bool) -> list:
        pipe = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=8, num_threads=2, device_id=0,
                              seed=7, executor_options={"cpu_process": process})
        pipe.build()
        out = _outputs(pipe, 6)
        pipe.close()
        return out

    _assert_same(batches(False), batches(True))


def test_a_bad_image_fails_only_its_own_batch_in_a_worker(tmp_path):
    from headrace.data.synthetic import make_image_folder

    make_image_folder(tmp_path, num_images=24, num_classes=2, size=(48, 64), seed=5)
    bad = sorted(tmp_path.rglob("*.jpg"))[9]
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG" * 8)

    def batches(process: bool) -> list:
        @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=2,
                      executor_options={"cpu_process": process, "coalesce_batches": 3})
        def decode():
            jpegs, labels = fn.readers.file(file_root=str(tmp_path), name="Reader")
            images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
            return fn.resize(images, resize_x=32, resize_y=32), labels

        pipe = decode()
        pipe.build()
        out = _outputs(pipe, 6)
        pipe.close()
        return out

    reference = batches(False)
    assert sum(isinstance(b, str) for b in reference) == 1
    _assert_same(reference, batches(True))


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
    np.testing.assert_array_equal(_host(out), np.stack(batch)[:, :, ::-1])
    pipe.close()
