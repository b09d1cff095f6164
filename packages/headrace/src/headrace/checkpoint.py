"""Pipeline checkpoints: small, versioned JSON-able state that lets a pipeline continue exactly where it stood.

What is saved follows each op's declared checkpoint rule (`OpSchema.state`):
  'reader' / 'source': the op's own state (a reader's epoch and position; external_source's batch counter);
  'rng': nothing -- random streams are keyed by (node seed, sample number), so the iteration counter restores them;
  'none': nothing.
Plus the number of batches the user CONSUMED (batches prefetched but not consumed are recomputed after a restore),
the pipeline seed, and a fingerprint of the graph (independent of num_threads and prefetch depth), so a
checkpoint of another pipeline is refused with a message that says what differs. No sample data is stored.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from headrace.errors import HeadraceError

FORMAT = "headrace-checkpoint"
VERSION = 1
_NOT_FINGERPRINTED = ("num_threads", "prefetch_queue_depth", "enable_checkpointing", "device_id", "seed")


class CheckpointError(HeadraceError, ValueError):
    """A checkpoint that cannot be used for this pipeline: malformed, of another version, or of another pipeline."""


def fingerprint(graph_dict: dict) -> str:
    """A short hash of what determines a pipeline's batches, apart from the seed (checked on its own)."""
    content = dict(graph_dict)
    content["pipeline"] = {k: v for k, v in content["pipeline"].items() if k not in _NOT_FINGERPRINTED}
    return hashlib.blake2b(json.dumps(content, sort_keys=True).encode(), digest_size=12).hexdigest()


def make(fingerprint_: str, seed: int, iteration: int, nodes: dict[str, tuple[str, dict]],
         iterator: Any = None) -> dict:
    checkpoint = {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint_, "seed": seed,
                  "iteration": iteration, "nodes": {name: {"op": op, "state": state}
                                                    for name, (op, state) in sorted(nodes.items())}}
    if iterator is not None:
        checkpoint["iterator"] = iterator
    return checkpoint


def read(source: dict | str | os.PathLike) -> dict:
    """A checkpoint from a dict, its JSON text or a file holding it; checks its format and version."""
    if isinstance(source, dict):
        checkpoint = source
    else:
        text = str(source)
        if not text.lstrip().startswith("{"):
            try:
                text = Path(source).read_text()
            except OSError as exc:
                raise CheckpointError(f"cannot read the checkpoint file '{source}': {exc.strerror}") from None
        try:
            checkpoint = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"the checkpoint is not JSON ({exc})") from None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        raise CheckpointError(f"not a headrace checkpoint (its 'format' is not '{FORMAT}')")
    if checkpoint.get("version") != VERSION:
        raise CheckpointError(f"checkpoint version {checkpoint.get('version')!r} is not supported (this headrace "
                              f"reads version {VERSION})")
    for key, kind in (("fingerprint", str), ("seed", int), ("iteration", int), ("nodes", dict)):
        if not isinstance(checkpoint.get(key), kind):
            raise CheckpointError(f"the checkpoint's '{key}' is missing or not a {kind.__name__}")
    return checkpoint


def check_matches(checkpoint: dict, fingerprint_: str, stateful: dict[str, str]) -> None:
    """Refuse a checkpoint of another pipeline, naming what differs. `stateful`: this pipeline's stateful nodes
    (name -> op)."""
    if checkpoint["fingerprint"] == fingerprint_:
        return
    theirs = {name: entry.get("op") for name, entry in checkpoint["nodes"].items()}
    detail = f" Its stateful nodes are {theirs}, this pipeline's are {stateful}." if theirs != stateful else ""
    raise CheckpointError("the checkpoint was made by another pipeline (its graph, arguments or batch size differ: "
                          f"fingerprint {checkpoint['fingerprint']}, this pipeline's {fingerprint_}).{detail}")


def write(checkpoint: dict, path: str | os.PathLike) -> None:
    """Write atomically: a reader of `path` sees the old checkpoint or the new one, never half of one."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w") as handle:
        json.dump(checkpoint, handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
