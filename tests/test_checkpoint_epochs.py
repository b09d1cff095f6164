"""A checkpoint saved after any batch of two epochs, an epoch's last batch included, resumes exactly: 70 and 64
images (64 a multiple of the batch of 16) x FILL, DROP and PARTIAL, shuffled, with a random crop and flip, in the
training loop of docs/torch.md. Every save is made by a process that is then killed with SIGKILL and resumed by a
new one; the stream of batches (with their epochs) equals the uninterrupted run's byte for byte.

To keep this to a dozen processes, each worker process advances all six runs by one batch from their checkpoints,
saves, and is killed (checkpoint_worker.py `epochs`); a last one runs them to the end of a third epoch."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from checkpoint_worker import training_loop

from headrace.data.synthetic import make_image_folder

WORKER = Path(__file__).parent / "checkpoint_worker.py"
BATCH, EPOCHS, KILLED_EPOCHS = 16, 3, 2
POLICIES = ("FILL", "DROP", "PARTIAL")
PREFETCH = {70: 2, 64: 3}
# batches per epoch: 70 = 4 x 16 + 6; FILL borrows 10 samples of epoch 2 in epoch 1, so epoch 2 has 4 batches
BATCHES = {(70, "FILL"): [5, 4, 5], (70, "DROP"): [4, 4, 4], (70, "PARTIAL"): [5, 5, 5],
           (64, "FILL"): [4, 4, 4], (64, "DROP"): [4, 4, 4], (64, "PARTIAL"): [4, 4, 4]}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("epochs")
    return {size: str(make_image_folder(root / str(size), size, 3, size=(10, 12), seed=size)) for size in PREFETCH}


def _records(stream: bytes) -> list[tuple[int, bytes]]:
    """A stream as (epoch, header and bytes of the batch) per batch."""
    records, at = [], 0
    while at < len(stream):
        end = stream.index(b"\n", at)
        header = json.loads(stream[at:end])
        size = header["images"][2] + header["labels"][2]
        records.append((header["epoch"], stream[at:end + 1 + size]))
        at = end + 1 + size
    return records


def test_every_save_of_two_epochs_resumes_after_sigkill_byte_for_byte(folders, tmp_path):
    runs, expected = [], {}
    for size, data in folders.items():
        for policy in POLICIES:
            config = {"data": data, "policy": policy, "pad": False, "shard_id": 0, "num_shards": 1,
                      "prefetch": PREFETCH[size], "batch_size": BATCH, "seed": 11, "threads": 2, "epochs": EPOCHS}
            name = f"{size}-{policy}"
            runs.append({"config": config, "dir": str(tmp_path / name)})
            for _step in training_loop(config, tmp_path / "reference" / name):  # uninterrupted, in this process
                pass
            expected[name] = (tmp_path / "reference" / name / "stream.bin").read_bytes()
            epochs = [epoch for epoch, _ in _records(expected[name])]
            assert [epochs.count(e) for e in range(EPOCHS)] == BATCHES[size, policy], name
    spec = tmp_path / "runs.json"
    spec.write_text(json.dumps({"runs": runs}))
    saves = max(sum(counts[:KILLED_EPOCHS]) for counts in BATCHES.values())
    for save in range(1, saves + 1):  # process `save` resumes every run from save - 1, saves once more, dies
        child = subprocess.Popen([sys.executable, str(WORKER), "epochs", str(spec)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "saved", f"process {save} did not save"
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait(timeout=60)
        assert child.returncode == -signal.SIGKILL
    spec.write_text(json.dumps({"runs": runs, "finish": True}))
    subprocess.run([sys.executable, str(WORKER), "epochs", str(spec)], check=True, timeout=300,
                   stdout=subprocess.DEVNULL)
    for run in runs:
        name = Path(run["dir"]).name
        got = (Path(run["dir"]) / "stream.bin").read_bytes()
        if got != expected[name]:
            mine, theirs = _records(got), _records(expected[name])
            pairs = zip(mine, theirs, strict=False)
            first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(mine), len(theirs)))
            pytest.fail(f"{name}: batch {first} differs (resumed epochs {[e for e, _ in mine]}, uninterrupted "
                        f"{[e for e, _ in theirs]})")
