"""GPU debayer / experimental.debayer: the bilinear rule (the default, bilinear_ocv, default_npp) on CuPy arrays;
OpenCV's other algorithms (edge-aware, VNG, gray), which DALI has on the CPU only, and 2-pixel-wide images through
the host."""

from __future__ import annotations

from headrace_kernels.cpu.debayer_ops import bilinear_debayer, debayer_setup, frames_and_args, opencv_debayer
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


def _one(raw, args: dict):
    cp = cupy()
    raw, blue, algorithm = debayer_setup(raw, args)
    if algorithm in ("bilinear_ocv", "default_npp") and min(raw.shape) >= 3:
        return bilinear_debayer(cp, raw, blue)
    return cp.asarray(opencv_debayer(cp.asnumpy(raw), blue, algorithm))


def _sample(sample, args: dict, layout: str):
    frames = [_one(frame, frame_args) for frame, frame_args in frames_and_args(sample, args, layout)]
    return frames[0] if not layout.startswith("F") else cupy().stack(frames)


@gpu_kernel("debayer", "experimental.debayer")
def debayer_kernel(batch):
    layout = batch.input_layouts[0] if batch.input_layouts else ""
    return None, [per_sample(i, _sample, raw, args, layout)
                  for i, (raw, args) in enumerate(zip(batch.samples(), batch.sample_args(), strict=True))]
