"""examples/train_distributed.py under torchrun with two ranks: gloo on CPU ranks here, NCCL with a GPU per rank on
a two-GPU machine. Each epoch the ranks together see every sample exactly once, in the same number of steps, and
DDP's loss stays finite."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

EXAMPLE = Path(__file__).parents[1] / "examples" / "train_distributed.py"


def _torchrun(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "summary.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(EXAMPLE),
               "--images", "46", "--batch-size", "4", "--size", "16", "--epochs", "3", "--threads", "1", "--check",
               "--json", str(out), *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def _check(summary: dict) -> None:
    assert summary["world"] == 2
    assert summary["every_sample_once"] == [True, True, True]
    steps = summary["steps_per_rank"]
    assert steps[0] == steps[1] == [6, 6, 6]  # 23 samples per rank, padded to 24: six batches of 4
    assert all(math.isfinite(first) and math.isfinite(last) for first, last in summary["losses"])
    assert summary["images_per_s"] > 0


def test_two_cpu_ranks_on_gloo(tmp_path):
    _check(_torchrun(tmp_path))


@pytest.mark.gpu
@pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.device_count() >= 2), reason="needs 2 GPUs")
def test_two_gpu_ranks_on_nccl(tmp_path):
    _check(_torchrun(tmp_path, "--gpu"))
