"""Framework plugins, at DALI's import paths (`headrace.plugin.pytorch` as `nvidia.dali.plugin.pytorch`), and user
ops: `register_op(OpSchema(...))` declares an op as headrace declares its own, `cpu_kernel` / `gpu_kernel`
register its kernels (`reader` a stateful batch op's class, with state="reader"), and it appears in `fn.*` with
the same validation, docs and checkpoint rule. A pipeline file names the declaring module;
`Pipeline.load(..., allowed_modules=[...])` imports it only when trusted."""

from __future__ import annotations

import dataclasses
import sys

from headrace.schema import REQUIRED, Arg, OpSchema, OutputSpec, SpecArgs, register
from headrace_kernels.registry import KernelSetup, SampleFailureError, cpu_kernel, gpu_kernel, reader

__all__ = ["REQUIRED", "Arg", "KernelSetup", "OpSchema", "OutputSpec", "SampleFailureError", "SpecArgs", "cpu_kernel",
           "gpu_kernel", "reader", "register_op"]


def register_op(schema: OpSchema, module: str | None = None) -> OpSchema:
    """Declare a user op, filed under `module` (default: the calling module's name), which a pipeline file records
    so that loading can import it. Returns the registered schema."""
    if module is None:
        module = sys._getframe(1).f_globals.get("__name__", "")
    if not module or module == "__main__":
        raise ValueError(f"register_op({schema.name!r}): declare user ops in an importable module, not in __main__, "
                         "so that a pipeline file can name it")
    return register(dataclasses.replace(schema, plugin_module=module), module)
