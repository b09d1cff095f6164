"""The triangle filter's tap tables made on the device (headrace_kernels.gpu.tap_tables, kernels/image.cu's
`triangle_tables`). Without a GPU: what the host works out of an axis (taps per output pixel, the lowest and
highest source index) equals what the CPU's own tables hold. On a GPU: the device's tables equal the CPU kernel's
(`batch_triangle_taps`) bit for bit: the same float64 operations in the same order, no FMA. Tolerance: none."""

from __future__ import annotations

import numpy as np
import pytest

from headrace_kernels.cpu.resampling import batch_triangle_taps
from headrace_kernels.gpu import tap_tables


def _axes(rng: np.random.Generator, n: int, whole: bool) -> tuple[np.ndarray, ...]:
    """Random axes: shrinking and growing, sub-pixel and whole-pixel spans, some read flipped (hi < lo)."""
    in_sizes = rng.integers(1, 900, n).astype(np.int64)
    out_sizes = rng.integers(1, 600, n).astype(np.int64)
    lo = rng.uniform(-5, 1, n) * (rng.random(n) < 0.5)
    hi = in_sizes * rng.uniform(0.3, 1.3, n)
    flipped = rng.random(n) < 0.2
    lo, hi = np.where(flipped, hi, lo), np.where(flipped, lo, hi)
    if whole:
        lo, hi = np.round(lo), np.round(hi)
    shifts = rng.integers(0, 50, n).astype(np.int64)
    return in_sizes, out_sizes, lo, hi, shifts


CASES = [(seed, whole, antialias) for seed in range(4) for whole in (False, True) for antialias in (True, False)]


@pytest.mark.parametrize(("seed", "whole", "antialias"), CASES)
def test_the_host_knows_the_tables_without_making_them(seed, whole, antialias):
    in_sizes, out_sizes, lo, hi, shifts = _axes(np.random.default_rng(seed), 200, whole)
    axes = tap_tables.triangle_axes(in_sizes, out_sizes, antialias, lo, hi, shifts)
    index, _, starts, counts = batch_triangle_taps(in_sizes, out_sizes, antialias, lo, hi)
    np.testing.assert_array_equal(axes.counts, counts)
    np.testing.assert_array_equal(axes.starts, starts)
    assert axes.entries == index.size
    np.testing.assert_array_equal(axes.lowest, np.minimum.reduceat(index, starts) + shifts)
    np.testing.assert_array_equal(axes.highest, np.maximum.reduceat(index, starts) + shifts)


def test_the_reference_tables_are_the_cpu_kernels_with_the_offsets():
    from headrace_kernels.cpu.resampling import triangle_taps

    in_sizes, out_sizes, lo, hi, shifts = _axes(np.random.default_rng(9), 30, False)
    axes = tap_tables.triangle_axes(in_sizes, out_sizes, True, lo, hi, shifts)
    index, weight = tap_tables.host_tables(axes)
    for i in range(len(in_sizes)):
        one_index, one_weight = triangle_taps(int(in_sizes[i]), int(out_sizes[i]), True, float(lo[i]), float(hi[i]))
        part = slice(int(axes.starts[i]), int(axes.starts[i]) + one_index.size)
        np.testing.assert_array_equal(index[part], one_index.ravel() + shifts[i])
        np.testing.assert_array_equal(weight[part], one_weight.ravel())


@pytest.mark.gpu
@pytest.mark.parametrize(("seed", "whole", "antialias"), CASES)
def test_device_tables_are_the_cpu_kernels(seed, whole, antialias):
    import cupy as cp

    from headrace_kernels.gpu import image_ops

    in_sizes, out_sizes, lo, hi, shifts = _axes(np.random.default_rng(seed), 300, whole)
    in_sizes[:3], out_sizes[:3], lo[:3], hi[:3] = [4000, 1, 7], [3, 1, 900], [0, 0, 0], [4000, 1, 7]  # extremes
    rows = tap_tables.triangle_axes(in_sizes, out_sizes, antialias, lo, hi, shifts)
    cols = tap_tables.triangle_axes(out_sizes, in_sizes, antialias, lo * 0.5, hi * 0.5, shifts[::-1].copy())
    batch = image_ops.Batch([None] * len(in_sizes), 3, "uint8", np.dtype(np.uint8),
                            packed=(np.zeros(len(in_sizes), np.uint64), np.ones((len(in_sizes), 3), np.int64)))
    batch.tables = tap_tables.DeviceTables(np.arange(len(in_sizes)), rows, cols)
    device, host, fills = image_ops.tables_to_device(batch, head=64)
    image_ops.send_tables(device, host, fills)
    cp.cuda.get_current_stream().synchronize()
    _, expected, _ = batch.tables.on_host()
    for field, table in zip(("row_idx", "row_w", "col_idx", "col_w"), expected, strict=True):
        first = int(batch.rec[field][0]) - device.data.ptr
        made = cp.asnumpy(device[first:first + table.nbytes]).view(table.dtype)
        np.testing.assert_array_equal(made, table, err_msg=field)
