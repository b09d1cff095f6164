"""The executor option steps_beside_decode: the SSD300 pipeline's box steps run before its decoder (while the decode
started ahead runs), and its batches are the same bits as in the graph's order, coalesced or not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from headrace import fn, pipeline_def, types

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example

from tests.gpu_helpers import assert_same_batches, batch_outputs

pytestmark = pytest.mark.gpu


def _ssd(root: str, annotations: str, beside: bool, group: int):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=5,
                  executor_options={"steps_beside_decode": beside, "coalesce_batches": group})
    def ssd():
        return example.ssd300_training(fn, types, root, annotations, device="gpu")

    pipe = ssd()
    pipe.build()
    return pipe


def _op_order(pipe) -> list[str]:
    return [step.node.schema.name for kind, step in pipe._executor.gpu.steps]


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=24, seed=8, size=(90, 120))


@pytest.mark.parametrize("group", [1, 2])
def test_box_steps_run_before_the_decoder_with_the_same_bits(coco, group):
    graph_order = _ssd(*coco, beside=False, group=group)
    beside = _ssd(*coco, beside=True, group=group)
    plain, moved = _op_order(graph_order), _op_order(beside)
    assert plain.index("decoders.image_slice") < plain.index("box_encoder")
    decoder = moved.index("decoders.image_slice")
    assert moved.index("bb_flip") < moved.index("box_encoder") < decoder
    assert all(moved.index(op) > decoder for op in plain if op not in ("copy", "bb_flip", "box_encoder"))
    assert sorted(plain) == sorted(moved)
    assert_same_batches(batch_outputs(graph_order, 5), batch_outputs(beside, 5))
    graph_order.close()
    beside.close()
