"""GPU audio_resample (kernels/audio_io.cu): the CPU kernel's resampler in one launch over the batch, on the CPU's
window table and in its float32 order, so the outputs equal the CPU kernel's (and DALI's CPU operator's). The
conversions into and out of the normalized float range are the CPU's too, as CuPy element-wise operations.
decoders.audio and readers.nemo_asr are CPU only, as in DALI."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.audio_io_ops import (
    MAX_OUTPUT_ELEMENTS,
    check_signal_shape,
    resample_output_type,
    resampled_length,
    resampling_rates,
    resampling_window,
)
from headrace_kernels.gpu.packing import blocks, contiguous_samples, per_sample, upload
from headrace_kernels.gpu.ragged import element_counts
from headrace_kernels.gpu.runtime import cupy, function
from headrace_kernels.registry import SampleFailureError, gpu_kernel

RECORD = np.dtype([("in", "<u8"), ("out", "<u8"), ("n_in", "<i8"), ("n_out", "<i8"), ("scale", "<f8"),
                   ("channels", "<i4"), ("pad", "<i4")], align=True)  # laid out as the C struct ResampleSample
assert RECORD.itemsize == 48, RECORD.itemsize
_THREADS = 256
_MAX_BLOCKS = 4096  # per sample; the kernel strides over longer outputs


def _to_unit_float(signal, out_dtype: np.dtype):
    """headrace_kernels.cpu.audio_io_ops.to_unit_float on a CuPy array."""
    cp = cupy()
    if signal.dtype.kind == "f":
        unit, signed_source = signal.astype(cp.float32, copy=False), True
    else:
        unit = signal.astype(cp.float32) * (np.float32(1.0) / np.float32(np.iinfo(signal.dtype).max))
        signed_source = signal.dtype.kind == "i"
    if out_dtype.kind == "u" and signed_source:
        return (unit + np.float32(1.0)) * np.float32(0.5)
    if out_dtype.kind != "u" and not signed_source:
        return unit * np.float32(2.0) - np.float32(1.0)
    return unit


def _from_unit_float(values, dtype: np.dtype):
    """headrace_kernels.cpu.audio_io_ops.from_unit_float on a CuPy float32 array: scaled in float32, rounded half
    away from zero (in float64), saturated."""
    cp = cupy()
    if dtype.kind == "f":
        return values.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    scaled = (values * np.float32(info.max)).astype(cp.float64)
    rounded = cp.where(scaled >= 0, cp.floor(scaled + 0.5), cp.ceil(scaled - 0.5))
    rounded = cp.nan_to_num(rounded, nan=0.0, posinf=float(info.max), neginf=float(info.min))
    return cp.clip(rounded, float(info.min), float(info.max)).astype(dtype)


def audio_resample(samples: list, args_list: list[dict], quality: float):
    """Every sample resampled with its own ratio; returns (dense or None, list) as the GPU stage expects."""
    cp = cupy()
    signals, in_dtype = contiguous_samples(samples, "audio_resample", ndims=(1, 2), convert=False)
    n = len(signals)
    if not n:
        return None, []
    out_dtype = per_sample(0, resample_output_type, in_dtype, args_list[0].get("dtype"))
    rec = np.zeros(n, RECORD)
    shapes, units = [], []
    for i, (signal, args) in enumerate(zip(signals, args_list, strict=True)):
        per_sample(i, check_signal_shape, tuple(signal.shape))
        in_rate, out_rate, out_length = per_sample(i, resampling_rates, args, signal.shape[0])
        n_out = out_length if out_length is not None else resampled_length(signal.shape[0], in_rate, out_rate)
        channels = signal.shape[1] if signal.ndim == 2 else 1
        if n_out * max(channels, 1) > MAX_OUTPUT_ELEMENTS:
            raise SampleFailureError(i, f"resampling {signal.shape[0]} samples would make {n_out}, more than the "
                                        f"limit of {MAX_OUTPUT_ELEMENTS} elements")
        units.append(_to_unit_float(signal, out_dtype))
        shapes.append((n_out, *signal.shape[1:]))
        rec["n_in"][i], rec["n_out"][i], rec["channels"][i] = signal.shape[0], n_out, channels
        rec["scale"][i] = in_rate / out_rate if out_rate > 0 else 0.0
    sizes = element_counts(shapes)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    flat = cp.zeros(int(offsets[-1]), dtype=cp.float32)
    rec["in"] = [u.data.ptr for u in units]
    rec["out"] = flat.data.ptr + offsets[:-1] * 4
    if sizes.max() > 0:
        table, lobes, wscale, wcenter = resampling_window(float(quality))
        launch = function("audio_io.cu", "resample")
        grid = (min(blocks(sizes.max(), _THREADS), _MAX_BLOCKS), n, 1)
        window = cp.asarray(table)  # the CPU's table (16 KB at most), uploaded with the batch's records
        launch(grid, (_THREADS, 1, 1), (upload(rec), window, np.int32(lobes), np.float32(wscale),
                                        np.float32(wcenter)))
    flat = _from_unit_float(flat, out_dtype)
    if len(set(shapes)) == 1:
        return flat.reshape((n, *shapes[0])), None
    return None, [flat[int(offsets[i]):int(offsets[i + 1])].reshape(shapes[i]) for i in range(n)]


@gpu_kernel("audio_resample")
def audio_resample_kernel(batch):
    return audio_resample(batch.samples(), batch.sample_args(), batch.args["quality"])
