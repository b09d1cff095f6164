"""The CPUs near a GPU and the threads kept on them (executor option cpu_affinity="gpu"): the kernel's CPU lists,
sysfs read from a folder laid out as /sys/bus/pci/devices, and a pinned thread's affinity, which the threads it
starts inherit (as nvImageCodec's workers started on a decode lane do). Runs on the CPU; the option on a GPU
pipeline is in tests/test_gpu_lookahead.py."""

from __future__ import annotations

import os
import threading

import pytest

from headrace import ExecutorOptions
from headrace.errors import SchemaError
from headrace_kernels.gpu.affinity import cpus_near, keep_thread_on, parse_cpu_list


def test_cpu_lists():
    assert parse_cpu_list("0-3,8-9,12\n") == {0, 1, 2, 3, 8, 9, 12}
    assert parse_cpu_list("5") == {5} and parse_cpu_list("") == frozenset()


def _device(tmp_path, bus_id: str, text: str):
    folder = tmp_path / bus_id
    folder.mkdir()
    (folder / "local_cpulist").write_text(text)
    return tmp_path


def test_cpus_near(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    devices = _device(tmp_path, "0000:18:00.0", f"{allowed[0]},{max(allowed) + 64}\n")
    assert cpus_near("0000:18:00.0", devices) == {allowed[0]}  # the listed CPUs this process may use
    assert cpus_near("0000:18:00.0".upper(), devices) == {allowed[0]}  # CUDA names bus ids in capitals
    everything = _device(tmp_path, "0000:19:00.0", ",".join(map(str, allowed)))
    assert cpus_near("0000:19:00.0", everything) is None  # all of them: nothing to choose
    assert cpus_near("0000:20:00.0", devices) is None  # not listed (a VM that does not say)


def test_a_kept_thread_and_the_threads_it_starts_run_on_the_cpus():
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    seen = {}

    def child():
        seen["child"] = os.sched_getaffinity(0)

    def kept():
        keep_thread_on(frozenset({allowed[-1]}))
        seen["kept"] = os.sched_getaffinity(0)
        started = threading.Thread(target=child)
        started.start()
        started.join()

    thread = threading.Thread(target=kept)
    thread.start()
    thread.join()
    assert seen == {"kept": {allowed[-1]}, "child": {allowed[-1]}}
    assert sorted(os.sched_getaffinity(0)) == allowed  # the caller's own thread is left as it was
    keep_thread_on(None)  # nothing to keep: a no-op
    assert sorted(os.sched_getaffinity(0)) == allowed


def test_cpu_affinity_option_values():
    assert ExecutorOptions().cpu_affinity == "off"
    assert ExecutorOptions.from_strings({"cpu_affinity": "gpu"}).cpu_affinity == "gpu"
    with pytest.raises(SchemaError, match="cpu_affinity"):
        ExecutorOptions(cpu_affinity="numa")


def test_cpus_the_process_may_not_use_leave_the_thread_as_it_is():
    before = os.sched_getaffinity(0)
    keep_thread_on(frozenset({10_000}))  # no such CPU: the initializer of a thread pool must not raise
    assert os.sched_getaffinity(0) == before
