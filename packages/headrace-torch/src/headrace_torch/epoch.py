"""How many batches an epoch has and which samples of a batch count: DALI's iterator bookkeeping, no torch.

The counters model every shard of the data set, not only the ones this process reads, so every rank computes the
same epoch length without talking to the others. The rules (packages/headrace-torch/README.md has them with
worked examples):

* With `reader_name`, the iterator reads the reader's metadata: N samples, S shards of sizes
  floor((s+1)N/S) - floor(sN/S), and whether the reader pads. The epoch ends once `counter`, the number of samples
  each pipeline returned this epoch, reaches `size`:
  DROP: size = N // S; a batch that would take any shard past its own size is fetched and thrown away, and the
  epoch ends.  Padded reader: size = ceil(N/S) (all shards pad to the largest).  Otherwise: size = ceil(N/S)
  rounded up to whole batches.
* PARTIAL: the last batch of a pipeline keeps only the samples of its current shard (batch - (counter - shard
  size)); the rest (padding, or the next epoch's first samples) is cut off and lost.
* FILL without padding: the samples each shard read past its shard end count towards its next epoch, and the next
  epoch is as long as the longest remaining part, rounded up to whole batches (or skipped when nothing remains).
  With padding, or for PARTIAL and DROP, the next epoch starts with a fresh count.
* Without a reader but with `size` (samples in total over the pipelines), batches of all pipelines count together;
  PARTIAL hands out only the pipelines (and the part of the last one) within `size`.
* With neither, the epoch ends when the pipeline raises StopIteration (an external source ran out); the policy
  is then FILL.
"""

from __future__ import annotations

import math
from enum import Enum, unique

import numpy as np


@unique
class LastBatchPolicy(Enum):
    """What the iterator does with the last batch of an epoch when the epoch's samples do not fill it.

    FILL: return it whole, completed by the reader (its padding, or the next epoch's first samples).
    DROP: throw it away (the reader still consumed it).
    PARTIAL: return only the samples of the current epoch.
    """

    FILL = 0
    DROP = 1
    PARTIAL = 2


_STATE_VERSION = 1


class EpochCounter:
    """The iterator's counters. `advance()` after every batch, `finished` before the next, `next_epoch()` at the
    end of an epoch."""

    def __init__(self, batch_size: int, num_pipelines: int, policy: LastBatchPolicy, size: int = -1,
                 padded: bool = False, reader_meta: list[dict] | None = None):
        self.batch_size, self.num_pipelines = batch_size, num_pipelines
        self.policy, self.padded = policy, padded
        self.size = int(size)
        self.counter = 0
        self.by_reader = reader_meta is not None
        if self.by_reader:
            self._from_reader(reader_meta)

    def _from_reader(self, metas: list[dict]) -> None:
        first = metas[0]
        for key in ("epoch_size", "number_of_shards", "pad_last_batch", "stick_to_shard"):
            if any(m[key] != first[key] for m in metas):
                raise ValueError(f"the reader has a different {key} in the pipelines: {[m[key] for m in metas]}")
        self.total = int(first["epoch_size"])
        self.num_shards = int(first["number_of_shards"])
        self.padded = bool(first["pad_last_batch"])
        self.stick = bool(first["stick_to_shard"])
        self.shard_ids = np.array([m["shard_id"] for m in metas], dtype=np.int64)
        shards = np.arange(self.num_shards + 1, dtype=np.int64)
        self.initial_sizes = np.diff(shards * self.total // self.num_shards)
        self.sizes = self.initial_sizes.copy()
        self.offsets = np.zeros(self.num_shards, dtype=np.int64)
        if self.policy is LastBatchPolicy.DROP:
            self.size = self.total // self.num_shards
        elif self.padded:
            self.size = int(first["epoch_size_padded"]) // self.num_shards
        else:
            self.size = _round_up(-(-self.total // self.num_shards), self.batch_size)

    @property
    def step(self) -> int:
        """Samples one batch of every pipeline adds to the counter."""
        return self.batch_size if self.by_reader else self.batch_size * self.num_pipelines

    @property
    def finished(self) -> bool:
        return self.size > 0 and self.counter >= self.size

    def drops_next(self) -> bool:
        """Whether the next batch would be the one DROP throws away."""
        if self.policy is not LastBatchPolicy.DROP:
            return False
        counter = self.counter + self.step
        if self.by_reader:
            return bool(np.any(self.offsets + counter > self.sizes))
        return self.size > 0 and counter > self.size

    def advance(self) -> bool:
        """Count one batch; True when DROP throws it away and ends the epoch."""
        drop = self.drops_next()
        self.counter += self.step
        return drop

    def kept(self) -> list[int] | None:
        """How many samples of each pipeline's batch the user gets (PARTIAL's last batch), or None for all."""
        if self.policy is not LastBatchPolicy.PARTIAL:
            return None
        if self.by_reader:
            left = self.batch_size - (self.counter - self.initial_sizes[self.shard_ids])
            return [int(n) for n in left] if np.any(left < self.batch_size) else None
        if self.size > 0 and self.counter > self.size:
            room = self.step - (self.counter - self.size)
            full, rest = divmod(room, self.batch_size)
            return [self.batch_size] * full + ([rest] if rest else []) + [0] * (self.num_pipelines - full - bool(rest))
        return None

    def next_epoch(self) -> None:
        """Move the counters to the start of the next epoch."""
        carry = self.policy is LastBatchPolicy.FILL and not self.padded
        if not self.by_reader:
            self.counter = self.counter % self.size if carry and self.size > 0 else 0
            return
        if carry:
            # what each shard read beyond its shard this epoch counts towards the next one
            self.offsets = self.offsets + (self.counter - self.offsets.min()) - self.sizes
            self.counter = int(self.offsets.min())
        else:
            self.counter = 0
        if not self.stick:
            self.shard_ids = (self.shard_ids + 1) % self.num_shards
        if carry:
            if not self.stick:
                self.sizes = np.roll(self.sizes, 1)
            self.size = _round_up(int((self.sizes - self.offsets).max()), self.batch_size)
            if self.size == 0:  # read so far ahead that the next epoch is done already
                self.offsets = np.zeros(self.num_shards, dtype=np.int64)
                self.counter = 0
                self.sizes = np.roll(self.sizes, 1)
                self.size = _round_up(int(self.sizes.max()), self.batch_size)

    def __len__(self) -> int:
        if self.size < 0:
            raise TypeError("the iterator's length is unknown: it reads until the pipeline raises StopIteration "
                            "(give reader_name or size)")
        if self.policy is LastBatchPolicy.DROP:
            return self.size // self.step
        return math.ceil(self.size / self.step)

    # The iterator's own counters, for state_dict()
    def state(self) -> dict:
        state = {"version": _STATE_VERSION, "policy": self.policy.name, "batch_size": self.batch_size,
                 "counter": int(self.counter), "size": int(self.size)}
        if self.by_reader:
            state.update(num_shards=self.num_shards, epoch_size=self.total, offsets=self.offsets.tolist(),
                         sizes=self.sizes.tolist(), shard_ids=self.shard_ids.tolist())
        return state

    def load(self, state: dict) -> None:
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"iterator state version {state.get('version')!r} is not {_STATE_VERSION}")
        mine = {"policy": self.policy.name, "batch_size": self.batch_size}
        if self.by_reader:
            mine.update(num_shards=self.num_shards, epoch_size=self.total)
        for key, value in mine.items():
            if state.get(key) != value:
                raise ValueError(f"the iterator state is for {key}={state.get(key)!r}, this iterator has {value!r}")
        if self.by_reader and len(state["shard_ids"]) != len(self.shard_ids):
            raise ValueError(f"the iterator state is for {len(state['shard_ids'])} pipelines, this iterator has "
                             f"{len(self.shard_ids)}")
        self.counter, self.size = int(state["counter"]), int(state["size"])
        if self.by_reader:
            self.offsets = np.asarray(state["offsets"], dtype=np.int64)
            self.sizes = np.asarray(state["sizes"], dtype=np.int64)
            self.shard_ids = np.asarray(state["shard_ids"], dtype=np.int64)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
