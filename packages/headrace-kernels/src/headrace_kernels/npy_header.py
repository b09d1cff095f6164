"""The header of a .npy file through numpy's own parser, one at a time: numpy reads the header's dict with
ast.literal_eval, and CPython 3.11's compiler is not safe to run in several threads at once (intermittent 'AST
constructor recursion depth mismatch', CPython gh-106905). readers.numpy and decoders.numpy share it."""

from __future__ import annotations

import io
import threading

import numpy as np

MAX_HEADER_BYTES = 1 << 16
"""The longest header read (numpy's own limit for a trusted file is 10 KiB)."""

_lock = threading.Lock()


def read_npy_header(head: bytes) -> tuple[tuple[int, ...], np.dtype, bool, int]:
    """(shape, dtype as stored, Fortran order, data offset) of the .npy bytes starting with `head`; a ValueError
    saying why when they do not start with a header numpy reads."""
    stream = io.BytesIO(head[:MAX_HEADER_BYTES])
    try:
        major, _ = np.lib.format.read_magic(stream)
        read = {1: np.lib.format.read_array_header_1_0, 2: np.lib.format.read_array_header_2_0}.get(major)
        if read is None:
            raise ValueError(f"unsupported .npy format version {major}")
        with _lock:
            shape, fortran, dtype = read(stream, max_header_size=MAX_HEADER_BYTES)
    except (ValueError, SyntaxError, EOFError, OSError) as exc:
        raise ValueError(str(exc)) from None
    return tuple(int(d) for d in shape), dtype, bool(fortran), stream.tell()
