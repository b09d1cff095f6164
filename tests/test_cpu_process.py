"""The CPU stage in a worker process (executor option cpu_process; engine.cpu_process, cpu_worker, column_wire):
the worker computes the same batches, sources and reader states as the stage at home, merged or batch by batch;
it starts from the readers' state when first asked (a restored checkpoint); an error names its batch and sample as
at home; a worker that dies gives a clear error, not a hang; its shared blocks are reused, bounded and removed."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from headrace import ExecutorOptions, fn, pipeline_def, types
from headrace.batch import BufferPool
from headrace.engine import column_wire
from headrace.engine.column_wire import BlockReader, Blocks, BlockWriter, block_paths, pack_column, unpack_column
from headrace.engine.cpu_process import CpuStageProcess, may_run_in_process, runs_in_process
from headrace.engine.cpu_stage import CpuStage
from headrace.engine.cpu_worker import pack_group
from headrace.errors import SchemaError
from headrace_kernels.columns import Column
from headrace_kernels.worker_pool import WorkerError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ssd_pipeline as example


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[str, str]:
    return example.write_coco_set(tmp_path_factory.mktemp("coco"), count=40, seed=3, size=(90, 120))


def _cpu_nodes(build) -> list:
    pipe = build()
    pipe.build()
    nodes = [n for n in pipe._executor.nodes if n.schema.batch_op or n.schema.name in ("random_bbox_crop",)
             or n.schema.name.startswith("random.")]
    seed = pipe._executor.seed
    pipe.close()
    return nodes, seed


@pytest.fixture(scope="module")
def ssd_nodes(coco):
    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=7)
    def ssd():
        return example.ssd300_training(fn, types, *coco, device="cpu")

    return _cpu_nodes(ssd)


def _stage(nodes_and_seed) -> CpuStage:
    nodes, seed = nodes_and_seed
    return CpuStage(nodes, [], 4, 2, seed, BufferPool(per_key=2), None, ThreadPoolExecutor(2))


def _keys(stage: CpuStage) -> set:
    return {(node.name, k) for kind, step in stage.steps
            for node in ([step] if kind == "batch" else [op.node for op in step]) for k in range(len(node.outputs))}


@contextlib.contextmanager
def _worker(stage: CpuStage, nodes: list, keys: set | None = None, ahead: int = 1):
    """A worker computing `stage`'s batches (every value sent back, unless `keys` says which), `ahead` runs asked
    for beyond the one answered, closed after."""
    worker = CpuStageProcess(nodes, stage.batch_size, stage.num_threads, stage.seed, parallel_reads=False,
                             ahead=ahead)
    worker.bind(stage, _keys(stage) if keys is None else keys)
    try:
        yield worker
    finally:
        worker.close()


def _assert_same_values(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for key in a:
        assert len(a[key]) == len(b[key]), key
        for x, y in zip(a[key], b[key], strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape, key
            np.testing.assert_array_equal(x, y, err_msg=str(key))


def _assert_same_group(home: tuple, worker: tuple) -> None:
    (merged_a, members_a), (merged_b, members_b) = home, worker
    assert (merged_a is None) == (merged_b is None)
    if merged_a is not None:
        _assert_same_values(merged_a, merged_b)
    for a, b in zip(members_a, members_b, strict=True):
        if isinstance(a, BaseException):
            assert type(a) is type(b) and str(a) == str(b)
            continue
        _assert_same_values(a[0], b[0])
        assert list(a[1]) == list(b[1]) and [s.source_info for s in a[1]] == [s.source_info for s in b[1]]
        assert a[3] == b[3]


@pytest.mark.parametrize("copies", [False, True], ids=["mapped", "copies"])
@pytest.mark.parametrize("merge", [True, False])
def test_the_worker_computes_the_same_batches_and_states(ssd_nodes, merge, copies):
    home, away = _stage(ssd_nodes), _stage(ssd_nodes)
    home.record_states = away.record_states = True
    away.batch_ops["Reader"].feeds_gpu = copies  # copies (a GPU stage reads them): read into the answer's block
    with _worker(away, ssd_nodes[0]) as worker:
        assert runs_in_process(away)
        for first in range(0, 15, 3):  # past an epoch of 10 batches
            _assert_same_group(home.run_group(first, 3, merge), worker.run_group(first, 3, merge))
            assert home.states_after == away.states_after


def test_the_worker_computes_batch_by_batch(ssd_nodes):
    home, away = _stage(ssd_nodes), _stage(ssd_nodes)
    with _worker(away, ssd_nodes[0]) as worker:
        for iteration in range(4):
            _assert_same_values(home.run(iteration)[0], worker.run(iteration)[0])
        # what a probe reads: the time spent waiting for answers and unpacking them, the blocks the answers came in
        assert worker.timings["waiting for the worker's answer"] > 0 and worker.timings["unpacking its answer"] > 0
        assert worker.timings["the worker's compute"] > 0 and worker.timings["from its answer to here"] > 0
        assert worker.timings["blocks mapped"] >= 1


def test_a_run_asked_out_of_turn_drops_the_one_computed_ahead(ssd_nodes):
    home, away = _stage(ssd_nodes), _stage(ssd_nodes)
    with _worker(away, ssd_nodes[0]) as worker:
        _assert_same_group(home.run_group(0, 2, True), worker.run_group(0, 2, True))
        home.run_group(2, 2, True)  # what the worker computed ahead: its readers moved past it, as home's did
        _assert_same_group(home.run_group(7, 2, True), worker.run_group(7, 2, True))


def test_a_worker_asked_two_runs_ahead_gives_the_same_runs_and_states(ssd_nodes):
    home, away = _stage(ssd_nodes), _stage(ssd_nodes)
    home.record_states = away.record_states = True
    with _worker(away, ssd_nodes[0], ahead=2) as worker:
        for first in range(0, 12, 2):
            _assert_same_group(home.run_group(first, 2, True), worker.run_group(first, 2, True))
            assert home.states_after == away.states_after
            assert len(worker._asked) == 2  # the next two runs are being computed
        assert worker.timings["the worker idle between answers"] > 0  # it waits for the next request between runs
        home.run_group(12, 2, True)  # the two runs computed ahead are dropped: the readers moved past both
        home.run_group(14, 2, True)
        _assert_same_group(home.run_group(20, 2, True), worker.run_group(20, 2, True))
        assert all(home.states_after[i] == away.states_after[i] for i in (20, 21))


def test_the_runs_asked_ahead_are_an_int_option():
    assert ExecutorOptions().cpu_process_ahead == 1
    assert ExecutorOptions.from_strings({"cpu_process_ahead": "2"}).cpu_process_ahead == 2
    for bad in (0, True, 1.5):
        with pytest.raises(SchemaError, match="cpu_process_ahead"):
            ExecutorOptions(cpu_process_ahead=bad)


def test_the_worker_sends_only_the_values_asked_for(ssd_nodes):
    stage = _stage(ssd_nodes)
    wanted = {("Reader", 0)}
    with _worker(stage, ssd_nodes[0], wanted) as worker:
        merged, members = worker.run_group(0, 2, True)
        assert set(merged) == wanted and all(set(m[0]) == wanted for m in members)


def test_the_worker_starts_from_the_readers_state(ssd_nodes):
    home, away = _stage(ssd_nodes), _stage(ssd_nodes)
    for _ in range(4):
        home.run(0)  # the readers advance four batches (into the second epoch)
    state = {name: op.get_state() for name, op in home.batch_ops.items()}
    for name, op in away.batch_ops.items():
        op.set_state(state[name])  # as a restored checkpoint does, before the first batch is asked for
    with _worker(away, ssd_nodes[0]) as worker:
        _assert_same_group(home.run_group(4, 2, True), worker.run_group(4, 2, True))


@pytest.mark.parametrize("copies", [False, True], ids=["mapped", "copies"])
def test_a_read_error_names_its_batch_and_sample_as_at_home(tmp_path, copies):
    from headrace.data.synthetic import make_image_folder

    make_image_folder(tmp_path, num_images=24, num_classes=2, size=(16, 16), seed=5)

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=2)
    def files():
        jpegs, labels = fn.readers.file(file_root=str(tmp_path), name="Reader")
        return jpegs, labels

    nodes = _cpu_nodes(files)
    home, away = _stage(nodes), _stage(nodes)
    away.batch_ops["Reader"].feeds_gpu = copies
    with _worker(away, nodes[0]) as worker:
        _assert_same_group(home.run_group(0, 2, False), worker.run_group(0, 2, False))  # the worker goes on to 2-3
        sorted(tmp_path.rglob("*.jpg"))[17].unlink()  # after both readers listed it: batch 4 fails to read it
        _assert_same_group(home.run_group(2, 2, False), worker.run_group(2, 2, False))
        home_group, worker_group = home.run_group(4, 2, False), worker.run_group(4, 2, False)
        assert isinstance(home_group[1][0], OSError) and "img_" in str(home_group[1][0])
        _assert_same_group(home_group, worker_group)


def test_a_worker_that_dies_gives_an_error_not_a_hang(ssd_nodes):
    stage = _stage(ssd_nodes)
    with _worker(stage, ssd_nodes[0]) as worker:
        worker.run_group(0, 1, False)
        os.kill(worker._process.pid, signal.SIGKILL)
        worker._process.wait()
        with pytest.raises(WorkerError, match="worker process .* ended with exit code -9"):
            # batch 1 was asked for ahead and may have been answered before the kill; batch 2 cannot have been
            for iteration in (1, 2):
                worker.run_group(iteration, 1, False)


@pytest.mark.parametrize("start", [
    "import sys; sys.exit(3)",  # the worker's interpreter cannot even start headrace
    "from headrace.engine import cpu_worker; cpu_worker.build_stage = None; cpu_worker.main()",  # its setup fails
])
def test_a_worker_that_cannot_start_leaves_the_stage_at_home(ssd_nodes, monkeypatch, start):
    from headrace.engine import cpu_process

    monkeypatch.setattr(cpu_process, "_START", start)
    home, away = _stage(ssd_nodes), _stage(ssd_nodes)
    with _worker(away, ssd_nodes[0]) as worker:
        with pytest.warns(RuntimeWarning, match="worker process could not start"):
            _assert_same_group(home.run_group(0, 2, True), worker.run_group(0, 2, True))
        _assert_same_group(home.run_group(2, 2, True), worker.run_group(2, 2, True))  # at home from now on
        assert worker._process is None


def test_a_fork_of_the_pipelines_process_does_not_stop_the_worker(ssd_nodes):
    home, away = _stage(ssd_nodes), _stage(ssd_nodes)
    with _worker(away, ssd_nodes[0]) as worker:
        _assert_same_group(home.run_group(0, 2, True), worker.run_group(0, 2, True))
        child = os.fork()
        if child == 0:  # a forked copy (a data loader's worker, say) that drops its copy of the pipeline
            worker.close()
            os._exit(0)
        os.waitpid(child, 0)
        _assert_same_group(home.run_group(2, 2, True), worker.run_group(2, 2, True))


def test_blocks_are_reused_bounded_and_removed(ssd_nodes):
    with _worker(_stage(ssd_nodes), ssd_nodes[0]) as worker:
        worker.run_group(0, 2, True)
        pid = worker._process.pid
        for first in range(2, 60, 2):  # nothing kept: each batch's block goes back and is written again
            worker.run_group(first, 2, True)
        assert len(block_paths(pid)) <= 2
        kept = [worker.run_group(first, 2, True) for first in range(60, 72, 2)]  # six batches held at once
        assert len(block_paths(pid)) >= 6
        del kept
    assert block_paths(pid) == []


def test_a_worker_removes_blocks_a_dead_process_of_its_pid_left():
    from multiprocessing.connection import Pipe

    from headrace.engine.cpu_worker import serve

    left = Blocks()  # a worker of this pid whose pipeline was killed before it removed this block
    writer = BlockWriter()
    writer.add(np.arange(4))
    _, stale = left.write(writer)
    assert stale in block_paths(os.getpid())
    requests_read, requests_write = Pipe(duplex=False)
    replies_read, replies_write = Pipe(duplex=False)
    requests_write.send(("stop",))
    serve(requests_read, replies_write)  # its pid is this process's: the stale block must not stop its first write
    assert block_paths(os.getpid()) == []
    left.close()


def test_columns_travel_as_they_are():
    rows = np.arange(24, dtype=np.float32).reshape(6, 4)
    columns = {
        "dense": Column.of_dense(np.arange(5, dtype=np.int32)),
        "rows": Column.of_rows(rows, np.array([2, 0, 4])),
        "same type": [np.arange(n, dtype=np.uint8) for n in (3, 0, 7)],
        "mixed": [np.zeros((2, 2), np.float64), np.ones(3, np.int16)],
        "objects": [np.array(["a", None], dtype=object), None],
        "empty": [],
    }
    blocks, freed = Blocks(), []
    try:
        writer = BlockWriter()
        records = {name: pack_column(column, writer) for name, column in columns.items()}
        number, path = blocks.write(writer)
        block = BlockReader(freed.append).batch(number, path)
        got = {name: unpack_column(record, block) for name, record in records.items()}
        for name, column in columns.items():
            assert len(got[name]) == len(column), name
            for x, y in zip(column, got[name], strict=True):
                if x is None or x.dtype.hasobject:
                    assert y is x or (y == x).all()
                    continue
                assert x.dtype == y.dtype and x.shape == y.shape, name
                np.testing.assert_array_equal(x, y)
        assert got["dense"].dense is not None and got["rows"].packed is not None
        assert got["same type"].packed is not None  # samples of one type: one array, uploaded whole
        assert not block.flags.writeable  # the writer's block: read-only here
        del block, got
        import gc

        gc.collect()
        assert freed == [number]  # every view gone: the block goes back to the writer
    finally:
        blocks.close()


def _bytes_in(run: column_wire.RunBlock, sizes: list[int], seed: int) -> list[np.ndarray]:
    """Samples of these sizes written into the run's block back to back, as a reader reads a batch's files."""
    buffer = run.allocate(sum(sizes))
    buffer[:] = np.random.default_rng(seed).integers(0, 256, len(buffer), dtype=np.uint8)
    starts = np.cumsum(sizes) - sizes
    return [buffer[s:s + n] for s, n in zip(starts.tolist(), sizes, strict=True)]


@pytest.mark.parametrize("fits", [True, False])
def test_samples_read_into_the_run_block_are_not_copied(fits):
    blocks, freed = Blocks(), []
    try:
        writer = BlockWriter()
        pack_column([np.zeros(1000, np.uint8)], writer)
        blocks.free(blocks.write(writer)[0])  # the first answer sizes the next run's block
        run = blocks.take_run_block()
        assert run is not None and len(run.array) >= 1000
        assert run.allocate(len(run.array) + 1) is None  # no room: the reader makes its own buffer
        files = _bytes_in(run, [300, 0, 200], seed=1) + _bytes_in(run, [100], seed=2)  # two batches, back to back
        writer = BlockWriter(run)
        records = [pack_column(files, writer), pack_column([np.arange(3, dtype=np.int64)], writer)]
        assert records[0][1][0] == 0  # the files' record points where they were read
        if not fits:  # a later value too large for the run's block: all of it goes in another block
            records.append(pack_column([np.ones(len(run.array), np.uint8)], writer))
        number, path = blocks.write(writer)
        assert (number == run.number) == fits and (run.number in blocks.free_numbers) != fits
        block = BlockReader(freed.append).batch(number, path)
        got = [unpack_column(record, block) for record in records]
        for x, y in zip(files, got[0], strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(got[1][0], np.arange(3))
        in_place = [part for part in writer.parts if part[2]]
        assert len(in_place) == 1 and in_place[0][1].nbytes == 600
    finally:
        blocks.close()


def test_readers_read_into_the_answers_block(ssd_nodes, monkeypatch):
    allocated = []
    real = column_wire.RunBlock.allocate

    def allocate(self, nbytes):
        allocated.append(nbytes)
        return real(self, nbytes)

    monkeypatch.setattr(column_wire.RunBlock, "allocate", allocate)
    home, there = _stage(ssd_nodes), _stage(ssd_nodes)
    there.batch_ops["Reader"].feeds_gpu = True  # read into copies, as the worker's readers are
    blocks, reader, keys = Blocks(), BlockReader(lambda number: None), frozenset(_keys(there))
    held = []
    try:
        for first in range(0, 8, 2):
            reply = pack_group(there, first, 2, True, keys, blocks)
            block = reader.batch(*reply[4])
            merged = {key: unpack_column(record, block) for key, record in reply[1].items()}
            _assert_same_values(home.run_group(first, 2, True)[0], merged)
            held.append(merged)  # the answers' blocks stay in use: each run takes another
            assert there.batch_ops["Reader"].read_into is None
        assert len(allocated) == 6  # the second run on: every batch's files read into the answer's block
        assert len(blocks.mapped) == 4
    finally:
        held.clear()
        blocks.close()


def test_stages_it_cannot_take():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def fed():
        return fn.external_source(name="data") + 1

    pipe = fed()
    pipe.build()
    assert not runs_in_process(pipe._executor.cpu)
    pipe.close()

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def user():
        data = fn.random.uniform(range=[0, 1], shape=[2])
        return fn.python_function(data, function=lambda x: x * 2)

    pipe = user()
    pipe.build()
    assert not runs_in_process(pipe._executor.cpu)
    pipe.close()


def test_a_reader_into_device_memory_stays_home(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(4, dtype=np.float32))

    @pipeline_def(batch_size=2, num_threads=1, device_id=0)
    def numpy_files():
        return fn.readers.numpy(file_root=str(tmp_path), device="gpu") * 2

    pipe = numpy_files()  # not built (no GPU here): its CPU stage, from the graph
    readers = [n for n in pipe.graph.nodes if n.schema.batch_op]
    stage = CpuStage(readers, [], 2, 1, 1, BufferPool(per_key=2), None, ThreadPoolExecutor(1))
    assert not runs_in_process(stage)  # its samples would be in the worker's device memory


@pytest.mark.parametrize("copies", [False, True], ids=["mapped", "copies"])
def test_a_shuffled_file_reader_across_epochs(tmp_path, copies):
    from headrace.data.synthetic import make_image_folder

    make_image_folder(tmp_path, num_images=10, num_classes=2, size=(16, 16), seed=5)

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=2)
    def files():
        jpegs, labels = fn.readers.file(file_root=str(tmp_path), random_shuffle=True, name="Reader")
        return jpegs, labels, fn.random.uniform(range=[0, 1])

    nodes = _cpu_nodes(files)
    home, away = _stage(nodes), _stage(nodes)
    away.batch_ops["Reader"].feeds_gpu = copies
    with _worker(away, nodes[0]) as worker:
        for first in range(0, 9, 3):  # runs of 3 batches over epochs of 2.5 batches, reshuffled each epoch
            _assert_same_group(home.run_group(first, 3, True), worker.run_group(first, 3, True))


def test_which_pipelines_start_a_worker_before_their_stage_is_built(coco, tmp_path):
    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def ssd():
        return example.ssd300_training(fn, types, *coco, device="cpu")

    nodes = ssd().graph.nodes
    auto = ExecutorOptions()
    assert may_run_in_process(nodes, auto, 4)  # batches of 4 coalesce: the GPU stage may take the worker
    assert not may_run_in_process(nodes, auto, 256)  # batches of 256 do not
    assert may_run_in_process(nodes, ExecutorOptions(cpu_process="on"), 256)
    assert not may_run_in_process(nodes, ExecutorOptions(cpu_process="off"), 4)

    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def fed():
        return fn.external_source(name="data") + 1

    assert not may_run_in_process(fed().graph.nodes, auto, 4)


def test_a_worker_never_asked_for_a_batch_is_killed_at_close(ssd_nodes):
    nodes, seed = ssd_nodes
    worker = CpuStageProcess(nodes, 4, 1, seed, parallel_reads=False)  # building its stage, no pipeline took it
    process = worker._process
    worker.close()  # nothing to finish: not asked to stop and waited for (a COCO parse can take many seconds)
    assert worker._process is None and process.returncode == -signal.SIGKILL


def test_the_option_takes_a_mode_or_a_bool():
    assert ExecutorOptions().cpu_process == "auto"
    assert ExecutorOptions.from_strings({"cpu_process": "off"}).cpu_process == "off"
    assert ExecutorOptions(cpu_process=True).cpu_process == "on" and ExecutorOptions.of({"cpu_process": False}) \
        .cpu_process == "off"
    assert ExecutorOptions().runs_cpu_process(True) and not ExecutorOptions().runs_cpu_process(False)
    assert ExecutorOptions(cpu_process="on").runs_cpu_process(False)
    assert not ExecutorOptions(cpu_process="off").runs_cpu_process(True)
    with pytest.raises(SchemaError, match="cpu_process"):
        ExecutorOptions(cpu_process="yes")


def test_a_full_shared_folder_sends_blocks_to_the_temporary_folder(monkeypatch):
    import errno
    import tempfile

    from headrace.engine import column_wire

    calls = []
    real = os.posix_fallocate

    def fallocate(fd, offset, size):  # /dev/shm is full (a container's 64 MiB), the temporary folder is not
        calls.append(size)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, offset, size)

    monkeypatch.setattr(column_wire.os, "posix_fallocate", fallocate)
    blocks = Blocks()
    try:
        writer = BlockWriter()
        record = pack_column([np.arange(10, dtype=np.int64)], writer)
        number, path = blocks.write(writer)
        assert len(calls) == 2 and os.path.dirname(path) == tempfile.gettempdir()
        assert path in block_paths(os.getpid())
        block = BlockReader(lambda n: None).batch(number, path)
        np.testing.assert_array_equal(unpack_column(record, block)[0], np.arange(10))
    finally:
        blocks.close()
    assert block_paths(os.getpid()) == []
