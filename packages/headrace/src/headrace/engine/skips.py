"""on_error="skip": a sample that its reader cannot read, or a decoder cannot decode, is dropped, and its slot of the
batch gets the readers' next sample instead, on which every per-sample op before the failure runs again.

Batches stay full and every reader's epoch keeps its number of slots: a reader pays each replacement back with a
fill (a repeat of one of the epoch's last samples) in a slot at its epoch's end, so the epochs stay where the
iterator counts them, and a reader's state (what a checkpoint saves) counts the samples it handed out as
replacements. Failures are replaced in slot order once a step has run on the whole batch, so the stream does not
depend on num_threads. A GPU stage with a skipping step reads the next batch only once that step has run.

A reader gives replacements when it has
    replacements(slots) -> (outputs, sources): samples to put in these slots of the batch it made last;
    fill_slots() -> list[int]: the slots of that batch holding a fill (an iterator leaves them out of an epoch);
and with its own on_error="skip" it gives an unreadable sample's data as the OSError that says why."""

from __future__ import annotations

import threading
import warnings
from collections import Counter
from typing import Any, NamedTuple

from headrace.errors import SampleError, SchemaError
from headrace.graph import OpNode

SKIPPED = "__skipped__"
"""values[(SKIPPED, 0)]: the batch's Skip records; values[(SKIPPED, 1)]: its fill slots."""


class Skip(NamedTuple):
    """One sample dropped by on_error="skip": its batch, its slot in the batch, its file, the op and why."""

    batch: int
    sample: int
    file: str
    op: str
    message: str


class Skipped(list):
    """The Skip records of a pipeline's batches, oldest first; `fills` maps a batch to its slots that hold fills
    (repeats that keep an epoch's length; a PARTIAL epoch leaves them out)."""

    def __init__(self, records=(), fills: dict[int, list[int]] | None = None):
        super().__init__(records)
        self.fills: dict[int, list[int]] = dict(fills or {})


def skips(node: OpNode) -> bool:
    """Whether the node drops and replaces the samples it fails on."""
    return "on_error" in node.schema.all_args and node.arg("on_error") == "skip"


def check_replaceable(nodes: list[OpNode], batch_ops: dict[str, Any]) -> bool:
    """Whether the graph skips samples anywhere; a SchemaError (at build) when a batch op could not give the
    replacements. A fed batch (external_source) is refused rather than shrunk: a smaller batch would break the
    one-to-one mapping of a served request's samples and the full batches an iterator expects."""
    skipping = [n for n in nodes if skips(n)]
    if not skipping:
        return False
    if not batch_ops:
        raise SchemaError(f"{skipping[0].schema.name} (node '{skipping[0].name}'): on_error='skip' replaces a failed "
                          "sample with the readers' next one, and this pipeline has no reader")
    for name, op in batch_ops.items():
        if not (hasattr(op, "replacements") and hasattr(op, "fill_slots")):
            node = next(n for n in nodes if n.name == name)
            raise SchemaError(
                f"{skipping[0].schema.name} (node '{skipping[0].name}'): on_error='skip' replaces a failed sample "
                f"with the readers' next one, and {node.schema.name} (node '{name}') cannot give replacements (a "
                "fed batch is what it is). Use on_error='raise' and leave bad samples out of what is fed.")
    return True


def read_failures(node: str, op: str, iteration: int, samples) -> dict[int, SampleError]:
    """The slots whose data a skipping reader gave as the OSError it met; `samples`: (slot, data, source)."""
    return {slot: SampleError(f"{op} (node '{node}') failed on sample {slot} of batch {iteration} [{source}]: {data}",
                              node=node, op=op, sample=slot, source=source)
            for slot, data, source in samples if isinstance(data, OSError)}


class BatchSkips:
    """What one batch has skipped so far (kept in its values), with a bound on failures that repeat: when every
    sample a reader could give fails, the batch ends in an error instead of trying forever."""

    def __init__(self, batch_size: int):
        self.records: list[Skip] = []
        self.repeats = Counter()
        self.limit = 4 * batch_size + 16

    def add(self, iteration: int, errors: dict[int, SampleError]) -> None:
        for slot in sorted(errors):
            error = errors[slot]
            self.records.append(Skip(iteration, slot, error.source, error.op, str(error)))
            self.repeats[error.source] += 1
            # one file failing again and again, or every file failing (a bad mount): end the batch either way
            if self.repeats[error.source] > self.limit or len(self.records) > 4 * self.limit:
                raise SampleError(f"{error.op} (node '{error.node}'): on_error='skip' found no sample that does not "
                                  f"fail for batch {iteration}: every replacement the readers had failed too "
                                  f"({len(self.records)} tries; last: {error})", node=error.node, op=error.op,
                                  sample=slot, source=error.source)


def batch_skips(values: dict, batch_size: int) -> BatchSkips:
    skipped = values.get((SKIPPED, 0))
    if skipped is None:
        skipped = values[(SKIPPED, 0)] = BatchSkips(batch_size)
    return skipped


class SkipLog:
    """An executor's record of skipped samples, with one warning per batch that skipped any."""

    def __init__(self):
        self._lock = threading.Lock()
        self._records: list[Skip] = []
        self._fills: dict[int, list[int]] = {}

    def add(self, iteration: int, values: dict) -> None:
        skipped = values.pop((SKIPPED, 0), None)
        fills = values.pop((SKIPPED, 1), None)
        records = skipped.records if skipped is not None else []
        with self._lock:
            self._records.extend(records)
            if fills:
                self._fills[iteration] = list(fills)
        if records:
            shown = "; ".join(f"{r.file} ({r.op})" for r in records[:5])
            more = f"; and {len(records) - 5} more" if len(records) > 5 else ""
            warnings.warn(f"headrace: batch {iteration} skipped {len(records)} sample(s) that failed "
                          f"(on_error='skip'): {shown}{more}. Pipeline.skipped lists them.", RuntimeWarning,
                          stacklevel=2)

    def snapshot(self) -> Skipped:
        with self._lock:
            return Skipped(self._records, self._fills)


def gpu_skip_head(steps: list[tuple[str, Any]], in_stage: set[str]) -> int:
    """How many of the GPU stage's steps run up to its last step that skips failed samples (0: none skips). Such a
    step must read the CPU stage's data only: a replacement runs the CPU stage again for its slot, then these
    steps again on the batch (a SchemaError at build otherwise)."""
    end = 0
    for number, (kind, step) in enumerate(steps):
        node = step.node
        if not skips(node):
            continue
        refs = [] if kind == "samples" else [*step.inputs, *step.arg_refs]
        if kind == "samples" or any(name in in_stage for name, _ in refs):
            raise SchemaError(f"{node.schema.name} (node '{node.name}'): on_error='skip' needs the op to read what "
                              "the readers and CPU ops made, not GPU data (its replacement sample is read and "
                              "prepared again from the reader)")
        end = number + 1
    return end


def retry_skips(attempt, skipping: set[str], cpu, values: dict, collectors: dict, info, forget) -> None:
    """attempt() until it fails on no sample of a node in `skipping`: each failed slot gets a replacement through
    `cpu.replace`, and forget() drops what was made ahead of the old sample."""
    while True:
        try:
            attempt()
            return
        except SampleError as error:
            if error.node not in skipping or error.sample < 0:
                raise
            failure = error
        cpu.replace(values, collectors, info.iteration, info.size, info.sources, {failure.sample: failure})
        forget()
