"""GPU kernels of the user-function ops: the function gets CuPy arrays (python_function) or DLPack capsules
(dl_tensor_python_function) on the pipeline's stream; numba_function's run_fn is a numba.cuda kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from headrace_kernels.cpu.custom_ops import check_numba_inputs, from_dlpack_any, output_shapes, run_function
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import GpuBatch, gpu_kernel


def _columns(batch: GpuBatch) -> list[list]:
    """The batch as run_function takes it: per sample, its inputs."""
    inputs = [batch.samples(k) for k in range(batch.num_inputs())]
    return [[column[i] for column in inputs] for i in range(batch.size)]


def _by_output(rows: list, count: int) -> list:
    """run_function's per-sample rows as the GPU stage takes several outputs: one list of samples per output."""
    if count == 1:
        return rows
    return [[row[k] for row in rows] for k in range(count)]


@gpu_kernel("python_function")
def python_function(batch: GpuBatch) -> Any:
    cp, args = cupy(), batch.args
    with batch.active():
        rows = run_function(args["function"], _columns(batch), args["num_outputs"], args["batch_processing"],
                            lambda arrays: arrays, cp.asarray)
    return _by_output(rows, args["num_outputs"])


@gpu_kernel("dl_tensor_python_function")
def dl_tensor_python_function(batch: GpuBatch) -> Any:
    cp, args = cupy(), batch.args
    device = (2, batch.device_id)  # kDLCUDA
    if args["synchronize_stream"]:
        batch.stream.synchronize()
    with batch.active():
        rows = run_function(args["function"], _columns(batch), args["num_outputs"], args["batch_processing"],
                            lambda arrays: [cp.ascontiguousarray(a).toDlpack() for a in arrays],
                            lambda value: from_dlpack_any(value, cp.from_dlpack, device))
    return _by_output(rows, args["num_outputs"])


@gpu_kernel("experimental.numba_function")
class NumbaFunction:
    """numba_function on the GPU: `run_fn` compiled by numba.cuda once per node and launched per sample (or once
    per batch with `batch_processing`) on the pipeline's stream; output shapes from the CPU's setup_fn rule."""

    def __init__(self, setup: Any):
        args = setup.args
        if args["blocks"] is None or args["threads_per_block"] is None:
            raise ValueError("experimental.numba_function on the GPU needs `blocks` and `threads_per_block`")
        if args["batch_processing"]:
            raise ValueError("experimental.numba_function on the GPU runs per sample (batch_processing=False)")
        try:
            from numba import cuda
        except ImportError as exc:  # numba without its CUDA target
            raise ValueError(f"experimental.numba_function on the GPU needs numba's CUDA target: {exc}") from None
        self.cuda = cuda
        self.kernel = cuda.jit(args["run_fn"])
        self.launch = (tuple(args["blocks"]), tuple(args["threads_per_block"]))

    def run(self, batch: GpuBatch) -> Any:
        cp, args = cupy(), batch.args
        columns = _columns(batch)
        host_view = [[_Shape(a) for a in row] for row in columns]
        check_numba_inputs(host_view, args)
        shapes = output_shapes(host_view, args)
        with batch.active():
            outputs = [[cp.zeros(shape, numpy_dtype(t)) for shape in per_sample]
                       for per_sample, t in zip(shapes, args["out_types"], strict=True)]
            stream = self.cuda.external_stream(batch.stream.ptr)
            blocks, threads = self.launch
            for i, row in enumerate(columns):
                arrays = [self.cuda.as_cuda_array(o[i]) for o in outputs] + \
                    [self.cuda.as_cuda_array(cp.ascontiguousarray(a)) for a in row]
                self.kernel[blocks, threads, stream](*arrays)
        return _by_output([outputs[0][i] if len(outputs) == 1 else tuple(o[i] for o in outputs)
                           for i in range(batch.size)], len(outputs))


class _Shape:
    """What the CPU's shape checks read of a GPU sample: dtype, ndim, shape."""

    def __init__(self, array: Any):
        self.dtype, self.ndim, self.shape = np.dtype(array.dtype), array.ndim, tuple(array.shape)

