"""DALI's `nvidia.dali.plugin.pytorch.fn`: `torch_python_function` (from headrace-torch)."""

from headrace_torch.functions import torch_python_function

__all__ = ["torch_python_function"]
