"""Kernels register here against an op's schema name, per device; the executor looks them up."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np


class SampleContext(Protocol):
    """What a per-sample kernel may ask of the executor."""

    @property
    def rng(self) -> np.random.Generator: ...  # this sample's random stream, keyed by (seed, node, sample)


SampleKernel = Callable[[list[Any], dict[str, Any], SampleContext], Any]

_CPU: dict[str, SampleKernel] = {}
_CPU_MODULES = ("decode", "geometry_ops", "random_ops", "math_ops", "conditional_ops", "filter_ops",
                "reduction_ops", "tensor_ops", "region_ops", "color_ops", "warp_ops")


def cpu_kernel(op_name: str) -> Callable[[SampleKernel], SampleKernel]:
    """Register the per-sample CPU implementation of `op_name` (for a schema with whole_batch=True, the kernel
    takes lists of inputs, arguments and contexts for the whole batch and returns one result per sample)."""

    def decorate(fn: SampleKernel) -> SampleKernel:
        _CPU[op_name] = fn
        return fn

    return decorate


def get_cpu_kernel(op_name: str) -> SampleKernel | None:
    """The CPU kernel of `op_name`, importing the kernel modules on first use."""
    if not _CPU:
        for module in _CPU_MODULES:
            importlib.import_module(f"headrace_kernels.cpu.{module}")
    return _CPU.get(op_name)
