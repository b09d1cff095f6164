"""The executor option lookahead_runs: the look-ahead computing two batches (or coalesced runs) ahead of the GPU
stage gives the same bits as one, for SSD300 coalesced or not, across a checkpoint, and around a bad image (only
its batch fails, with the same message); each batch is read once, in order."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from headrace import fn, pipeline_def, types

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

from tests.gpu_helpers import assert_same_batches, batch_outputs, decode_batches, folder_with_a_bad_jpeg

pytestmark = pytest.mark.gpu


def _ssd(root: str, annotations: str, runs: int, group: int, checkpoint=None):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=13, enable_checkpointing=True,
                  executor_options={"lookahead_runs": runs, "coalesce_batches": group})
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="gpu")

    pipe = ssd() if checkpoint is None else ssd(checkpoint=checkpoint)
    pipe.build()
    return pipe


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=36, seed=4, size=(90, 120))


@pytest.mark.parametrize("group", [1, 2])
def test_two_runs_ahead_give_the_same_bits(coco, group):
    one = _ssd(*coco, runs=1, group=group)
    two = _ssd(*coco, runs=2, group=group)
    assert one._executor.gpu.lookahead_runs == 1 and two._executor.gpu.lookahead_runs == 2
    # past the end of the epoch (36 images, batches of 4), so the readers wrap around while two runs are ahead
    assert_same_batches(batch_outputs(one, 11), batch_outputs(two, 11))
    one.close()
    two.close()


def test_a_checkpoint_two_runs_ahead_resumes_the_same_bits(coco):
    reference_pipe = _ssd(*coco, runs=1, group=2)
    reference = batch_outputs(reference_pipe, 7)
    reference_pipe.close()
    pipe = _ssd(*coco, runs=2, group=2)
    first = batch_outputs(pipe, 3)  # inside the second run of two, with two more runs computed ahead
    state = pipe.checkpoint()
    pipe.close()
    resumed = _ssd(*coco, runs=2, group=2, checkpoint=state)
    assert_same_batches(reference, first + batch_outputs(resumed, 4))
    resumed.close()


def test_a_bad_image_two_runs_ahead_fails_its_own_batch_only(tmp_path):
    folder_with_a_bad_jpeg(tmp_path)
    one = decode_batches(tmp_path, {"lookahead_runs": 1})
    two = decode_batches(tmp_path, {"lookahead_runs": 2})
    assert sum(isinstance(batch, str) for batch in two) == 1
    assert_same_batches(one, two)
