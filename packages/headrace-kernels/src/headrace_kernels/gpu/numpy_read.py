"""readers.numpy on device='gpu': a .npy file's bytes read straight into GPU memory with kvikio (GPUDirect Storage,
or kvikio's compatibility mode -- POSIX reads through a bounce buffer -- where GDS is not set up). kvikio is imported
at the first read, so this module imports without it (and without CuPy)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from headrace_kernels.gpu.cupy_module import cupy

_log = logging.getLogger("headrace.readers.numpy")
_lock = threading.Lock()
last_mode: str | None = None
"""How the last GPU read ran: 'gds' (GPUDirect Storage) or 'compat' (kvikio's compatibility mode); None before any."""


def _kvikio() -> Any:
    try:
        import kvikio
    except ImportError as exc:
        raise RuntimeError(f"readers.numpy(device='gpu') reads through kvikio, which is not installed ({exc}); "
                           "install headrace-kernels with the cuda13 extra (kvikio-cu13)") from None
    return kvikio


def _mode(kvikio: Any, handle: Any) -> str:
    """'compat' when kvikio reads this file in compatibility mode (POSIX), else 'gds'; logged when it changes. The
    file handle says it where kvikio can (CuFile.is_compat_mode_preferred), else kvikio's defaults."""
    global last_mode
    probe = getattr(handle, "is_compat_mode_preferred", None)
    if probe is None:
        defaults = getattr(kvikio, "defaults", None)
        probe = getattr(defaults, "is_compat_mode_preferred", None) or getattr(defaults, "compat_mode", None)
    try:
        compat = bool(probe()) if callable(probe) else True
    except Exception:  # noqa: BLE001 - an unknown kvikio: say compat, the safe claim
        compat = True
    mode = "compat" if compat else "gds"
    with _lock:
        if mode != last_mode:
            _log.info("readers.numpy(device='gpu'): kvikio reads in %s mode", mode)
        last_mode = mode
    return mode


def read_array(path: str, header: Any, roi: Any, policy: str, fill: float, assemble: Callable) -> Any:
    """The array (or its ROI) of the .npy file at `path` as a CuPy array: `assemble` (readers.numpy_files) cuts it
    from spans that kvikio reads into device buffers."""
    kvikio, cp = _kvikio(), cupy()
    with kvikio.CuFile(path, "r") as handle:
        _mode(kvikio, handle)

        def read(offset: int, nbytes: int) -> Any:
            buffer = cp.empty(nbytes, dtype=cp.uint8)
            got = handle.pread(buffer, nbytes, offset).get()
            if got != nbytes:
                raise OSError(0, f"kvikio read {got:,} of {nbytes:,} bytes at {offset:,}")
            return buffer

        array = assemble(cp, read, header, roi, policy, fill)
    # the reader runs on the CPU stage's thread: its copies must be done before the GPU stage's stream reads them
    cp.cuda.get_current_stream().synchronize()
    return array
