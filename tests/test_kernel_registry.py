"""Every op's declared devices have registered kernels, and every registered kernel belongs to a declared device of
a declared op (headrace_kernels.registry; the kernel modules are found without a list)."""

from __future__ import annotations

import headrace.ops
import headrace.readers  # noqa: F401 - registers the readers
from headrace.schema import SCHEMAS
from headrace_kernels.registry import fused_gpu_kernels, get_cpu_kernel, get_gpu_kernel, get_reader, registered_ops


def test_every_declared_device_has_a_kernel():
    missing = []
    for name, schema in sorted(SCHEMAS.items()):
        if "cpu" in schema.devices:
            found = get_reader(name) if schema.batch_op else get_cpu_kernel(name)
            if found is None:
                missing.append(f"{name}: declares device 'cpu' but has no registered "
                               f"{'reader' if schema.batch_op else 'CPU kernel'}")
        if {"gpu", "mixed"} & set(schema.devices) and not schema.batch_op and get_gpu_kernel(name) is None:
            missing.append(f"{name}: declares device {'mixed' if 'mixed' in schema.devices else 'gpu'} but has no "
                           "registered GPU kernel (@gpu_kernel)")
    assert not missing, "\n".join(missing)


def test_every_kernel_belongs_to_a_declared_op_and_device():
    stray = []
    for name, devices in sorted(registered_ops().items()):
        schema = SCHEMAS.get(name)
        if schema is None:
            stray.append(f"{name}: kernels registered ({', '.join(sorted(devices))}) but no schema declares it")
            continue
        if "gpu" in devices and not {"gpu", "mixed"} & set(schema.devices):
            stray.append(f"{name}: a GPU kernel is registered but the schema declares {schema.devices}")
        if ("cpu" in devices or "reader" in devices) and "cpu" not in schema.devices:
            stray.append(f"{name}: a CPU kernel is registered but the schema declares {schema.devices}")
    for entry in fused_gpu_kernels():
        for op in entry.ops:
            if op not in SCHEMAS or "gpu" not in SCHEMAS[op].devices:
                stray.append(f"fused kernel {entry.ops}: {op} is not a declared GPU op")
    assert not stray, "\n".join(stray)
