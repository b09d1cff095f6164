"""Per-sample CPU kernels; each releases the GIL in its heavy part (nvImageCodec, OpenCV, numba, numpy)."""
