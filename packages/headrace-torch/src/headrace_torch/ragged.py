"""DALI's DALIRaggedIterator: a GenericIterator whose outputs may hold samples of different shapes, handed out as a
list of tensors (SPARSE_LIST_TAG) or as one sparse COO tensor (SPARSE_COO_TAG) instead of one dense tensor."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from headrace_torch.epoch import LastBatchPolicy
from headrace_torch.iterator import GenericIterator, batch_tensor
from headrace_torch.tensors import to_torch


class RaggedIterator(GenericIterator):
    """Arguments as DALI's DALIRaggedIterator: GenericIterator's, and `output_types`, one tag per output (default:
    every output DENSE_TAG). A SPARSE_COO_TAG output of 1-D samples becomes a (samples, longest) sparse tensor whose
    row i holds sample i's values, as DALI builds it."""

    DENSE_TAG: str = "dense"
    SPARSE_LIST_TAG: str = "sparse_list"
    SPARSE_COO_TAG: str = "sparse_coo"

    def __init__(self, pipelines, output_map: Sequence[str], size: int = -1, reader_name: str | None = None,
                 output_types: Sequence[str] | None = None, auto_reset: bool | str | None = False,
                 fill_last_batch: bool | None = None, dynamic_shape: bool | None = False,
                 last_batch_padded: bool = False, last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL,
                 prepare_first_batch: bool = True):
        tags = list(output_types) if output_types is not None else [self.DENSE_TAG] * len(output_map)
        if len(tags) != len(output_map):
            raise ValueError(f"output_types has {len(tags)} tags for the {len(output_map)} outputs of output_map")
        allowed = (self.DENSE_TAG, self.SPARSE_LIST_TAG, self.SPARSE_COO_TAG)
        if any(tag not in allowed for tag in tags):
            raise ValueError(f"output_types must be made of {allowed}, got {tags}")
        self._tags = dict(zip(output_map, tags, strict=True))  # before the first batch, which the parent makes
        super().__init__(pipelines, output_map, size, reader_name=reader_name, auto_reset=auto_reset,
                         fill_last_batch=fill_last_batch, dynamic_shape=dynamic_shape,
                         last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch)

    def _to_torch(self, outputs: tuple) -> dict:
        batches = {}
        for name, out in zip(self.output_map, outputs, strict=True):
            if self._tags[name] == self.DENSE_TAG:
                batches[name] = batch_tensor(out, None)
            else:  # a list of tensors for now: the epoch's end may still cut the batch, then COO is built
                getattr(out, "synchronize", lambda: None)()  # a GPU batch: computed before its samples are shared
                batches[name] = [to_torch(out.at(i)) for i in range(len(out))]
        return batches

    def __next__(self) -> list[dict]:
        batches = super().__next__()
        return [{name: coo(value) if self._tags[name] == self.SPARSE_COO_TAG else value
                 for name, value in batch.items()} for batch in batches]

    next = __next__


def coo(samples: list[torch.Tensor]) -> torch.Tensor:
    """1-D samples as one sparse COO tensor: element j of sample i at (i, j)."""
    if not samples:
        return torch.sparse_coo_tensor(torch.zeros((2, 0), dtype=torch.long), torch.zeros(0))
    values = torch.hstack(samples)
    rows = torch.cat([torch.full((len(s),), i, dtype=torch.long) for i, s in enumerate(samples)])
    columns = torch.cat([torch.arange(len(s), dtype=torch.long) for s in samples])
    return torch.sparse_coo_tensor(torch.stack([rows, columns]).to(values.device), values)
