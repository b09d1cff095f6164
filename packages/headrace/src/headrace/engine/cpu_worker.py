"""The worker process of `cpu_process.CpuStageProcess`: it builds the pipeline's CPU stage from the nodes it is sent
and computes the batches asked for (`CpuStage.run_group`), answering with their values in a shared block
(`column_wire`). It ends when asked to, or when the pipeline's process goes (its end of the pipe closes)."""

from __future__ import annotations

import os
import pickle
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

from headrace.batch import BufferPool
from headrace.engine.column_wire import Blocks, BlockWriter, pack_column, remove_blocks
from headrace.engine.cpu_stage import CpuStage


def portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling (headrace's errors keep their sample and node), else a RuntimeError with its
    message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - anything pickle cannot carry
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def build_stage(setup: dict) -> CpuStage:
    """The pipeline's CPU stage, built here from its nodes and settings (its readers list their files now)."""
    pool = ThreadPoolExecutor(setup["num_threads"], thread_name_prefix="headrace-cpu")
    return CpuStage(setup["nodes"], [], setup["batch_size"], setup["num_threads"], setup["seed"],
                    BufferPool(per_key=2), pool if setup["parallel_reads"] else None, pool)


def start(stage: CpuStage, states: dict, attributes: dict) -> None:
    """Put the readers where the pipeline's stand, with the pipeline's settings of them (at the first batch)."""
    for name, settings in attributes.items():
        for attribute, value in settings.items():
            setattr(stage.batch_ops[name], attribute, value)
    for name, state in states.items():
        stage.batch_ops[name].set_state(state)


def pack_group(stage: CpuStage, first: int, count: int, merge: bool, keys: frozenset, blocks: Blocks) -> tuple:
    """("ok", merged column records or None, member records, states after each batch, (block number, path) or None,
    the blocks dropped since the last answer), with the values of `keys` only (what the pipeline's process reads).
    The readers read their files straight into the answer's block (`Blocks.take_run_block`)."""
    run = blocks.take_run_block()
    readers = [op for op in stage.batch_ops.values() if hasattr(op, "read_into")]
    for reader in readers:
        reader.read_into = run.allocate if run is not None else None
    try:
        merged, members = stage.run_group(first, count, merge)
        writer = BlockWriter(run)
        records = _records(merged, members, keys, writer)
        where = blocks.write(writer)
    except BaseException:
        if run is not None:
            blocks.free(run.number)
        raise
    finally:
        for reader in readers:
            reader.read_into = None
    states = {i: stage.states_after.pop(i) for i in range(first, first + count) if i in stage.states_after}
    return "ok", *records, states, where, blocks.take_dropped()


def _records(merged: dict | None, members: list, keys: frozenset, writer: BlockWriter) -> tuple:
    """(merged column records or None, member records) of a run's values of `keys`, laid out by `writer`."""
    if merged is not None:
        return ({key: pack_column(column, writer) for key, column in merged.items() if key in keys},
                [("part", member[1], member[3]) for member in members])
    member_records = []
    for member in members:
        if isinstance(member, BaseException):
            member_records.append(("error", portable(member)))
            continue
        values, sources, collectors, size = member
        if collectors:
            raise RuntimeError("a CPU op's output is returned by the pipeline: its batches are collected in the "
                               "pipeline's process, not in a worker")
        member_records.append(("batch", {key: pack_column(column, writer) for key, column in values.items()
                                         if key in keys}, sources, size))
    return None, member_records


def serve(requests: Connection, replies: Connection) -> None:
    """Answer requests until asked to stop: ("setup", setup) builds the stage and ("start", states, attributes, keys)
    sets its readers and the values to send (no answer; after a failure every request is answered "setup-error"),
    ("free", block numbers) takes blocks back (no answer), ("group", first, count, merge, record_states) computes
    batches (pack_group's answer, with the time.monotonic() it began and ended at)."""
    remove_blocks(os.getpid())  # an earlier worker of this pid left them: its pipeline was killed
    blocks = Blocks()
    try:
        _serve(requests, replies, blocks)
    finally:
        blocks.close()


def _serve(requests: Connection, replies: Connection, blocks: Blocks) -> None:
    stage: CpuStage | None = None
    keys: frozenset = frozenset()
    failed: BaseException | None = None
    while True:
        try:
            message = requests.recv()
        except (EOFError, OSError):
            return  # the pipeline's process is gone
        if message[0] == "stop":
            return
        if message[0] == "free":
            for number in message[1]:
                blocks.free(number)
            continue
        if message[0] in ("setup", "start"):
            try:
                if message[0] == "setup":
                    stage = build_stage(message[1])
                elif stage is not None:
                    start(stage, message[1], message[2])
                    keys = frozenset(message[3])
            except BaseException as exc:  # noqa: BLE001 - the answer to every request
                stage, failed = None, portable(exc)
            continue
        if stage is None:  # its setup failed: the pipeline computes its CPU stage itself
            reply = ("setup-error", failed or RuntimeError("the CPU stage's worker got a request before its setup"))
            try:
                replies.send(reply)
            except OSError:
                return
            continue
        try:
            _, first, count, merge, record_states = message
            stage.record_states = record_states
            started = time.monotonic()  # the clock the pipeline's process reads too: how long the answer took
            reply = (*pack_group(stage, first, count, merge, keys, blocks), started, time.monotonic())
        except BaseException as exc:  # noqa: BLE001 - handed to the pipeline's process, which raises it
            reply = ("error", portable(exc))
        try:
            replies.send(reply)
        except OSError:  # BrokenPipeError: the pipeline closed with a batch asked ahead
            return


def main() -> None:
    """Entry point: `python -c "..." READ_FD WRITE_FD` (see CpuStageProcess)."""
    serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
