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
_LOADED: list[bool] = []
_CPU_MODULES = ("decode", "geometry_ops", "random_ops", "math_ops", "conditional_ops", "filter_ops",
                "reduction_ops", "tensor_ops", "region_ops", "color_ops", "warp_ops")


def cpu_kernel(op_name: str) -> Callable[[SampleKernel], SampleKernel]:
    """Register the per-sample CPU implementation of `op_name` (for a schema with whole_batch=True, the kernel
    takes lists of inputs, arguments and contexts for the whole batch and returns one result per sample)."""

    def decorate(fn: SampleKernel) -> SampleKernel:
        _CPU[op_name] = fn
        return fn

    return decorate


BatchDrawKernel = Callable[[dict[str, Any], int, int, int], list[Any]]
_CPU_BATCH: dict[str, BatchDrawKernel] = {}


def cpu_batch_draw_kernel(op_name: str) -> Callable[[BatchDrawKernel], BatchDrawKernel]:
    """Register a whole-batch twin of an input-less random op's CPU kernel: (args, seed, first_sample, size) ->
    one result per sample, equal to what the per-sample kernel gives sample first_sample + i (so the executor may
    use either, with any number of threads)."""

    def decorate(fn: BatchDrawKernel) -> BatchDrawKernel:
        _CPU_BATCH[op_name] = fn
        return fn

    return decorate


def get_cpu_batch_draw_kernel(op_name: str) -> BatchDrawKernel | None:
    get_cpu_kernel(op_name)  # loads the kernel modules
    return _CPU_BATCH.get(op_name)


def get_cpu_kernel(op_name: str) -> SampleKernel | None:
    """The CPU kernel of `op_name`, importing the kernel modules on first use."""
    if not _LOADED:  # not `if not _CPU`: importing one kernel module (as the GPU decoder does) fills _CPU partly
        for module in _CPU_MODULES:
            importlib.import_module(f"headrace_kernels.cpu.{module}")
        _LOADED.append(True)
    return _CPU.get(op_name)
