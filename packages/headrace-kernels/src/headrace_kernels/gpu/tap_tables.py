"""The triangle filter's tap tables made on the device. The host works out each axis's taps per output pixel and
the source span its table reads (`triangle_spans`, a few operations per axis); kernels/image.cu's
`triangle_tables` then writes the tables with the CPU's float64 arithmetic (`triangle_taps`), so the indices and
float32 weights are the CPU's. A training batch's random crops each need tables of their own (about 4 MB for 256
images), which the host otherwise makes and copies in the look-ahead for every batch."""

from __future__ import annotations

import dataclasses

import numpy as np

AXIS = np.dtype([("index", "<u8"), ("weight", "<u8"), ("lo", "<f8"), ("hi", "<f8"), ("in_size", "<i4"),
                 ("out_size", "<i4"), ("taps", "<i4"), ("shift", "<i4"), ("antialias", "<i4"), ("pad_", "<i4")])
assert AXIS.itemsize == 56, AXIS.itemsize  # kernels/image.cu's TapAxis


@dataclasses.dataclass(frozen=True)
class TriangleAxes:
    """Axes (one per resampled sample) whose tables the device makes: the source extent, output size and source
    span [lo, hi) of each, the offset added to its indices (a crop's place in its image), and what the host needs
    of the tables: taps per output pixel (`counts`), each table's first element (`starts`) and the lowest and
    highest index it holds, offset included."""

    in_sizes: np.ndarray
    out_sizes: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    shifts: np.ndarray
    antialias: bool
    counts: np.ndarray
    starts: np.ndarray
    lowest: np.ndarray
    highest: np.ndarray

    @property
    def entries(self) -> int:
        """Elements of the flattened table (each an int32 index and a float32 weight)."""
        return int(self.starts[-1] + self.out_sizes[-1] * self.counts[-1]) if len(self.starts) else 0


def triangle_axes(in_sizes: np.ndarray, out_sizes: np.ndarray, antialias: bool, lo: np.ndarray, hi: np.ndarray,
                  shifts: np.ndarray) -> TriangleAxes:
    from headrace_kernels.cpu.resampling import triangle_spans  # numba: imported when first needed

    in_sizes, out_sizes = np.asarray(in_sizes, np.int64), np.asarray(out_sizes, np.int64)
    lo, hi = np.ascontiguousarray(lo, np.float64), np.ascontiguousarray(hi, np.float64)
    shifts = np.asarray(shifts, np.int64)
    counts, lowest, highest = triangle_spans(in_sizes, out_sizes, antialias, lo, hi)
    sizes = out_sizes * counts
    starts = np.cumsum(sizes) - sizes
    return TriangleAxes(in_sizes, out_sizes, lo, hi, shifts, antialias, counts, starts, lowest + shifts,
                        highest + shifts)


@dataclasses.dataclass(frozen=True)
class DeviceTables:
    """A batch's tables of the samples `which`, rows and columns, for the device to make."""

    which: np.ndarray
    rows: TriangleAxes
    cols: TriangleAxes

    def on_host(self) -> tuple:
        """The tables made on the host by the CPU's code, in the form host-made tables take (which, (row_idx,
        row_w, col_idx, col_w), (row_starts, col_starts)): the reference the device's tables are tested against."""
        return self.which, (*host_tables(self.rows), *host_tables(self.cols)), (self.rows.starts, self.cols.starts)


def axis_records(axes: TriangleAxes, index_address: int, weight_address: int) -> np.ndarray:
    """The TapAxis records of `axes`, their tables flattened at these device addresses."""
    rec = np.zeros(len(axes.in_sizes), AXIS)
    offsets = axes.starts.astype(np.uint64) * np.uint64(4)
    rec["index"], rec["weight"] = np.uint64(index_address) + offsets, np.uint64(weight_address) + offsets
    rec["lo"], rec["hi"] = axes.lo, axes.hi
    rec["in_size"], rec["out_size"], rec["taps"] = axes.in_sizes, axes.out_sizes, axes.counts
    rec["shift"], rec["antialias"] = axes.shifts, int(axes.antialias)
    return rec


def host_tables(axes: TriangleAxes) -> tuple[np.ndarray, np.ndarray]:
    """The flattened (indices, weights) that `triangle_tables` makes of `axes`, made on the host by the CPU
    kernel's `batch_triangle_taps`: the reference the device's tables are tested against."""
    from headrace_kernels.cpu.resampling import batch_triangle_taps

    index, weight, _, _ = batch_triangle_taps(axes.in_sizes, axes.out_sizes, axes.antialias, axes.lo, axes.hi)
    return index + np.repeat(axes.shifts, axes.out_sizes * axes.counts).astype(np.int32), weight
