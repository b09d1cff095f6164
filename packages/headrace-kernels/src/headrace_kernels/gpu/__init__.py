"""GPU kernels: CuPy arrays, CUDA C++ from `kernels/*.cu` compiled at first use (NVRTC), nvImageCodec's GPU decoders.

Nothing here imports CuPy or touches CUDA at import time; `gpu_available()` answers without raising."""

from headrace_kernels.gpu.runtime import gpu_available, gpu_unavailable_reason

__all__ = ["gpu_available", "gpu_unavailable_reason"]
