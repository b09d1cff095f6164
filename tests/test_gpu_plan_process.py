"""The executor option plan_process on a GPU: SSD300's and RN50 training's fused resize + crop_mirror_normalize
planned in the helper process give the same bits as planned in the pipeline's process (also with
place_in_gpu_stage: the GPU stage collects and places the plans), and the helper stops with the pipeline.
(tests/test_plan_process.py compares the plans themselves, without a GPU.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from headrace import fn, pipeline_def, types

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

from tests.gpu_helpers import assert_same_batches, batch_outputs, rn50_batches

pytestmark = pytest.mark.gpu


def _helpers(pipe) -> list:
    return [kernel.helper for kernel in pipe._executor.gpu.kernels() if getattr(kernel, "helper", None) is not None]


def _ssd(root: str, annotations: str, helper: str, place_in_gpu_stage: bool = False):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=17,
                  executor_options={"plan_process": helper, "place_in_gpu_stage": place_in_gpu_stage})
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="gpu")

    pipe = ssd()
    pipe.build()
    return pipe


def test_ssd_planned_in_the_helper_gives_the_same_bits(tmp_path):
    root, annotations = example.write_coco_set(tmp_path, count=40, seed=6, size=(90, 120))
    plain, helped = _ssd(root, annotations, "off"), _ssd(root, annotations, "auto")  # auto: it coalesces
    assert not _helpers(plain)
    helpers = _helpers(helped)
    assert len(helpers) == 1 and helpers[0].pid is not None
    # coalesced runs of 8 batches of 4, past the end of the epoch
    assert_same_batches(batch_outputs(plain, 20), batch_outputs(helped, 20))
    process = helpers[0]._process
    plain.close()
    helped.close()
    assert helpers[0].pid is None and process.poll() is not None  # the helper stopped with the pipeline


def test_plans_collected_and_placed_by_the_gpu_stage_give_the_same_bits(tmp_path):
    root, annotations = example.write_coco_set(tmp_path, count=40, seed=9, size=(90, 120))
    plain, deferred = _ssd(root, annotations, "off"), _ssd(root, annotations, "auto", place_in_gpu_stage=True)
    assert [step.kernel.defer for step in deferred._executor.gpu._deferring] == [True]
    assert_same_batches(batch_outputs(plain, 20), batch_outputs(deferred, 20))
    plain.close()
    deferred.close()


def test_rn50_training_planned_in_the_helper_gives_the_same_bits(image_folder):
    def has_helper(pipe) -> None:
        assert len(_helpers(pipe)) == 1

    assert_same_batches(rn50_batches(image_folder, {"plan_process": False}),
                        rn50_batches(image_folder, {"plan_process": True}, check=has_helper))


def test_a_fed_pipeline_plans_in_its_own_process_by_default():
    @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=1)
    def fed():
        jpegs = fn.external_source(name="jpegs", dtype=types.UINT8)
        images = fn.decoders.image(jpegs, device="mixed")
        return fn.crop_mirror_normalize(fn.resize(images, resize_x=16, resize_y=16), mirror=fn.random.coin_flip())

    pipe = fed()
    pipe.build()
    assert not _helpers(pipe) and pipe._executor.gpu.kernels()  # the fused step is there, without a helper
    pipe.close()
