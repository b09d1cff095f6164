"""`numba_function` at DALI's plugin path; the same op as `fn.experimental.numba_function`."""

from headrace import fn

numba_function = fn.experimental.numba_function

__all__ = ["numba_function"]
