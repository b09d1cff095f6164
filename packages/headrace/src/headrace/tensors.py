"""DALI's `tensors` module names: batches (TensorListCPU / TensorListGPU) and single tensors (TensorCPU /
TensorGPU), so that `from nvidia.dali.tensors import TensorCPU` ports by its import line."""

from __future__ import annotations

from headrace.batch import TensorListCPU, TensorListGPU
from headrace.single_tensors import TensorCPU, TensorGPU

__all__ = ["TensorCPU", "TensorGPU", "TensorListCPU", "TensorListGPU"]
