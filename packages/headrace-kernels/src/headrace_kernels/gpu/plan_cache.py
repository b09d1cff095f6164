"""The fused resize + crop_mirror_normalize's records and device tap tables, kept by input shape.

With the same arguments for every sample (no per-sample argument inputs), a sample's record and tables depend on
its image's shape alone. A served model sees the same few sizes over and over (camera resolutions, one client's
images), and planning a batch of one on the host (records, tap tables, their upload) took longer than decoding
it. So each shape is planned once and its tables stay on the device. Per batch of shapes, the rest of its
placement (output offsets, launch grids) is kept too, and once such a batch recurs, its records on the device with
offsets into the input, output and row buffers in place of addresses: from then on a batch of those shapes uploads
nothing."""

from __future__ import annotations

import threading

import numpy as np

from headrace_kernels.gpu.image_ops import (
    MAXC,
    SAMPLE,
    Batch,
    Placement,
    plan_crop_mirror_normalize,
    send_tables,
    tables_to_device,
)


class FusedPlanCache:
    """Plans of one fused resize + crop_mirror_normalize step (arguments `args`, `resize_args`; `flip` and
    `colours`: the other ops of a longer fused chain, as (op, arguments)) by input shape
    (h, w, c) of packed uint8 images, at most `capacity` shapes. When it is full it starts over, unless most
    samples since it was last empty had a shape of their own (random crops in training): then it stops, and every
    batch is planned as before."""

    def __init__(self, args: dict, resize_args: dict, capacity: int = 1024, flip: dict | None = None,
                 colours: tuple[tuple[str, dict], ...] = ()):
        self.args, self.resize_args, self.capacity = args, resize_args, capacity
        self.flip, self.colours = flip, colours  # a flip before the resize, colour ops after it (fused chains)
        self.enabled = True
        self.hits = self.misses = 0  # samples planned from a kept shape / with a new one, since it was last empty
        self._index: dict[tuple[int, int, int], int] = {}
        self._rows = np.zeros(0, SAMPLE)  # one record per shape, pointing at its tables on the device
        self._tables: list = []  # the device buffers of those tables (batches hold this list while in flight)
        self._launch: tuple | None = None  # (output type, output channels, CHW, normalize)
        self._placements: dict[tuple, Placement] = {}  # by the batch's shapes, at most `capacity`
        self._lock = threading.Lock()  # the look-ahead's thread and the GPU stage's may both plan

    def __len__(self) -> int:
        return len(self._index)

    def plan(self, images: list, addresses: np.ndarray, shapes: np.ndarray) -> tuple | None:
        """`plan_crop_mirror_normalize`'s plan for packed uint8 images at `addresses` of `shapes` (n, 3), made from
        the kept records (new shapes are planned first) and placed (`image_ops.Placement`); None for a batch this
        cannot serve (no samples, or several channel counts: the caller plans it as usual). Call with the
        pipeline's GPU context active."""
        if not self.enabled or not len(shapes) or (shapes[:, 2] != shapes[0, 2]).any() or \
                not 0 < shapes[0, 2] <= MAXC:
            return None
        with self._lock:
            return self._plan(images, addresses, shapes)

    def _plan(self, images: list, addresses: np.ndarray, shapes: np.ndarray) -> tuple | None:
        keys = list(map(tuple, shapes.tolist()))
        missing = [key for key in dict.fromkeys(keys) if key not in self._index]
        if missing:
            if len(self._index) + len(missing) > self.capacity:
                self.enabled = self.hits > self.misses
                self._forget()
                if not self.enabled:
                    return None
            self._add(missing)
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        channels = int(shapes[0, 2])
        placements, together = self._placements, tuple(keys)
        placement = placements.get(together)
        recurs = placement is not None  # a batch of these shapes came before: from the second on, its records are kept
        if recurs:
            batch = placement.apply_kept(images, addresses, channels)
            if batch is not None:
                batch.table_memory = self._tables
                return (batch, *self._launch)
        index = self._index
        rec = self._rows[[index[key] for key in keys]]
        rec["in"] = addresses
        batch = Batch.of_records(list(images), channels, rec)
        batch.table_memory = self._tables
        if placement is None:
            if len(placements) >= self.capacity:
                placements.clear()
            placement = placements[together] = Placement(batch, *self._launch)
        placement.apply(batch)
        if recurs and placement.kept is None:
            placement.keep(batch)
        return (batch, *self._launch)

    def _add(self, shapes: list[tuple[int, int, int]]) -> None:
        """Plan `shapes` as one batch, send their tables to the device in one copy, keep their records."""
        count = len(shapes)
        plan = plan_crop_mirror_normalize([None] * count, [self.args] * count, False, [self.resize_args] * count,
                                          (np.zeros(count, np.uint64), np.array(shapes, np.int64)),
                                          None if self.flip is None else [self.flip] * count,
                                          [(op, [args] * count) for op, args in self.colours])
        batch = plan[0]
        if batch.tables is not None:
            device, host, fills = tables_to_device(batch)
            send_tables(device, host, fills)  # before any launch that reads them
            self._tables.append(device)
        self._index.update({shape: len(self._rows) + i for i, shape in enumerate(shapes)})
        self._rows = np.concatenate([self._rows, batch.rec])
        self._launch = plan[1:]

    def clear(self) -> None:
        """Forget every shape; their tables go once no batch in flight holds them."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._index, self._rows, self._tables, self._placements = {}, np.zeros(0, SAMPLE), [], {}
        self.hits = self.misses = 0
