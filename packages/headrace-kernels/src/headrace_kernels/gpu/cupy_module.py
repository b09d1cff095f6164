"""CuPy, imported on first use only, so that headrace imports without CUDA (the GPU modules, the runtime and the
memory pools take it from here)."""

from __future__ import annotations


def cupy():
    """The cupy module."""
    import cupy as cp

    return cp
