"""CPU kernel of coord_transform: float32 out = M @ in + T over the innermost axis, converted as DALI's ConvertSat.
The matrix resolution (`affine_parts`) is shared with the GPU kernel."""

from __future__ import annotations

import numpy as np

from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import numpy_dtype
from headrace_kernels.registry import cpu_kernel


def _flat(args: dict, name: str) -> np.ndarray | None:
    value = args.get(name)
    return None if value is None else np.asarray(value, dtype=np.float64).ravel()


def affine_parts(args: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(M of m x n, T of m) from the arguments M, T or MT for n-component input vectors."""
    fused = _flat(args, "MT")
    if fused is not None:
        if fused.size == 1:
            return np.eye(n) * fused[0], np.zeros(n)
        if fused.size % (n + 1):
            raise ValueError(f"argument 'MT' has {fused.size} values, not a multiple of {n + 1} (n + 1 columns for "
                             f"{n}-component input vectors)")
        block = fused.reshape(-1, n + 1)
        return block[:, :n], block[:, n]
    matrix, shift = _flat(args, "M"), _flat(args, "T")
    if matrix is None:
        matrix = np.eye(n)
    elif matrix.size == 1:
        matrix = np.eye(n) * matrix[0]
    elif matrix.size % n:
        raise ValueError(f"argument 'M' has {matrix.size} values, not a multiple of {n} (the input vectors' "
                         "components)")
    else:
        matrix = matrix.reshape(-1, n)
    m = matrix.shape[0]
    if shift is None:
        shift = np.zeros(m)
    elif shift.size == 1:
        shift = np.full(m, shift[0])
    elif shift.size != m:
        raise ValueError(f"argument 'T' needs 1 or {m} values (the rows of M), got {shift.size}")
    return matrix, shift


def output_dtype(args: dict, source: np.dtype) -> np.dtype:
    """The output element type: `dtype`, which must be float32 or the input's type."""
    dtype = numpy_dtype(args["dtype"]) if args.get("dtype") is not None else np.dtype(np.float32)
    if dtype != np.float32 and dtype != source:
        raise ValueError(f"argument 'dtype' must be FLOAT or the input's type ({source}), got {dtype}")
    return dtype


def check_points(shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse an input without an innermost axis of vectors (2 dimensions or more) or of a non-numeric type."""
    if len(shape) < 2:
        raise ValueError(f"coord_transform expects vectors along the innermost axis of 2 or more dimensions, got "
                         f"shape {tuple(shape)}")
    if np.dtype(dtype).kind not in "iuf":
        raise ValueError(f"coord_transform expects numeric input, got {dtype}")


@cpu_kernel("coord_transform")
def coord_transform(inputs, args, ctx):
    points = np.asarray(inputs[0])
    check_points(points.shape, points.dtype)
    dtype = output_dtype(args, points.dtype)
    matrix, shift = affine_parts(args, points.shape[-1])
    flat = points.reshape(-1, points.shape[-1]).astype(np.float32)
    out = flat @ matrix.T.astype(np.float32) + shift.astype(np.float32)
    return saturate_cast(out.reshape((*points.shape[:-1], matrix.shape[0])), dtype)
