"""Shared by the iterator tests: tiny numbered files whose label is their number, and a reader pipeline over them
for headrace and (when installed) DALI, so the labels a batch holds name its samples."""

from __future__ import annotations

from pathlib import Path


def numbered_files(root: Path, count: int) -> list[str]:
    """`count` one-byte files; file i holds the byte i. Returns their paths in order."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = root / f"{i:04d}.bin"
        if not path.exists():
            path.write_bytes(bytes([i % 256]))
        paths.append(str(path))
    return paths


def label_pipeline(module, files: list[str], batch_size: int, shard_id: int = 0, num_shards: int = 1,
                   pad: bool = False, stick: bool = False, shuffle_after_epoch: bool = False, seed: int = 7,
                   random_shuffle: bool = False):
    """A pipeline of `module` (headrace or nvidia.dali) returning the label (= number) of each sample."""
    @module.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=seed, prefetch_queue_depth=2)
    def numbers():
        _, labels = module.fn.readers.file(files=files, labels=list(range(len(files))), name="Reader",
                                           shard_id=shard_id, num_shards=num_shards, pad_last_batch=pad,
                                           stick_to_shard=stick, shuffle_after_epoch=shuffle_after_epoch,
                                           random_shuffle=random_shuffle)
        return labels

    return numbers()


def epochs(iterator, count: int, key: str = "label") -> list[tuple[int, list[list[list[int]]]]]:
    """`count` epochs of an auto-resetting iterator: per epoch, what len() said before it and, per batch, per
    pipeline, the sample numbers."""
    seen = []
    for _ in range(count):
        length = len(iterator)
        seen.append((length, [[d[key].reshape(-1).tolist() for d in batch] for batch in iterator]))
    return seen
