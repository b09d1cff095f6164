"""What the batch kernels of filter.cu, color.cu, warp.cu and region.cu share on the host: contiguous inputs of
one element type, one output buffer for a whole batch (a dense (N, ...) array when the shapes agree), and the
per-sample records uploaded in one copy."""

from __future__ import annotations

import numpy as np

from headrace_kernels.dtypes import CTYPES
from headrace_kernels.gpu.ragged import PackedSamples, element_counts
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import SampleFailureError

# Element types the arithmetic kernels read directly; other inputs are converted to float32 on the GPU first, as
# the CPU kernels convert them (exactly for 8/16-bit integers and float16).
KERNEL_INPUTS = ("uint8", "float32")
_KERNEL_INPUT_DTYPES = frozenset(np.dtype(name) for name in KERNEL_INPUTS)  # dtype `.name` is a slow property
# Element types the arithmetic kernels write directly; other float outputs are written as float32 and converted.
KERNEL_OUTPUTS = {name: CTYPES[name] for name in ("uint8", "int8", "uint16", "int16", "int32", "float32")}
# For the copying kernels: an unsigned type of each element size.
BITS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


def kernel_expressions(kernel: str) -> tuple[str, ...]:
    """The template instances of an arithmetic `kernel<InT, OutT>` to compile."""
    return tuple(f"{kernel}<{CTYPES[i]}, {CTYPES[o]}>" for i in KERNEL_INPUTS for o in KERNEL_OUTPUTS)


def contiguous_samples(samples: list, op: str, ndims: tuple[int, ...] | None = None,
                       convert: bool = True) -> tuple[list, np.dtype]:
    """The samples as C-contiguous device arrays, checked for dimensions, of one element type (returned: the
    type they came in); with `convert`, types the kernels do not read become float32."""
    cp = cupy()
    types = {s.dtype for s in samples}
    if len(types) > 1:
        raise SampleFailureError(0, f"{op} on the GPU needs one element type per batch, got "
                                    f"{sorted(np.dtype(t).name for t in types)}")
    dtype = np.dtype(types.pop()) if types else np.dtype(np.float32)
    to_float = convert and dtype not in _KERNEL_INPUT_DTYPES
    out = []
    for i, sample in enumerate(samples):
        if ndims is not None and sample.ndim not in ndims:
            raise SampleFailureError(i, f"{op} expects samples with {' or '.join(map(str, ndims))} dimensions, got "
                                        f"shape {tuple(sample.shape)}")
        if to_float:
            sample = sample.astype(cp.float32)
        out.append(sample if sample.flags.c_contiguous else cp.ascontiguousarray(sample))
    return out, dtype


def output_type(dtype: np.dtype, op: str) -> tuple[np.dtype, np.dtype]:
    """(type the kernel writes, type of the op's output)."""
    dtype = np.dtype(dtype)
    if dtype.name in KERNEL_OUTPUTS:
        return dtype, dtype
    if dtype.kind == "f":
        return np.dtype(np.float32), dtype
    raise SampleFailureError(0, f"{op} on the GPU cannot produce {dtype} outputs (supported: "
                                f"{', '.join(KERNEL_OUTPUTS)}, float16, float64)")


class Outputs:
    """One device buffer holding every output sample of a launch, in `shapes`."""

    def __init__(self, shapes: list[tuple[int, ...]], dtype: np.dtype):
        cp = cupy()
        plain: dict = {}  # each distinct shape converted once (a dense batch repeats one)
        self.shapes = [plain.get(s) or plain.setdefault(s, tuple(int(d) for d in s)) for s in map(tuple, shapes)]
        self.dtype = np.dtype(dtype)
        sizes = element_counts(self.shapes)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.flat = cp.empty(int(self.offsets[-1]), dtype=self.dtype)
        self.pointers = (self.flat.data.ptr + self.offsets[:-1] * self.dtype.itemsize).astype(np.uint64)

    def result(self, final_dtype: np.dtype | None = None):
        """(dense, None) when every sample has one shape, else (None, PackedSamples of the buffer); converted to
        `final_dtype` when the kernel wrote another type."""
        n = len(self.shapes)
        flat = self.flat
        if final_dtype is not None and np.dtype(final_dtype) != self.dtype:
            flat = flat.astype(final_dtype)  # float32 to float16: round to nearest even, inf beyond, as numpy
        if n and len(set(self.shapes)) == 1:
            return flat.reshape((n, *self.shapes[0])), None
        return None, PackedSamples(flat, self.offsets[:-1], self.shapes)


def upload(records: np.ndarray):
    """Structured host records as device bytes (one copy)."""
    return cupy().asarray(records.view(np.uint8))


def per_sample(index: int, call, *args):
    """call(*args), its ValueError / TypeError turned into a SampleFailureError naming sample `index`."""
    try:
        return call(*args)
    except (ValueError, TypeError) as exc:
        raise SampleFailureError(index, str(exc)) from None


def sample_args(literal: dict, columns: dict[str, list], size: int) -> list[dict]:
    """Each sample's arguments from the op's literal ones and its argument inputs' columns (one value per sample):
    one shared dict where there are no argument inputs (GpuBatchView.sample_args, and the plan helper from the same
    columns)."""
    if not columns:
        return [literal] * size
    out = [dict(literal) for _ in range(size)]
    for name, values in columns.items():
        for sample, value in zip(out, values, strict=True):
            sample[name] = value
    return out


def blocks(count: int, size: int) -> int:
    return max(1, -(-int(count) // size))
