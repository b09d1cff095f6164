"""The executor option coalesce_batches: the GPU stage runs consecutive batches as one, and every batch comes out
the same bits as without it (each batch decoded in a call of its own), also across a checkpoint taken inside a run
and around a bad sample (only the batch holding it fails); pipelines it cannot take run batch by batch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from headrace import fn, pipeline_def, types
from headrace.demo import resnet50_train
from headrace.errors import SampleError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

pytestmark = pytest.mark.gpu


def _host(batch) -> np.ndarray:
    batch = batch.as_cpu() if batch.device == "gpu" else batch
    return np.stack([np.asarray(batch.at(i)) for i in range(len(batch))])


def _ssd(root: str, annotations: str, group: int, checkpoint=None):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=11, enable_checkpointing=True,
                  executor_options={"coalesce_batches": group})
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="gpu")

    pipe = ssd() if checkpoint is None else ssd(checkpoint=checkpoint)
    pipe.build()
    return pipe


def _outputs(pipe, count: int) -> list:
    """`count` batches: per batch, each output as one host array, or the error the batch failed with."""
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


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=40, seed=3, size=(90, 120))


def test_ssd_pipeline_coalesced_gives_the_same_bits(coco):
    plain = _ssd(*coco, group=1)
    coalesced = _ssd(*coco, group=3)
    assert plain._executor.gpu.group == 1 and coalesced._executor.gpu.group == 3
    assert coalesced._executor.gpu.merge_cpu_ops  # random_bbox_crop and the draws run once on a run's batches
    _assert_same(_outputs(plain, 8), _outputs(coalesced, 8))  # two whole runs of three and part of a third
    plain.close()
    coalesced.close()


def test_small_batches_coalesce_by_default(coco):
    pipe = _ssd(*coco, group=0)  # the default: batches of 4, eight to a run
    assert pipe._executor.gpu.group == 8
    pipe.close()


def test_checkpoint_inside_a_coalesced_run_resumes_the_same_bits(coco):
    plain = _ssd(*coco, group=1)
    reference = _outputs(plain, 7)
    plain.close()
    pipe = _ssd(*coco, group=3)
    first = _outputs(pipe, 4)  # the checkpoint falls inside the second run of three
    state = pipe.checkpoint()
    pipe.close()
    resumed = _ssd(*coco, group=3, checkpoint=state)
    _assert_same(reference, first + _outputs(resumed, 3))
    resumed.close()


def test_rn50_training_crops_coalesced_give_the_same_bits(image_folder):
    def batches(group: int) -> list:
        pipe = resnet50_train(data_dir=str(image_folder), device="gpu", batch_size=8, num_threads=2, device_id=0,
                              seed=7, executor_options={"coalesce_batches": group})
        pipe.build()
        assert pipe._executor.gpu.group == group
        out = _outputs(pipe, 6)
        pipe.close()
        return out

    _assert_same(batches(1), batches(4))


def test_a_bad_image_fails_only_its_own_batch(tmp_path):
    from headrace.data.synthetic import make_image_folder

    make_image_folder(tmp_path, num_images=24, num_classes=2, size=(48, 64), seed=5)
    bad = sorted(tmp_path.rglob("*.jpg"))[9]
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG" * 8)

    def batches(group: int) -> list:
        @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=2,
                      executor_options={"coalesce_batches": group})
        def decode():
            jpegs, labels = fn.readers.file(file_root=str(tmp_path), name="Reader")
            images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
            return fn.resize(images, resize_x=32, resize_y=32), labels

        pipe = decode()
        pipe.build()
        out = _outputs(pipe, 6)
        pipe.close()
        return out

    reference = batches(1)
    failed = [number for number, b in enumerate(reference) if isinstance(b, str)]
    assert len(failed) == 1 and f"of batch {failed[0]} " in reference[failed[0]]
    _assert_same(reference, batches(3))


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
    np.testing.assert_array_equal(_host(out), np.stack(batch)[:, :, ::-1])
    pipe.close()
