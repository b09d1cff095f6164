"""GPU experimental.warp_perspective: the CPU kernel's geometry (matrix in OpenCV's centred coordinates, output size,
fill per channel), then one elementwise CuPy kernel per sample that maps every output element through the matrix and
samples the float32 input (nearest, bilinear or OpenCV's cubic, A = -0.75) with OpenCV's border rules."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from headrace_kernels.cpu.perspective_ops import checked_image, fill_values, perspective_geometry
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel

BORDER_CODES = {"constant": 0, "replicate": 1, "reflect": 2, "reflect_101": 3, "wrap": 4}

_PREAMBLE = r"""
__device__ int hr_border_index(long long p, int len, int border) {
    if (p >= 0 && p < len) return (int)p;
    if (border == 0) return -1;
    if (border == 1) return p < 0 ? 0 : len - 1;
    if (border == 4) { long long q = p % len; return (int)(q < 0 ? q + len : q); }
    if (len == 1) return 0;
    const long long period = border == 2 ? 2LL * len : 2LL * (len - 1);  // reflect (cba|abc), reflect_101 (cb|abc)
    long long q = p % period;
    if (q < 0) q += period;
    if (q >= len) q = border == 2 ? period - 1 - q : period - q;
    return (int)q;
}

__device__ float hr_sample(const float* src, long long x, long long y, int h, int w, int channels, int c, int border,
                        float fill) {
    const int ix = hr_border_index(x, w, border), iy = hr_border_index(y, h, border);
    return (ix < 0 || iy < 0) ? fill : src[((long long)iy * w + ix) * channels + c];
}

__device__ void hr_cubic_weights(float x, float* k) {
    const float A = -0.75f;
    k[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
    k[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    k[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
    k[3] = 1.f - k[0] - k[1] - k[2];
}
"""

_OPERATION = r"""
const int c = i % channels;
const int x = (int)((i / channels) % out_w);
const int y = (int)(i / ((long long)channels * out_w));
const double X = m[0] * x + m[1] * y + m[2];
const double Y = m[3] * x + m[4] * y + m[5];
double W = m[6] * x + m[7] * y + m[8];
W = W != 0 ? 1.0 / W : 0.0;
const double limit = 1e9;
const double sx = fmin(fmax(X * W, -limit), limit), sy = fmin(fmax(Y * W, -limit), limit);
const float fill = fills[c];
if (interp == 0) {
    out = hr_sample(&src[0], (long long)rint(sx), (long long)rint(sy), in_h, in_w, channels, c, border, fill);
} else if (interp == 1) {
    const long long x0 = (long long)floor(sx), y0 = (long long)floor(sy);
    const float ax = (float)(sx - x0), ay = (float)(sy - y0);
    float acc = 0.f;
    for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
            const float weight = (dy ? ay : 1.f - ay) * (dx ? ax : 1.f - ax);
            acc += weight * hr_sample(&src[0], x0 + dx, y0 + dy, in_h, in_w, channels, c, border, fill);
        }
    }
    out = acc;
} else {
    const long long x0 = (long long)floor(sx) - 1, y0 = (long long)floor(sy) - 1;
    float kx[4], ky[4];
    hr_cubic_weights((float)(sx - (x0 + 1)), kx);
    hr_cubic_weights((float)(sy - (y0 + 1)), ky);
    float acc = 0.f;
    for (int dy = 0; dy < 4; ++dy) {
        float row = 0.f;
        for (int dx = 0; dx < 4; ++dx) {
            row += kx[dx] * hr_sample(&src[0], x0 + dx, y0 + dy, in_h, in_w, channels, c, border, fill);
        }
        acc += ky[dy] * row;
    }
    out = acc;
}
"""


@functools.cache
def _warp():
    return cupy().ElementwiseKernel(
        "raw float32 src, raw float64 m, raw float32 fills, int32 in_h, int32 in_w, int32 out_w, int32 channels, "
        "int32 interp, int32 border",
        "float32 out", _OPERATION, "headrace_warp_perspective", preamble=_PREAMBLE)


def to_type_gpu(values: Any, dtype: np.dtype) -> Any:
    """float32 results into the input's type as the CPU kernel's to_type: round half to even, clamp."""
    cp = cupy()
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return cp.clip(cp.rint(values.astype(cp.float64)), info.min, info.max).astype(dtype)


@gpu_kernel("experimental.warp_perspective")
def warp_perspective(batch):
    cp = cupy()
    images = batch.samples(0)
    matrices = batch.samples(1) if batch.num_inputs() > 1 else None
    out = []
    for i, args in enumerate(batch.sample_args()):
        image = per_sample(i, checked_image, images[i])
        matrix = None if matrices is None else cp.asnumpy(matrices[i])
        m, out_h, out_w = per_sample(i, perspective_geometry, image.shape[0], image.shape[1], args, matrix)
        channels = 1 if image.ndim == 2 else image.shape[2]
        fill = per_sample(i, fill_values, args, channels)
        result = cp.empty((out_h, out_w) + tuple(image.shape[2:]), dtype=cp.float32)
        source = cp.ascontiguousarray(image.astype(cp.float32))
        _warp()(source, cp.asarray(m.ravel(), dtype=cp.float64), cp.asarray(fill, dtype=cp.float32),
                np.int32(image.shape[0]), np.int32(image.shape[1]), np.int32(out_w), np.int32(channels),
                np.int32(int(args["interp_type"])), np.int32(BORDER_CODES[args["border_mode"]]), result)
        out.append(to_type_gpu(result, image.dtype))
    return None, out
