"""The numba plugin's `fn` namespace (DALI's `nvidia.dali.plugin.numba.fn`)."""
