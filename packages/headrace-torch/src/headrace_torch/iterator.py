"""`GenericIterator` and `ClassificationIterator`: headrace pipelines as PyTorch iterables, as DALI's
`DALIGenericIterator` / `DALIClassificationIterator` (same arguments, same epochs, same last batches)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from headrace_torch.epoch import EpochCounter, LastBatchPolicy
from headrace_torch.tensors import check_dense, to_torch

_log = logging.getLogger("headrace_torch")
_AUTO_RESET = {False: False, None: False, "no": False, True: True, "yes": True}


class GenericIterator:
    """Batches of one or more pipelines (one per device) as dicts of torch tensors, one dict per pipeline.

    Arguments as DALI's DALIGenericIterator:
        pipelines: a pipeline or a list of them, all with the same batch size.
        output_map: a distinct name for every pipeline output, in order.
        size: samples per epoch over all pipelines; -1 means "read until the pipeline raises StopIteration"
            (one pipeline only). Mutually exclusive with `reader_name`.
        reader_name: the `name` of the reader whose metadata (size, shards, padding) defines the epoch.
        auto_reset: True/"yes": reset by itself at the end of an epoch; False/None/"no": call `reset()` (or
            `iter()` again).
        fill_last_batch: deprecated; True means FILL, False means PARTIAL.
        last_batch_policy: LastBatchPolicy.FILL, DROP or PARTIAL (see headrace_torch.epoch).
        last_batch_padded: whether the reader pads (its pad_last_batch); taken from the reader with reader_name.
        prepare_first_batch: compute the first batch at construction, so errors show at once and it is ready.
        dynamic_shape: accepted for compatibility; shapes may always change from batch to batch.
        output_dtypes: headrace's addition: {name: torch dtype} to convert outputs to, e.g. {"label": torch.int64}.

    Outputs are not copied: a CPU batch becomes a tensor on its memory through DLPack, and so does a GPU batch (on
    the pipeline's device). The pipeline's buffer is reused only after the tensor is gone.
    """

    def __init__(self, pipelines, output_map: Sequence[str], size: int = -1, reader_name: str | None = None,
                 auto_reset: bool | str | None = False, fill_last_batch: bool | None = None,
                 dynamic_shape: bool | None = False, last_batch_padded: bool = False,
                 last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL, prepare_first_batch: bool = True,
                 output_dtypes: dict[str, torch.dtype] | None = None):
        self._pipes = list(pipelines) if isinstance(pipelines, list | tuple) else [pipelines]
        if not self._pipes:
            raise ValueError("give at least one pipeline")
        self.batch_size = self._pipes[0].batch_size
        if any(p.batch_size != self.batch_size for p in self._pipes):
            raise ValueError(f"all pipelines need the same batch size, got {[p.batch_size for p in self._pipes]}")
        self.output_map = list(output_map)
        if len(set(self.output_map)) != len(self.output_map):
            raise ValueError(f"output_map names must be distinct, got {self.output_map}")
        self._output_dtypes = dict(output_dtypes or {})
        unknown = set(self._output_dtypes) - set(self.output_map)
        if unknown:
            raise ValueError(f"output_dtypes names {sorted(unknown)} are not in output_map {self.output_map}")
        if auto_reset not in _AUTO_RESET:
            raise ValueError(f"auto_reset must be True, False, None, 'yes' or 'no', got {auto_reset!r}")
        self._auto_reset = _AUTO_RESET[auto_reset]
        if fill_last_batch is not None:
            warnings.warn("fill_last_batch is deprecated: use last_batch_policy", DeprecationWarning, stacklevel=2)
            last_batch_policy = LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL
        if not isinstance(last_batch_policy, LastBatchPolicy):
            raise ValueError(f"last_batch_policy must be a LastBatchPolicy, got {last_batch_policy!r}")
        size = int(size)
        if size == 0:
            raise ValueError("size cannot be 0")
        if reader_name is not None and size > 0:
            raise ValueError("give reader_name or size, not both")
        if reader_name is not None and last_batch_padded:
            raise ValueError("with reader_name, last_batch_padded comes from the reader's pad_last_batch: "
                             "do not set it")
        if size < 0 and reader_name is None:
            if len(self._pipes) > 1:
                raise ValueError("without size or reader_name only one pipeline is supported")
            last_batch_policy, last_batch_padded = LastBatchPolicy.FILL, False
        for pipe in self._pipes:
            pipe.build()
        self._reader_name = reader_name
        metas = [p.reader_meta(reader_name) for p in self._pipes] if reader_name is not None else None
        self._epoch = EpochCounter(self.batch_size, len(self._pipes), last_batch_policy, size, last_batch_padded,
                                   metas)
        self._ever_consumed = self._consumed_since_reset = False
        # `_ended`: this epoch's StopIteration was raised and no reset followed yet (auto_reset off);
        # `_resumed`: a state was just loaded, so the next `iter()` continues its epoch instead of starting one
        self._ended = self._resumed = False
        self._checkpointing = all(getattr(p, "enable_checkpointing", False) for p in self._pipes)
        restored = [getattr(p, "restored_iterator_data", None) for p in self._pipes]
        if all(data is not None for data in restored):  # pipelines built from checkpoints() of an iterator
            self._resume(restored[0])
        self._first_batch: list[dict[str, torch.Tensor]] | None = None
        self._state_before_first: dict | None = None
        # restored at an epoch's end, the next thing to hand out is the StopIteration, not a batch
        at_epoch_end = self._resumed and (self._epoch.finished or self._epoch.drops_next())
        if prepare_first_batch and not at_epoch_end and not self._ended:
            self._state_before_first = self._current_state()
            try:
                self._first_batch = self._next_batch()
            except StopIteration:
                raise RuntimeError("there is no data in the pipeline: with the PARTIAL policy this happens when "
                                   "the batch size is larger than the shard") from None

    # Iteration
    def __iter__(self) -> GenericIterator:
        if self._resumed:  # `for batch in loader` right after a restore: the rest of the saved epoch, maybe none
            self._resumed = False
            return self
        if self._epoch.counter != 0 and self._ever_consumed:
            if self._epoch.finished or self._consumed_since_reset:
                self.reset()
            # else: reset() would ignore the call; right after an (auto) reset that is no reason for a warning
        return self

    def __next__(self) -> list[dict[str, torch.Tensor]]:
        self._ever_consumed = self._consumed_since_reset = True
        self._resumed = False
        if self._first_batch is not None:
            batch, self._first_batch, self._state_before_first = self._first_batch, None, None
            return batch
        return self._next_batch()

    next = __next__

    def _next_batch(self) -> list[dict[str, torch.Tensor]]:
        if self._epoch.finished:
            self._end_epoch()
        try:
            outputs = self._run_pipelines()
        except StopIteration:
            raise
        except Exception as exc:
            # the readers consumed this batch even though it failed: count it, so that the epochs stay aligned
            # with the reader's when the user catches the error and goes on
            if not self._epoch.advance():
                raise
            # DROP throws this batch away: the user gets the epoch's end, as without the error
            _log.warning("the batch DROP throws away at the end of the epoch failed: %s", exc)
            self._end_epoch()
        batches = [self._to_torch(outs) for outs in outputs]
        # fills (on_error="skip") keep the reader's epoch length; PARTIAL leaves them out: each good sample once
        partial = self._epoch.policy is LastBatchPolicy.PARTIAL
        fills = [pipe.last_fill_slots() if partial else [] for pipe in self._pipes]
        if self._epoch.advance():
            self._end_epoch()
        kept = self._epoch.kept()
        if kept is None:
            return [_without_fills(b, f) for b, f in zip(batches, fills, strict=True)]
        rows = list(zip(batches, kept, fills, strict=True))
        if not self._epoch.by_reader:  # only the pipelines holding samples within `size`
            rows = [row for row in rows if row[1] > 0]
        return [_without_fills({name: t[:n] for name, t in batch.items()}, f) for batch, n, f in rows]

    def _run_pipelines(self) -> list[tuple]:
        """One batch of every pipeline. When one fails, the others still run (they stay in step) before the
        first error is raised."""
        outputs, error = [], None
        for pipe in self._pipes:
            try:
                outputs.append(pipe.run())
            except StopIteration:
                if error is not None:  # an earlier pipeline's error is what the user must see
                    raise error from None
                if self._epoch.size < 0 and self._auto_reset:
                    self.reset()
                raise
            except Exception as exc:  # noqa: BLE001 - raised once every pipeline has run its batch
                error = error or exc
        if error is not None:
            raise error
        for outs in outputs:
            if len(outs) != len(self.output_map):
                raise ValueError(f"the pipeline has {len(outs)} outputs but output_map names {len(self.output_map)}"
                                 f": {self.output_map}")
            if self._epoch.size > 0 or self._reader_name is not None:
                for name, out in zip(self.output_map, outs, strict=True):
                    if len(out) != self.batch_size:
                        raise ValueError(f"output '{name}' has {len(out)} samples, not the batch size "
                                         f"{self.batch_size}: with reader_name or size every batch must be full")
        return outputs

    def _to_torch(self, outputs: tuple) -> dict[str, torch.Tensor]:
        return {name: batch_tensor(out, self._output_dtypes.get(name)) for name, out in
                zip(self.output_map, outputs, strict=True)}

    def _end_epoch(self):
        if self._auto_reset:
            self.reset()
        else:
            self._ended = True
        raise StopIteration

    def reset(self) -> None:
        """Start the next epoch; ignored (with a warning) while the current one is not finished."""
        epoch = self._epoch
        if epoch.drops_next() and not epoch.finished:
            # the user stopped after len() batches: consume the batch DROP throws away, as the loop would have
            try:
                self._run_pipelines()
            except Exception as exc:  # noqa: BLE001 - its samples are thrown away; the reset goes on
                _log.warning("the batch DROP throws away at the end of the epoch failed: %s", exc)
            epoch.advance()
        if epoch.finished or epoch.size < 0:
            epoch.next_epoch()
            self._consumed_since_reset = self._ended = False
            if epoch.size < 0:
                for pipe in self._pipes:
                    pipe.reset()
        else:
            _log.warning("the iterator cannot be reset before the end of an epoch; ignoring reset()")

    @property
    def size(self) -> int:
        return self._epoch.size

    def __len__(self) -> int:
        return len(self._epoch)

    # Checkpoints: the iterator's counters, plus the pipelines' state when they were built with
    # enable_checkpointing=True
    def state_dict(self) -> dict[str, Any]:
        """Where the iterator stands, as plain Python data: its counters and, for pipelines with checkpointing
        on, their checkpoints under "pipelines". Counts what the user consumed: a batch prepared ahead (or
        prefetched by the pipeline) but not yet returned is not in it."""
        return dict(self._state_before_first) if self._first_batch is not None else self._current_state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()`: the next batch is the one that followed it. Restores the pipelines too
        when the state holds their checkpoints; otherwise they must already stand where the state was taken.
        A state saved on an epoch's last batch resumes at that epoch's end: the next `next()` raises StopIteration,
        and a `for` loop over the iterator ends at once, as the interrupted one would have."""
        self._resume(state)
        checkpoints = state.get("pipelines")
        if checkpoints is not None:
            if len(checkpoints) != len(self._pipes):
                raise ValueError(f"the state holds {len(checkpoints)} pipeline checkpoints, the iterator has "
                                 f"{len(self._pipes)} pipelines")
            for pipe, checkpoint in zip(self._pipes, checkpoints, strict=True):
                pipe.restore(checkpoint)
        self._first_batch, self._state_before_first = None, None

    def _resume(self, state: dict[str, Any]) -> None:
        self._epoch.load(state)
        self._ended = bool(state.get("ended", False))
        self._ever_consumed, self._consumed_since_reset = True, False
        self._resumed = not self._ended

    def checkpoints(self) -> list[dict]:
        """DALI's form: one checkpoint per pipeline with the iterator's counters inside; a pipeline built with
        `checkpoint=` one of them makes a new iterator over it continue where this one stood."""
        if not self._checkpointing:
            raise ValueError("checkpoints need pipelines created with enable_checkpointing=True")
        state = self.state_dict()
        counters = {k: v for k, v in state.items() if k != "pipelines"}
        return [dict(checkpoint, iterator=counters) for checkpoint in state["pipelines"]]

    def _current_state(self) -> dict[str, Any]:
        state = self._epoch.state()
        state["ended"] = self._ended
        if self._checkpointing:
            state["pipelines"] = [pipe.checkpoint() for pipe in self._pipes]
        return state


class ClassificationIterator(GenericIterator):
    """A GenericIterator with output_map ["data", "label"], as DALI's DALIClassificationIterator."""

    def __init__(self, pipelines, size: int = -1, reader_name: str | None = None,
                 auto_reset: bool | str | None = False, fill_last_batch: bool | None = None,
                 dynamic_shape: bool | None = False, last_batch_padded: bool = False,
                 last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL, prepare_first_batch: bool = True,
                 label_dtype: torch.dtype | None = None):
        super().__init__(pipelines, ["data", "label"], size, reader_name=reader_name, auto_reset=auto_reset,
                         fill_last_batch=fill_last_batch, dynamic_shape=dynamic_shape,
                         last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch,
                         output_dtypes={"label": label_dtype} if label_dtype is not None else None)


def batch_tensor(batch, dtype: torch.dtype | None) -> torch.Tensor:
    """A batch as a tensor on the batch's own device (a GPU batch under its device, so DLPack syncs the right
    stream)."""
    batch = check_dense(batch)
    device = batch.__dlpack_device__() if hasattr(batch, "__dlpack_device__") else None
    if device is not None and device[0] == 2 and torch.cuda.is_available():  # kDLCUDA
        with torch.cuda.device(device[1]):
            return to_torch(batch, dtype)
    return to_torch(batch, dtype)


def _without_fills(batch: dict[str, torch.Tensor], fills: list[int]) -> dict[str, torch.Tensor]:
    """The batch without the rows at `fills`."""
    if not fills:
        return batch
    dropped = set(fills)
    keep = [i for i in range(len(next(iter(batch.values())))) if i not in dropped]
    return {name: [t[i] for i in keep] if isinstance(t, list) else t[keep] for name, t in batch.items()}
