"""Sharding by `torch.distributed` rank and world size: one line for the user."""

from __future__ import annotations

import os

import torch.distributed as dist


def shard_args(pad_last_batch: bool = True) -> dict:
    """Reader arguments that split the data set over the ranks of the default process group.

    `fn.readers.file(file_root=..., name="Reader", **shard_args())` gives every rank its own shard. With
    `pad_last_batch=True` (the default here) every rank gets the same number of batches per epoch and, with the
    PARTIAL or DROP last batch policy, every sample is seen once per epoch across the ranks (DROP: at most once).
    Without an initialised process group it falls back to the RANK / WORLD_SIZE variables torchrun sets, and to
    one shard when neither is there.
    """
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    return {"shard_id": rank, "num_shards": world, "pad_last_batch": pad_last_batch}
