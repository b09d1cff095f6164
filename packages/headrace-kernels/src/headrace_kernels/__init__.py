"""headrace's op implementations: CPU kernels (numpy, OpenCV, Pillow, nvImageCodec) and GPU kernels (CuPy)."""

from headrace_kernels.registry import cpu_kernel, get_cpu_kernel

__all__ = ["cpu_kernel", "get_cpu_kernel"]
