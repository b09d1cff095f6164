"""The other process of the checkpoint tests: resumes iterators from saved states, or trains until killed.

    python checkpoint_worker.py resume JOBS.json     # each job: config, state file, batches to take, output file
    python checkpoint_worker.py train CONFIG.json    # checkpoint after every batch, print "ckpt N", until killed
    python checkpoint_worker.py epochs RUNS.json     # the docs' epoch loop for several runs, one batch each from
                                                     # their last checkpoint; print "saved", wait to be killed
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from headrace import fn, pipeline_def, types
from headrace_torch import GenericIterator, LastBatchPolicy


@pipeline_def(num_threads=2, device_id=None, enable_checkpointing=True)
def augmented(data_dir: str, shard_id: int, num_shards: int, pad: bool):
    """Shuffled reading, a random crop and a random flip: everything a checkpoint must bring back."""
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader", shard_id=shard_id,
                                    num_shards=num_shards, pad_last_batch=pad)
    images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB, random_area=[0.3, 1.0])
    images = fn.resize(images, resize_x=6, resize_y=6)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[100.0] * 3,
                                      std=[50.0] * 3, mirror=fn.random.coin_flip(probability=0.5))
    return images, labels


def make_iterator(config: dict, **kwargs) -> GenericIterator:
    pipe = augmented(config["data"], config["shard_id"], config["num_shards"], config["pad"],
                     batch_size=config["batch_size"], seed=config["seed"],
                     prefetch_queue_depth=config["prefetch"], num_threads=config.get("threads", 2))
    return GenericIterator(pipe, ["images", "labels"], reader_name="Reader", auto_reset=True,
                           last_batch_policy=getattr(LastBatchPolicy, config["policy"]), **kwargs)


def take(loader: GenericIterator, count: int) -> list:
    """`count` batches as (images, labels) arrays; an epoch end shows as the string "end"."""
    out: list = []
    while sum(1 for item in out if item != "end") < count:
        try:
            batch = next(loader)[0]
        except StopIteration:
            out.append("end")
            continue
        out.append((batch["images"].numpy().copy(), batch["labels"].numpy().copy()))
    return out


def save(items: list, path: str) -> None:
    arrays = {}
    for i, item in enumerate(items):
        if item == "end":
            arrays[f"{i:04d}_end"] = np.zeros(0)
        else:
            arrays[f"{i:04d}_images"], arrays[f"{i:04d}_labels"] = item
    np.savez(path, **arrays)


def resume(jobs_path: str) -> None:
    for job in json.loads(Path(jobs_path).read_text()):
        loader = make_iterator(job["config"])
        loader.load_state_dict(json.loads(Path(job["state"]).read_text()))
        save(take(loader, job["count"]), job["out"])


def train(config_path: str) -> None:
    """A training loop that saves its state after every batch, as the README shows; runs until it is killed."""
    config = json.loads(Path(config_path).read_text())
    checkpoint = Path(config["checkpoint"])
    loader = make_iterator(config)
    step = 0
    while True:
        for _batch in loader:
            step += 1
            tmp = checkpoint.with_suffix(".tmp")
            tmp.write_text(json.dumps({"step": step, "loader": loader.state_dict()}))
            tmp.replace(checkpoint)
            print(f"ckpt {step}", flush=True)
            time.sleep(0.01)


def training_loop(config: dict, run_dir: str | Path):
    """The loop of docs/torch.md, resumed from `run_dir`'s checkpoint when there is one: every batch is appended to
    `stream.bin` (a record of its epoch and bytes), then a checkpoint is saved atomically; yields after each save."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint, stream_path = run_dir / "ckpt.json", run_dir / "stream.bin"
    loader = make_iterator(config)
    start_epoch, step, written = 0, 0, 0
    if checkpoint.exists():
        saved = json.loads(checkpoint.read_text())
        loader.load_state_dict(saved["loader"])
        start_epoch, step, written = saved["epoch"], saved["step"], saved["bytes"]
    with open(stream_path, "ab") as stream:
        stream.truncate(written)  # what a killed process wrote after its last checkpoint is not part of the run
        stream.seek(written)
        for epoch in range(start_epoch, config["epochs"]):
            for batch in loader:
                step += 1
                stream.write(record(epoch, batch[0]["images"].numpy(), batch[0]["labels"].numpy()))
                stream.flush()
                tmp = checkpoint.with_suffix(".tmp")
                tmp.write_text(json.dumps({"epoch": epoch, "step": step, "bytes": stream.tell(),
                                           "loader": loader.state_dict()}))
                tmp.replace(checkpoint)
                yield step


def record(epoch: int, images: np.ndarray, labels: np.ndarray) -> bytes:
    """One batch of a stream: a header line (epoch, shapes, dtypes, sizes), then the arrays' bytes."""
    header = json.dumps({"epoch": epoch, "images": [images.shape, str(images.dtype), images.nbytes],
                         "labels": [labels.shape, str(labels.dtype), labels.nbytes]})
    return header.encode() + b"\n" + images.tobytes() + labels.tobytes()


def epochs(runs_path: str) -> None:
    """Advance every run by one batch (resuming each from its checkpoint), print "saved", then wait for SIGKILL;
    with "finish", run them all to the end instead."""
    spec = json.loads(Path(runs_path).read_text())
    loops = [training_loop(run["config"], run["dir"]) for run in spec["runs"]]
    for loop in loops:
        if spec.get("finish"):
            for _step in loop:
                pass
        else:
            next(loop, None)  # a run that is over already yields nothing: its resumed loop ends at once
    print("saved", flush=True)
    if not spec.get("finish"):
        sys.stdin.readline()  # the parent kills this process here, its pipelines still prefetching


if __name__ == "__main__":
    {"resume": resume, "train": train, "epochs": epochs}[sys.argv[1]](sys.argv[2])
