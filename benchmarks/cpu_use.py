"""Where a served load's CPU goes: CPU seconds of tritonserver, of its children (the Python backend stubs of every
model it serves), of the load's client processes, and of the whole machine, from /proc, so that a level's figures
can say whether the host's cores, rather than the model, set its rate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
PARTS = ("server", "stubs", "client", "machine")


class ProcessCpu(NamedTuple):
    """One process: its command name, parent, CPU seconds of its own and of its children it has waited for."""

    name: str
    parent: int
    own_s: float
    reaped_children_s: float


def process_cpu(stat_text: str) -> ProcessCpu:
    """The fields of a /proc/PID/stat text that say where its CPU went (the name may hold spaces and parentheses)."""
    name = stat_text[stat_text.index("(") + 1:stat_text.rindex(")")]
    fields = stat_text.rsplit(")", 1)[1].split()  # fields[0] is stat's field 3 (state)
    return ProcessCpu(name, int(fields[1]), (int(fields[11]) + int(fields[12])) * TICK_S,
                      (int(fields[13]) + int(fields[14])) * TICK_S)


def _processes() -> dict[int, ProcessCpu]:
    processes = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            processes[int(entry.name)] = process_cpu((entry / "stat").read_text())
        except OSError:  # gone since the listing
            continue
    return processes


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (user, nice, system, irq, softirq; not idle, iowait or
    time stolen by the hypervisor)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) * TICK_S


def cpu_snapshot(server_pid: int) -> dict[str, float]:
    """CPU seconds so far: tritonserver `server_pid`; its children, live or exited (the stubs); this process's other
    children, live or exited (the load's client processes, perf_analyzer); and the machine."""
    processes = _processes()
    me = os.getpid()
    server = processes.get(server_pid, ProcessCpu("tritonserver", 0, 0.0, 0.0))

    def children_s(parent: int, leave_out: str = "") -> float:
        return sum(p.own_s + p.reaped_children_s for p in processes.values()
                   if p.parent == parent and p.name != leave_out)

    return {"server": server.own_s,
            "stubs": children_s(server_pid) + server.reaped_children_s,
            "client": children_s(me, leave_out="tritonserver") + processes[me].reaped_children_s,
            "machine": machine_busy_s()}


def cores_busy(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Each part's CPU seconds between two snapshots over `seconds` of wall time: how many cores it kept busy."""
    return {part: (after[part] - before[part]) / seconds for part in PARTS}
