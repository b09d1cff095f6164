"""The CPUs near a GPU (its NUMA node's, as the kernel lists them for its PCI device) and threads kept on them: the
executor option cpu_affinity="gpu" starts the GPU stage's threads there, and the threads they start (nvImageCodec's
workers, made on the decode lanes) inherit it, as DALI keeps its decoder threads on the GPU's cores (its `affine`
argument). A thread the scheduler moves to the other socket reads the pipeline's host memory across it."""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from headrace_kernels.gpu.cupy_module import cupy

PCI_DEVICES = Path("/sys/bus/pci/devices")


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a kernel CPU list ('0-7,16-23', '3', '' for none)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def cpus_near(bus_id: str, devices: Path = PCI_DEVICES) -> frozenset[int] | None:
    """The CPUs this process may use that sysfs lists as local to PCI device `bus_id` ('0000:18:00.0'); None where
    it lists none, all of them, or cannot be read (a machine or VM that does not say)."""
    try:
        local = parse_cpu_list((devices / bus_id.lower() / "local_cpulist").read_text())
    except (OSError, ValueError):
        return None
    allowed = frozenset(os.sched_getaffinity(0))
    near = local & allowed
    return near if near and near != allowed else None


@functools.cache
def gpu_cpus(device_id: int) -> frozenset[int] | None:
    """`cpus_near` of CUDA device `device_id`."""
    return cpus_near(cupy().cuda.Device(device_id).pci_bus_id)


def pipeline_cpus(cpu_affinity: str, device_id: int) -> frozenset[int] | None:
    """Where executor option cpu_affinity keeps a pipeline's threads: `gpu_cpus` for 'gpu', else None (anywhere)."""
    return gpu_cpus(device_id) if cpu_affinity == "gpu" else None


def keep_thread_on(cpus: frozenset[int] | None) -> None:
    """Keep the calling thread (and the threads it starts from now on) on `cpus`; None leaves it as it is, as does a
    set the process may no longer use (a container's CPUs changed). A ThreadPoolExecutor's initializer: it must not
    raise, or the pool breaks."""
    if cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, cpus)
