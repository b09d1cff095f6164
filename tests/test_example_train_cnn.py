"""The README's training example (examples/train_cnn.py) runs: one epoch of a small CNN on generated images."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[1] / "examples" / "train_cnn.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_cnn_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_trains_one_epoch_on_cpu(capsys):
    result = _example().main(["--images", "40", "--classes", "4", "--batch-size", "16", "--size", "24",
                          "--device", "cpu"])
    assert result["images"] == 40 and result["batches"] == 3  # PARTIAL: 16 + 16 + 8, every image once
    assert math.isfinite(result["last_loss"])
    assert "one epoch: 40 images in 3 batches" in capsys.readouterr().out


@pytest.mark.gpu
def test_example_trains_one_epoch_with_the_pipeline_on_the_gpu(capsys):
    result = _example().main(["--images", "40", "--classes", "4", "--batch-size", "16", "--size", "24",
                              "--device", "cuda", "--pipeline-device", "gpu"])
    assert result["images"] == 40 and result["batches"] == 3
    assert math.isfinite(result["last_loss"])
