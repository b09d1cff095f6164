"""DALI's numba plugin path: `from headrace.plugin.numba.fn.experimental import numba_function`."""
