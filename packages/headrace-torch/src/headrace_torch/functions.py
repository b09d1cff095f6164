"""DALI's `torch_python_function` (nvidia.dali.plugin.pytorch.fn) and its legacy class `TorchPythonFunction`: a
Python function of torch tensors inside a pipeline. It runs as `dl_tensor_python_function`, so the tensors reach
the function and come back through DLPack, without a copy, on the CPU or the GPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from headrace import fn


def torch_python_function(*inputs, function: Callable, num_outputs: int = 1, device: str = "cpu",
                          batch_processing: bool = False, **kwargs: Any):
    """`function` called with torch tensors: one per input for each sample, or with `batch_processing` one list of
    a batch's tensors per input (DALI's default here is per sample). It returns a tensor (or `num_outputs` of them;
    lists of them with `batch_processing`)."""
    def on_tensors(*capsules):
        if batch_processing:
            return function(*[[torch.from_dlpack(c) for c in column] for column in capsules])
        return function(*[torch.from_dlpack(c) for c in capsules])

    return fn.dl_tensor_python_function(*inputs, function=on_tensors, num_outputs=num_outputs, device=device,
                                        batch_processing=batch_processing, **kwargs)


class TorchPythonFunction:
    """DALI's legacy operator class: `TorchPythonFunction(function=..., num_outputs=...)(*inputs)`."""

    def __init__(self, function: Callable, num_outputs: int = 1, device: str = "cpu", batch_processing: bool = False,
                 **kwargs: Any):
        self.function, self.num_outputs, self.device = function, num_outputs, device
        self.batch_processing, self.kwargs = batch_processing, kwargs

    def __call__(self, *inputs, **kwargs: Any):
        return torch_python_function(*inputs, function=self.function, num_outputs=self.num_outputs,
                                     device=self.device, batch_processing=self.batch_processing,
                                     **{**self.kwargs, **kwargs})
