"""Two ranks on the gloo backend (loopback; and on NCCL with a GPU each, on a machine with 2 GPUs): readers sharded
by `shard_args()` see every sample exactly once per epoch with PARTIAL (at most once, full batches only, with DROP),
and both ranks take the same number of steps, so a collective per step never hangs."""

from __future__ import annotations

import datetime
import json
import socket
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
SIZE = 23       # not divisible by batch x ranks
BATCH = 4
EPOCHS = 3
TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, port: int, root: str, out: str, backend: str) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from torch_harness import numbered_files

    import headrace
    from headrace import fn
    from headrace_torch import GenericIterator, LastBatchPolicy, shard_args

    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    files = numbered_files(Path(root), SIZE)

    @headrace.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=100 + rank)
    def numbers():
        _, labels = fn.readers.file(files=files, labels=list(range(SIZE)), name="Reader", random_shuffle=True,
                                    **shard_args())
        return labels

    seen = {}
    for policy in ("PARTIAL", "DROP"):
        loader = GenericIterator(numbers(), ["label"], reader_name="Reader",
                                 last_batch_policy=getattr(LastBatchPolicy, policy), auto_reset=True)
        seen[policy] = []
        for _ in range(EPOCHS):
            epoch = []
            for batch in loader:
                labels = batch[0]["label"].reshape(-1).to(device)
                step = torch.ones(1, device=device)
                dist.all_reduce(step)  # a hang here would mean the ranks disagree on the epoch length
                assert step.item() == WORLD
                epoch.append(labels.cpu().tolist())
            seen[policy].append(epoch)
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, seen)
    if rank == 0:
        Path(out).write_text(json.dumps(everyone))
    dist.destroy_process_group()


def _run_world(tmp_path, backend: str) -> list:
    """Per rank: {policy: per epoch, per batch, the sample numbers}."""
    out = tmp_path / "seen.json"
    context = mp.start_processes(_rank_main, args=(_free_port(), str(tmp_path / "files"), str(out), backend),
                                 nprocs=WORLD, join=False, start_method="spawn")
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=TIMEOUT_S)
    while not context.join(timeout=1):
        if datetime.datetime.now() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the {WORLD} ranks did not finish in {TIMEOUT_S} s")
    return json.loads(out.read_text())


def _two_gpus() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() >= 2 and dist.is_nccl_available()


@pytest.mark.parametrize("backend", ["gloo", pytest.param("nccl", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not _two_gpus(), reason="NCCL needs 2 GPUs")])])
def test_every_sample_once_per_epoch_across_ranks(tmp_path, backend):
    ranks = _run_world(tmp_path, backend)
    # PARTIAL (with the padding shard_args turns on): every sample exactly once per epoch over the ranks
    partial = [rank["PARTIAL"] for rank in ranks]
    assert len(partial[0]) == len(partial[1]) == EPOCHS
    for epoch in range(EPOCHS):
        assert len(partial[0][epoch]) == len(partial[1][epoch])
        samples = [s for rank in partial for batch in rank[epoch] for s in batch]
        assert sorted(samples) == list(range(SIZE)), f"PARTIAL epoch {epoch}"
    assert partial[0][0] != partial[0][1]  # shuffled anew each epoch
    # DROP: full batches only, no sample twice
    for epoch in range(EPOCHS):
        batches = [batch for rank in ranks for batch in rank["DROP"][epoch]]
        samples = [s for batch in batches for s in batch]
        assert all(len(b) == BATCH for b in batches)
        assert len(samples) == len(set(samples)) == WORLD * (SIZE // WORLD // BATCH) * BATCH, f"DROP epoch {epoch}"
