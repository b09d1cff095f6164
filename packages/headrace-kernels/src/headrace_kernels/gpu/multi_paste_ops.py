"""GPU multi_paste: the CPU kernel's paste plan per output sample (from the samples' shapes only), then CuPy slice
copies onto a zero canvas, converted as the CPU kernel converts."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.multi_paste_ops import canvas_size, channels_of, check_hwc, paste_plan, sources_of
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.gpu.coordinates_ops import saturate_cast_gpu
from headrace_kernels.gpu.packing import per_sample
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import SampleFailureError, gpu_kernel


@gpu_kernel("multi_paste")
def multi_paste_kernel(batch):
    cp = cupy()
    num_inputs = batch.num_inputs()
    columns = [batch.samples(k) for k in range(num_inputs)]
    images = {(k, i): columns[k][i] for k in range(num_inputs) for i in range(batch.size)}
    shapes = {key: tuple(image.shape) for key, image in images.items()}
    try:
        check_hwc(shapes)
    except ValueError as exc:
        raise SampleFailureError(0, str(exc)) from None
    out = []
    for i, args in enumerate(batch.sample_args()):
        sources = per_sample(i, sources_of, i, args, num_inputs, batch.size)
        canvas = per_sample(i, canvas_size, i, args, shapes)
        regions = per_sample(i, paste_plan, i, args, sources, shapes, canvas)
        channels = per_sample(i, channels_of, i, regions, shapes)
        source_dtype = np.dtype(images[(0, i)].dtype)
        dtype = source_dtype if args.get("dtype") is None else numpy_dtype(args["dtype"])
        work = dtype if dtype == source_dtype else np.dtype(np.float64)
        result = cp.zeros((*canvas, channels), dtype=work)
        for r in regions:
            result[r.out_y:r.out_y + r.height, r.out_x:r.out_x + r.width] = \
                images[r.source][r.in_y:r.in_y + r.height, r.in_x:r.in_x + r.width]
        out.append(result if work == dtype else saturate_cast_gpu(result, dtype))
    return None, out
