"""Checkpoints: stop anywhere, restore in a new process, and get bit for bit the batches an uninterrupted run gives,
for FILL / DROP / PARTIAL x pad_last_batch x 1 and 2 shards x prefetch depth 1 and 3, across epoch ends; a training
process killed with SIGKILL resumes from its last checkpoint; bad checkpoints are refused clearly."""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from checkpoint_worker import augmented, make_iterator, take

import headrace
from headrace import Pipeline, fn
from headrace.checkpoint import CheckpointError
from headrace.data.synthetic import make_image_folder
from headrace.schema import CHECKPOINT_RULES, SCHEMAS

WORKER = Path(__file__).parent / "checkpoint_worker.py"
SIZE, BATCH, AFTER = 13, 4, 6  # 13 images: not divisible by the batch, nor by batch x shards


@pytest.fixture(scope="module")
def tiny_images(tmp_path_factory):
    return str(make_image_folder(tmp_path_factory.mktemp("tiny"), SIZE, 3, size=(12, 16), seed=4))


def _config(data, policy, pad, shards, prefetch, threads=2):
    return {"data": data, "policy": policy, "pad": pad, "shard_id": shards - 1, "num_shards": shards,
            "prefetch": prefetch, "batch_size": BATCH, "seed": 9, "threads": threads}


def _assert_same(got: list, expected: list, where: str) -> None:
    shape = [x if isinstance(x, str) else "batch" for x in got]
    assert shape == [x if isinstance(x, str) else "batch" for x in expected], f"{where}: epoch ends differ"
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        if not isinstance(a, str):
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), f"{where}: batch {i} differs"


def _after(items: list, batches: int) -> list:
    """What follows the `batches`-th batch of `take()`'s output."""
    seen = 0
    for position, item in enumerate(items):
        seen += item != "end"
        if seen == batches:
            return items[position + 1:]
    raise AssertionError(f"fewer than {batches} batches")


def _load(path: Path) -> list:
    with np.load(path) as data:
        keys = sorted(data.files)
        items, i = [], 0
        while i < len(keys):
            if keys[i].endswith("_end"):
                items.append("end")
                i += 1
            else:  # "NNNN_images", "NNNN_labels"
                items.append((data[keys[i]], data[keys[i + 1]]))
                i += 2
    return items


def test_every_op_declares_a_checkpoint_rule():
    missing = sorted(name for name, schema in SCHEMAS.items() if schema.state not in CHECKPOINT_RULES)
    assert not missing, f"ops without a checkpoint rule (OpSchema.state): {missing}"
    for name, schema in SCHEMAS.items():
        assert not schema.random or schema.state == "rng", name
        assert not schema.batch_op or schema.state in ("reader", "source"), name


def test_restore_in_a_new_process_continues_bit_for_bit(tiny_images, tmp_path):
    jobs, expected = [], {}
    combos = list(itertools.product(("FILL", "DROP", "PARTIAL"), (False, True), (1, 2), (1, 3)))
    for index, (policy, pad, shards, prefetch) in enumerate(combos):
        config = _config(tiny_images, policy, pad, shards, prefetch)
        stop_after = 2 + index % 4  # checkpoints land before, at and after epoch ends
        reference = take(make_iterator(config), stop_after + AFTER)
        interrupted = make_iterator(config)
        take(interrupted, stop_after)
        state_path = tmp_path / f"state{index}.json"
        state_path.write_text(json.dumps(interrupted.state_dict()))
        expected[index] = (_after(reference, stop_after), f"{policy} pad={pad} shards={shards} prefetch={prefetch} "
                                                 f"stop after {stop_after}")
        # the new process runs one thread instead of two: checkpoints do not depend on num_threads
        jobs.append({"config": {**config, "threads": 1}, "state": str(state_path), "count": AFTER,
                     "out": str(tmp_path / f"out{index}.npz")})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([sys.executable, str(WORKER), "resume", str(tmp_path / "jobs.json")], check=True, timeout=300)
    for index, (items, where) in expected.items():
        _assert_same(_load(Path(jobs[index]["out"])), items, where)


def test_sigkilled_training_resumes_from_its_last_checkpoint(tiny_images, tmp_path):
    kill_at = random.Random().randint(3, 12)
    config = {**_config(tiny_images, "PARTIAL", True, 2, 3), "checkpoint": str(tmp_path / "ckpt.json")}
    (tmp_path / "config.json").write_text(json.dumps(config))
    child = subprocess.Popen([sys.executable, str(WORKER), "train", str(tmp_path / "config.json")],
                             stdout=subprocess.PIPE, text=True)
    try:
        for line in child.stdout:
            if line.strip() == f"ckpt {kill_at}":
                child.send_signal(signal.SIGKILL)
                break
    finally:
        child.kill()
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    saved = json.loads(Path(config["checkpoint"]).read_text())
    step = saved["step"]
    assert step >= kill_at, f"killed at {kill_at}"
    resumed = make_iterator(config)
    resumed.load_state_dict(saved["loader"])
    reference = take(make_iterator(config), step + AFTER)
    _assert_same(take(resumed, AFTER), _after(reference, step), f"killed at batch {kill_at}, checkpoint of step {step}")


# The pipeline API, without an iterator
@headrace.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=5, enable_checkpointing=True)
def _flips(data_dir, side=6):
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True, name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), resize_x=side, resize_y=side)
    return fn.flip(images, horizontal=fn.random.coin_flip()), labels


def _runs(pipe, count):
    return [tuple(out.as_array().copy() for out in pipe.run()) for _ in range(count)]


def test_pipeline_checkpoint_file_and_pipeline_file_restore(tiny_images, tmp_path):
    reference = _runs(_flips(tiny_images, prefetch_queue_depth=3), 9)
    pipe = _flips(tiny_images, prefetch_queue_depth=3)
    _runs(pipe, 4)
    state = pipe.checkpoint(tmp_path / "ckpt.json")
    assert state["iteration"] == 4  # prefetched batches are not counted
    assert len((tmp_path / "ckpt.json").read_text()) < 600  # no sample data
    pipe.serialize(tmp_path / "pipe.json")
    loaded = Pipeline.load(tmp_path / "pipe.json", checkpoint=tmp_path / "ckpt.json", num_threads=2)
    for a, b in zip(_runs(loaded, 5), reference[4:], strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    again = _flips(tiny_images, checkpoint=state)  # pipeline_def's factory takes checkpoint= too
    assert all(np.array_equal(x, y) for x, y in zip(again.run(), reference[4], strict=True))


def test_pipeline_without_a_seed_takes_the_checkpoints(tiny_images):
    pipe = _flips(tiny_images)
    _runs(pipe, 2)
    state = pipe.checkpoint()
    expected = _runs(pipe, 1)[0]
    unseeded = _flips(tiny_images, seed=-1, checkpoint=state)
    assert all(np.array_equal(x, y) for x, y in zip(unseeded.run(), expected, strict=True))
    assert unseeded.seed == 5


def test_external_source_iterable_resumes(tmp_path):
    batches = [[np.full((2,), 10 * i + j, np.int32) for j in range(2)] for i in range(5)]

    @headrace.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1, enable_checkpointing=True)
    def fed():
        return fn.external_source(source=batches, cycle=True, name="src")

    pipe = fed()
    [pipe.run() for _ in range(7)]
    state = pipe.checkpoint()
    expected = [pipe.run()[0].as_array().copy() for _ in range(4)]
    resumed = fed(checkpoint=state)
    assert all(np.array_equal(resumed.run()[0].as_array(), e) for e in expected)


def test_dali_style_checkpoints_carry_the_iterator(tiny_images):
    config = _config(tiny_images, "FILL", False, 2, 2)
    reference = take(make_iterator(config), 8)
    first = make_iterator(config)
    take(first, 3)
    (checkpoint,) = first.checkpoints()
    pipe = augmented(tiny_images, 1, 2, False, batch_size=BATCH, seed=9, checkpoint=checkpoint)
    from headrace_torch import GenericIterator, LastBatchPolicy

    second = GenericIterator(pipe, ["images", "labels"], reader_name="Reader", auto_reset=True,
                             last_batch_policy=LastBatchPolicy.FILL)
    _assert_same(take(second, 5), _after(reference, 3), "restored through checkpoints()")


def test_bad_checkpoints_are_refused_clearly(tiny_images, tmp_path):
    pipe = _flips(tiny_images)
    state = pipe.checkpoint()
    with pytest.raises(CheckpointError, match="another pipeline"):
        _flips(tiny_images, side=7, checkpoint=state).build()
    with pytest.raises(CheckpointError, match="made with seed 5, this pipeline has seed 6"):
        _flips(tiny_images, seed=6, checkpoint=state).build()
    with pytest.raises(CheckpointError, match="version 99"):
        _flips(tiny_images, checkpoint={**state, "version": 99}).build()
    with pytest.raises(CheckpointError, match="not JSON"):
        _flips(tiny_images, checkpoint="{oops").build()
    with pytest.raises(CheckpointError, match="enable_checkpointing=True"):
        _flips(tiny_images, enable_checkpointing=False).checkpoint()
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CheckpointError, match="not a headrace checkpoint"):
        pipe.restore(tmp_path / "other.json")


def test_checkpoint_refuses_an_op_without_a_rule(tiny_images, monkeypatch):
    import dataclasses

    pipe = _flips(tiny_images)
    node = next(n for n in pipe.graph.nodes if n.schema.name == "flip")
    monkeypatch.setattr(node, "schema", dataclasses.replace(node.schema, state=None))
    with pytest.raises(CheckpointError, match=r"flip \(node '.*'\) declares no checkpoint rule"):
        pipe.checkpoint()
