"""Two ranks on the gloo backend (loopback; and on NCCL with a GPU each, on a machine with 2 GPUs): readers sharded
by `shard_args()` see every sample exactly once per epoch with PARTIAL (at most once, full batches only, with DROP),
and both ranks take the same number of steps, so a collective per step never hangs. Per-rank checkpoints
(`loader.state_dict()`, saved mid-epoch or on an epoch's last batch) resume both ranks exactly: two new processes
continue with the same bytes, per rank, as the uninterrupted run."""

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


def _spawn(main, *args) -> None:
    """`main(rank, port, *args)` in WORLD new processes; fails the test when they do not end in TIMEOUT_S."""
    context = mp.start_processes(main, args=(_free_port(), *args), nprocs=WORLD, join=False, start_method="spawn")
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=TIMEOUT_S)
    while not context.join(timeout=1):
        if datetime.datetime.now() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the {WORLD} ranks did not finish in {TIMEOUT_S} s")


def _run_world(tmp_path, backend: str) -> list:
    """Per rank: {policy: per epoch, per batch, the sample numbers}."""
    out = tmp_path / "seen.json"
    _spawn(_rank_main, str(tmp_path / "files"), str(out), backend)
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


# Per-rank checkpoints: each rank saves `loader.state_dict()` beside its step count, the processes end, two new ones
# restore their rank's checkpoint and continue; what follows the save is, per rank, byte for byte the uninterrupted run
CKPT_EPOCHS = 3  # the save falls in epoch 0; two whole epochs follow it
CKPT_STEPS = 3   # batches per epoch and rank: a padded shard of 12 samples in batches of 4
SAVES = {"mid_epoch": 1, "epoch_end": CKPT_STEPS - 1}  # the save follows this step (0-based) of epoch 0


def _ckpt_rank_main(rank: int, port: int, root: str, out: str, backend: str, resume_from: str | None) -> None:
    """Trains CKPT_EPOCHS epochs (or, with `resume_from`, the rest of them from this rank's checkpoint); writes
    this rank's stream to `out`/stream-<rank>.json and, when not resuming, its checkpoints to `out`."""
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

    @headrace.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=100 + rank,
                           enable_checkpointing=True)
    def samples():
        data, labels = fn.readers.file(files=files, labels=list(range(SIZE)), name="Reader", random_shuffle=True,
                                       **shard_args())
        return data, labels, fn.random.uniform(range=[0.0, 1.0], shape=[3])

    loader = GenericIterator(samples(), ["data", "label", "noise"], reader_name="Reader", auto_reset=True,
                             last_batch_policy=LastBatchPolicy.PARTIAL)
    start_epoch, steps = 0, 0
    if resume_from is not None:
        saved = torch.load(Path(resume_from) / f"rank{rank}.pt")
        loader.load_state_dict(saved["loader"])
        start_epoch, steps = saved["epoch"], saved["steps"]
    stream = []
    for epoch in range(start_epoch, CKPT_EPOCHS):
        for step, batch in enumerate(loader):
            steps += 1
            count = torch.tensor([steps], device=device)
            dist.all_reduce(count)  # the ranks in step: both at the same batch count
            stream.append({"epoch": epoch, "steps": steps, "all_steps": int(count.item()),
                           **{name: t.numpy().tobytes().hex() for name, t in batch[0].items()}})
            for case, after in SAVES.items():
                if resume_from is None and epoch == 0 and step == after:
                    torch.save({"epoch": epoch, "steps": steps, "loader": loader.state_dict()},
                               Path(out) / case / f"rank{rank}.pt")
    (Path(out) / f"stream-{rank}.json").write_text(json.dumps(stream))
    dist.barrier()
    dist.destroy_process_group()


def _streams(where: Path) -> list[list[dict]]:
    return [json.loads((where / f"stream-{rank}.json").read_text()) for rank in range(WORLD)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """backend -> (folder with the saves and the files, per rank the stream of the uninterrupted run); one run of
    the two ranks per backend, shared by the save cases."""
    runs: dict = {}

    def run(backend: str):
        if backend not in runs:
            where = tmp_path_factory.mktemp(f"uninterrupted-{backend}")
            for case in SAVES:
                (where / case).mkdir()
            _spawn(_ckpt_rank_main, str(where / "files"), str(where), backend, None)
            runs[backend] = where, _streams(where)
        return runs[backend]

    return run


@pytest.mark.parametrize("case", list(SAVES))
@pytest.mark.parametrize("backend", ["gloo", pytest.param("nccl", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not _two_gpus(), reason="NCCL needs 2 GPUs")])])
def test_per_rank_checkpoints_resume_both_ranks_exactly(tmp_path, uninterrupted, backend, case):
    where, full = uninterrupted(backend)
    for rank, stream in enumerate(full):
        assert len(stream) == CKPT_EPOCHS * CKPT_STEPS, f"rank {rank}"
        assert [s["all_steps"] for s in stream] == [WORLD * s["steps"] for s in stream], f"rank {rank} out of step"
    _spawn(_ckpt_rank_main, str(where / "files"), str(tmp_path), backend, str(where / case))
    resumed = _streams(tmp_path)
    done = SAVES[case] + 1
    for rank in range(WORLD):
        assert resumed[rank] == full[rank][done:], f"rank {rank}, resumed from its checkpoint {case}"


def test_shard_args_are_arguments_of_every_reader(monkeypatch):
    """What shard_args() gives (from torchrun's variables here) is accepted by every built-in reader, as DALI's
    readers all take shard_id, num_shards and pad_last_batch (a user's reader declares its own arguments)."""
    import headrace.fn  # noqa: F401 - the op schemas register on import
    from headrace.schema import SCHEMAS
    from headrace_torch import shard_args

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = shard_args()
    assert args == {"shard_id": 1, "num_shards": 2, "pad_last_batch": True}
    readers = [schema for schema in SCHEMAS.values() if schema.state == "reader" and not schema.plugin_module]
    assert {"readers.file", "readers.tfrecord", "readers.webdataset", "readers.mxnet", "readers.caffe",
            "readers.caffe2", "readers.coco", "readers.numpy", "readers.nemo_asr"} <= {s.name for s in readers}
    for schema in readers:
        assert set(args) <= set(schema.all_args), schema.name
