"""GPU spectrogram, mel_filter_bank, to_decibels and mfcc (kernels/spectral.cu, cuFFT through cupy.fft): one launch
per step for the whole batch of differently sized samples, with the CPU kernels' tables (cpu/spectral_ops.py).

The spectrogram's windows of all samples are the rows of one frames matrix, transformed by one batched cuFFT plan
in float32 (DALI's GPU operator does the same); the row count is rounded up to one of 8 sizes per power of two, so
that cupy's plan cache sees few distinct plans."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.spectral_ops import (
    checked_window_count,
    decibel_params,
    frequency_axis,
    inverse_reference,
    mel_filters,
    mel_params,
    mfcc_tables,
    spectrogram_setup,
)
from headrace_kernels.gpu.memory import large_size
from headrace_kernels.gpu.packing import Outputs, blocks, contiguous_samples, per_sample, upload
from headrace_kernels.gpu.runtime import cupy, function
from headrace_kernels.registry import SampleFailureError, gpu_kernel

WINDOW_SAMPLE = np.dtype([("in", "<u8"), ("out", "<u8"), ("length", "<i8"), ("windows", "<i8"), ("row", "<i8")],
                         align=True)
MATRIX_SAMPLE = np.dtype([("in", "<u8"), ("out", "<u8"), ("table", "<u8"), ("bounds", "<u8"), ("scale", "<u8"),
                          ("outer", "<i8"), ("inner", "<i8"), ("n", "<i4"), ("rows", "<i4")], align=True)
DECIBEL_SAMPLE = np.dtype([("in", "<u8"), ("out", "<u8"), ("size", "<i8")], align=True)
assert (WINDOW_SAMPLE.itemsize, MATRIX_SAMPLE.itemsize, DECIBEL_SAMPLE.itemsize) == (40, 64, 24)
MAX_GRID_Y = 65535
MAX_TABLES = 64  # tables kept on the device per node (by input extent)


def float32_samples(samples: list, op: str) -> list:
    """The samples as contiguous float32 device arrays; DALI's ops take float data only."""
    arrays, dtype = contiguous_samples(samples, op, convert=False)
    if arrays and np.dtype(dtype).kind != "f":
        raise SampleFailureError(0, f"{op} needs float32 data, got {np.dtype(dtype)}")
    return [a if a.dtype == np.float32 else a.astype(np.float32) for a in arrays]


def _signal_length(sample) -> int:
    """The length of a 1D signal, or (n,)-like shapes with all extents but one equal to 1 (DALI's rule)."""
    if sample.ndim > 1 and sum(extent != 1 for extent in sample.shape) > 1:
        raise ValueError(f"spectrogram needs a 1D signal (or all extents but one equal to 1), got shape "
                         f"{tuple(sample.shape)}")
    return int(sample.size)


def plan_rows(rows: int) -> int:
    """A frames matrix height of at least `rows`, one of 8 per power of two (few distinct cuFFT plans)."""
    return large_size(max(rows, 1))


def apply_rows(inputs: list, axes: list[int], tables: list[tuple]):
    """Each (device table, bounds, scale or None) of `tables` applied along axes[i] of inputs[i]: one launch.
    Returns (dense or None, list) as the GPU stage expects."""
    n = len(inputs)
    rec = np.zeros(n, MATRIX_SAMPLE)
    shapes = []
    for i, (data, axis, (table, bounds, scale)) in enumerate(zip(inputs, axes, tables, strict=True)):
        shape = tuple(int(d) for d in data.shape)
        rows = int(table.shape[0])
        shapes.append((*shape[:axis], rows, *shape[axis + 1:]))
        rec["in"][i], rec["table"][i], rec["bounds"][i] = data.data.ptr, table.data.ptr, bounds.data.ptr
        rec["scale"][i] = 0 if scale is None else scale.data.ptr
        rec["outer"][i] = int(np.prod(shape[:axis], dtype=np.int64))
        rec["inner"][i] = int(np.prod(shape[axis + 1:], dtype=np.int64))
        rec["n"][i], rec["rows"][i] = shape[axis], rows
    outputs = Outputs(shapes, np.dtype(np.float32))
    rec["out"] = outputs.pointers
    totals = rec["outer"] * rec["rows"] * rec["inner"]
    if n and totals.max() > 0:
        grid = (min(blocks(totals.max(), 256), 1 << 16), n, 1)
        function("spectral.cu", "apply_rows")(grid, (256, 1, 1), (upload(rec),))
    return outputs.result()


@gpu_kernel("spectrogram")
class SpectrogramKernel:
    """Windows of every sample into one frames matrix, one batched rfft, |X|^power into each output."""

    def __init__(self, setup):
        self.args = setup.args
        self._window = None  # (host window, device window)

    def _device_window(self, window: np.ndarray):
        if self._window is None or not np.array_equal(self._window[0], window):
            self._window = (window, cupy().asarray(window))
        return self._window[1]

    def run(self, batch):
        cp = cupy()
        args = self.args
        nfft, length, step, window = per_sample(0, spectrogram_setup, args)
        signals = float32_samples(batch.samples(), "spectrogram")
        n = len(signals)
        centered = bool(args["center_windows"])
        rec = np.zeros(n, WINDOW_SAMPLE)
        for i, signal in enumerate(signals):
            rec["length"][i] = per_sample(i, _signal_length, signal)
            rec["windows"][i] = per_sample(i, checked_window_count, int(rec["length"][i]), length, step, centered)
        rec["row"] = np.concatenate([[0], np.cumsum(rec["windows"])[:-1]]) if n else []
        rec["in"] = [signal.data.ptr for signal in signals]
        bins, ft = nfft // 2 + 1, args["layout"] == "ft"
        outputs = Outputs([(bins, int(w)) if ft else (int(w), bins) for w in rec["windows"]], np.dtype(np.float32))
        rec["out"] = outputs.pointers
        if not n:
            return outputs.result()
        total, most = int(rec["windows"].sum()), int(rec["windows"].max())
        frames = cp.empty((plan_rows(total), nfft), dtype=cp.float32)
        frames[total:] = 0
        records = upload(rec)
        offset = length // 2 if centered else 0
        reflect = centered and bool(args["reflect_padding"])
        function("spectral.cu", "extract_windows")(
            (blocks(nfft, 256), min(most, MAX_GRID_Y), n), (256, 1, 1),
            (records, self._device_window(window), frames, np.int32(length), np.int32(nfft), np.int32(step),
             np.int32(offset), np.int32(reflect)))
        spectrum = cp.fft.rfft(frames, axis=1)  # complex64 (rows, bins): one cuFFT R2C plan
        del frames
        power = np.int32(args["power"])
        if ft:
            grid = (blocks(most, 32), min(blocks(bins, 32), MAX_GRID_Y), n)
            function("spectral.cu", "spectrum_ft")(grid, (32, 8, 1), (records, spectrum, np.int32(bins), power))
        else:
            grid = (blocks(bins, 32), min(blocks(most, 8), MAX_GRID_Y), n)
            function("spectral.cu", "spectrum_tf")(grid, (32, 8, 1), (records, spectrum, np.int32(bins), power))
        return outputs.result()


class _TableKernel:
    """A kernel applying a per-extent table along one axis; the device tables are kept by extent."""

    def __init__(self, setup):
        self.args = setup.args
        self._tables: dict = {}

    def tables_for(self, key, make):
        """The device (table, bounds, scale) of `key`, made by make() -> ((host table, bounds), scale or None)."""
        found = self._tables.get(key)
        if found is None:
            if len(self._tables) >= MAX_TABLES:
                self._tables.clear()
            (table, bounds), scale = make()
            cp = cupy()
            found = (cp.asarray(table), cp.asarray(bounds), None if scale is None else cp.asarray(scale))
            self._tables[key] = found
        return found

    def release(self) -> None:
        self._tables.clear()


@gpu_kernel("mel_filter_bank")
class MelFilterBankKernel(_TableKernel):
    """The CPU kernel's filter bank, each filter summed over its own band of bins only."""

    def run(self, batch):
        params = per_sample(0, mel_params, self.args)
        inputs = float32_samples(batch.samples(), "mel_filter_bank")
        axes, tables = [], []
        for i, data in enumerate(inputs):
            axis = per_sample(i, frequency_axis, self.args, data.ndim)
            bins = int(data.shape[axis])
            axes.append(axis)
            tables.append(self.tables_for(bins, lambda bins=bins: (mel_filters(bins, *params), None)))
        return apply_rows(inputs, axes, tables)


@gpu_kernel("mfcc")
class MfccKernel(_TableKernel):
    """The CPU kernel's DCT table along `axis`, then the lifter as a per-row scale."""

    def run(self, batch):
        inputs = float32_samples(batch.samples(), "mfcc")
        axes, tables = [], []
        for i, data in enumerate(inputs):
            shape = tuple(int(d) for d in data.shape)
            axis, table, lifter = per_sample(i, mfcc_tables, shape, self.args)
            axes.append(axis)
            tables.append(self.tables_for(shape[axis], lambda table=table, lifter=lifter: (table, lifter)))
        return apply_rows(inputs, axes, tables)


@gpu_kernel("to_decibels")
def to_decibels_kernel(batch):
    """Per-sample references (one block per sample) when none is given, then the decibels of every element."""
    cp = cupy()
    scale, min_ratio, reference = per_sample(0, decibel_params, batch.args)
    inputs = float32_samples(batch.samples(), "to_decibels")
    n = len(inputs)
    outputs = Outputs([tuple(a.shape) for a in inputs], np.dtype(np.float32))
    if not n:
        return outputs.result()
    rec = np.zeros(n, DECIBEL_SAMPLE)
    rec["in"] = [a.data.ptr for a in inputs]
    rec["out"] = outputs.pointers
    rec["size"] = [a.size for a in inputs]
    records = upload(rec)
    if reference is None:
        inverse = cp.empty(n, dtype=cp.float32)
        function("spectral.cu", "sample_inverse_reference")((n, 1, 1), (256, 1, 1), (records, inverse))
    else:
        inverse = cp.full(n, inverse_reference(reference), dtype=cp.float32)
    if rec["size"].max() > 0:
        grid = (min(blocks(rec["size"].max(), 256), 1 << 16), n, 1)
        function("spectral.cu", "decibels")(grid, (256, 1, 1), (records, inverse, np.float32(scale),
                                                                  np.float32(min_ratio)))
    return outputs.result()
