"""headrace's GPU image adjustments beside their CPU twins and, where installed, torchvision's GPU functionals, in
one process on the same batch: milliseconds per batch of the op alone, and the ratios. On the GPU the batch comes
from a `types.Constant` (a device-to-device copy per batch, so no upload is timed), on the CPU from an external
source; a pipeline of the source alone is timed on each device and subtracted.

    python benchmarks/gpu_image_ops.py [--batch-size 64] [--height 480] [--width 640] [--iters 10] [--threads 8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from headrace import Pipeline, fn, types


def _ops() -> dict:
    return {
        "gaussian_blur w=9": lambda d: fn.gaussian_blur(d, window_size=9),
        "gaussian_blur w=31": lambda d: fn.gaussian_blur(d, window_size=31),
        "hsv": lambda d: fn.hsv(d, hue=30.0, saturation=1.2, value=0.9),
        "brightness_contrast": lambda d: fn.brightness_contrast(d, brightness=1.2, contrast=0.8),
        "color_twist": lambda d: fn.color_twist(d, brightness=1.1, contrast=0.9, hue=20.0, saturation=1.3),
        "rotate 30 linear": lambda d: fn.rotate(d, angle=30.0, fill_value=0.0),
        "warp_affine linear": lambda d: fn.warp_affine(d, matrix=[0.9, 0.1, 5.0, -0.1, 0.9, 3.0]),
        "erase 4 regions": lambda d: fn.erase(d, anchor=[10, 10, 50, 50, 100, 100, 200, 300],
                                              shape=[40, 40, 40, 40, 60, 60, 80, 80], fill_value=[0, 0, 0]),
        "paste ratio 2": lambda d: fn.paste(d, ratio=2.0, fill_value=[0, 0, 0]),
    }


def _torchvision_ops():
    try:
        import torch
        import torchvision.transforms.v2.functional as tvf
    except ImportError:
        return None, {}
    return torch, {
        "gaussian_blur w=9": lambda t: tvf.gaussian_blur(t, [9, 9]),
        "gaussian_blur w=31": lambda t: tvf.gaussian_blur(t, [31, 31]),
        "hsv": lambda t: tvf.adjust_saturation(tvf.adjust_hue(t, 30 / 360), 1.2),
        "brightness_contrast": lambda t: tvf.adjust_contrast(tvf.adjust_brightness(t, 1.2), 0.8),
        "rotate 30 linear": lambda t: tvf.rotate(t, 30.0, interpolation=tvf.InterpolationMode.BILINEAR, expand=True),
        "warp_affine linear": lambda t: tvf.affine(t, angle=5.0, translate=[5, 3], scale=0.9, shear=[0.0, 0.0],
                                                   interpolation=tvf.InterpolationMode.BILINEAR),
        "erase 4 regions": lambda t: _erase4(tvf, t, torch.zeros((), dtype=t.dtype, device=t.device)),
        "paste ratio 2": lambda t: tvf.pad(t, [t.shape[-1] // 2, t.shape[-2] // 2]),
    }


def _erase4(tvf, t, zero):
    for i, j, h, w in ((10, 10, 40, 40), (50, 50, 40, 40), (100, 100, 60, 60), (200, 300, 80, 80)):
        t = tvf.erase(t, i, j, h, w, zero)
    return t


def _time_pipeline(image: np.ndarray, batch_size: int, op, device: str, iters: int, threads: int) -> float:
    """Milliseconds per batch of `batch_size` copies of `image` -> op on `device`, after a warm-up batch."""
    pipe = Pipeline(batch_size=batch_size, num_threads=threads, device_id=0, seed=1)
    batch = [image] * batch_size
    with pipe:
        # the CPU's Constant rebuilds its samples every batch (1.8 s for 64 of these): the host feeds them instead
        data = types.Constant(image, device=device) if device == "gpu" else fn.external_source(source=lambda: batch)
        pipe.set_outputs(op(data) if op is not None else data)
    (out,) = pipe.run()
    if device == "gpu":
        out.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        (out,) = pipe.run()
        if device == "gpu":
            out.synchronize()
    elapsed = (time.perf_counter() - start) / iters * 1000
    pipe.close()
    return elapsed


def _time_torch(torch, tensor, op, iters: int) -> float:
    for _ in range(2):
        op(tensor)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        op(tensor)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    from headrace.data.synthetic import synthetic_image

    rng = np.random.default_rng(0)
    image = synthetic_image(rng, args.height, args.width)
    torch, tv_ops = _torchvision_ops()
    tensor = None
    if torch is not None:
        batch = np.broadcast_to(image, (args.batch_size, *image.shape))
        tensor = torch.from_numpy(np.ascontiguousarray(batch)).permute(0, 3, 1, 2).contiguous().cuda()
    n = args.batch_size
    base_gpu = _time_pipeline(image, n, None, "gpu", args.iters, args.threads)
    base_cpu = _time_pipeline(image, n, None, "cpu", args.iters, args.threads)
    print(f"batch {n} x {args.height}x{args.width}x3 uint8; source-only pipeline: GPU {base_gpu:.2f} ms, "
          f"CPU {base_cpu:.2f} ms (subtracted below)")
    print(f"{'op':24s} {'headrace GPU ms':>16s} {'headrace CPU ms':>16s} {'CPU/GPU':>8s} {'torchvision GPU ms':>19s} "
          f"{'tv/headrace':>11s}")
    for name, op in _ops().items():
        gpu_ms = max(_time_pipeline(image, n, op, "gpu", args.iters, args.threads) - base_gpu, 1e-3)
        cpu_ms = max(_time_pipeline(image, n, op, "cpu", 2, args.threads) - base_cpu, 1e-3)
        tv = tv_ops.get(name)
        tv_ms = _time_torch(torch, tensor, tv, args.iters) if tv is not None else float("nan")
        print(f"{name:24s} {gpu_ms:16.2f} {cpu_ms:16.2f} {cpu_ms / gpu_ms:8.1f} {tv_ms:19.2f} {tv_ms / gpu_ms:11.2f}")


if __name__ == "__main__":
    main()
