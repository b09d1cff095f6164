"""CPU kernels of io.file.read (a bounded read of the named file) and decoders.numpy (numpy's .npy header parser,
the data copied out of the input), with DALI's checks."""

from __future__ import annotations

import math

import numpy as np

from headrace_kernels.bounded_io import read_bounded
from headrace_kernels.cpu.convert import saturate_cast
from headrace_kernels.dtypes import dali_number, numpy_dtype
from headrace_kernels.npy_header import read_npy_header
from headrace_kernels.registry import cpu_kernel

MAX_FILE_BYTES = 1 << 31
"""The largest file io.file.read reads (as readers.file's largest sample)."""


def byte_input(data, op: str) -> bytes:
    """The bytes of a 1D uint8 (or int8) input."""
    array = np.asarray(data)
    if array.ndim != 1 or array.dtype not in (np.uint8, np.int8):
        raise ValueError(f"{op} needs a 1D uint8 array of bytes, got {array.dtype} of shape {array.shape}")
    return array.tobytes()


def file_path(data) -> str:
    """The path encoded in a 1D byte array (UTF-8, undecodable bytes kept as surrogates, as os functions take)."""
    raw = byte_input(data, "io.file.read")
    if not raw:
        raise ValueError("io.file.read got an empty file name")
    if b"\x00" in raw:
        raise ValueError(f"io.file.read: the file name {raw[:200]!r} contains a NUL byte")
    return raw.decode("utf-8", errors="surrogateescape")


@cpu_kernel("io.file.read")
def file_read(inputs, args, ctx):
    path = file_path(inputs[0])
    try:
        data = read_bounded(path, MAX_FILE_BYTES)
    except ValueError as exc:
        raise ValueError(f"io.file.read: file {path!r} {exc}") from None
    return np.frombuffer(data, dtype=np.uint8).copy()


def npy_header(raw: bytes) -> tuple[tuple[int, ...], np.dtype, bool, int]:
    """(shape, dtype, fortran order, data offset) of .npy bytes; ValueError saying what is wrong."""
    try:
        shape, dtype, fortran, offset = read_npy_header(raw)
    except ValueError as exc:
        raise ValueError(f"decoders.numpy: the input is not a readable .npy file ({exc})") from None
    if dtype.byteorder == ">" and dtype.itemsize > 1:
        raise ValueError("decoders.numpy: big-endian .npy data is not supported (as in DALI)")
    dtype = dtype.newbyteorder("=")
    try:
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
            raise TypeError
        dali_number(dtype)
    except TypeError:
        raise ValueError(f"decoders.numpy: element type {dtype} is not supported (numbers and bool only)") from None
    return shape, dtype, fortran, offset


def decode_npy(raw: bytes) -> np.ndarray:
    """The C-ordered array of .npy bytes (a copy), checked: the data must be exactly what the header says."""
    shape, dtype, fortran, offset = npy_header(raw)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_FILE_BYTES:
        raise ValueError(f"decoders.numpy: the array is {nbytes:,} bytes, more than a sample may have")
    if len(raw) - offset != nbytes:
        raise ValueError(f"decoders.numpy: the header says {nbytes:,} bytes of data, the input has "
                         f"{max(0, len(raw) - offset):,}")
    array = np.ndarray(shape, dtype, buffer=raw, offset=offset, order="F" if fortran else "C")
    return np.array(array, order="C")


@cpu_kernel("decoders.numpy")
def decode_numpy(inputs, args, ctx):
    array = decode_npy(byte_input(inputs[0], "decoders.numpy"))
    dtype = args.get("dtype")
    return array if dtype is None else saturate_cast(array, numpy_dtype(dtype))
