"""GPU get_property: each sample's source_info or its input's layout, as the CPU kernel makes it, uploaded."""

from __future__ import annotations

from headrace_kernels.cpu.properties_ops import property_bytes
from headrace_kernels.gpu.runtime import cupy
from headrace_kernels.registry import gpu_kernel


@gpu_kernel("get_property")
def get_property_kernel(batch):
    """The property's bytes per sample, on the device."""
    cp = cupy()
    sources, layouts = batch.sources, batch.input_layouts
    layout = layouts[0] if layouts else ""
    return None, [cp.asarray(property_bytes(batch.args["key"], sources[i] if i < len(sources) else "", layout))
                  for i in range(batch.size)]
