"""DALI's `backend` module names that user code imports (`from nvidia.dali.backend import TensorListCPU`)."""

from headrace.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
