"""Where a served load's CPU goes: CPU seconds of tritonserver, of its children (the models' Python stubs), of the
load's client processes, and of the whole machine, from /proc, so that a level's figures can say whether the host's
cores, rather than the model, set its rate."""

from __future__ import annotations

import os
from pathlib import Path

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
PARTS = ("server", "stubs", "client", "machine")


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(command name, parent pid, CPU seconds so far) of process `pid`, or None once it has gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) * TICK_S


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (user, nice, system, irq, softirq; not idle, iowait or
    time stolen by the hypervisor)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) * TICK_S


def cpu_snapshot(server_pid: int) -> dict[str, float]:
    """CPU seconds so far: tritonserver `server_pid`, its children (the stubs), this process's children that are
    no tritonserver (the load's client processes), and the machine."""
    processes = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            processes[int(entry.name)] = stat
    me = os.getpid()
    return {"server": processes.get(server_pid, ("", 0, 0.0))[2],
            "stubs": sum(cpu for _, parent, cpu in processes.values() if parent == server_pid),
            "client": sum(cpu for name, parent, cpu in processes.values() if parent == me and name != "tritonserver"),
            "machine": machine_busy_s()}


def cores_busy(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Each part's CPU seconds between two snapshots over `seconds` of wall time: how many cores it kept busy."""
    return {part: (after[part] - before[part]) / seconds for part in PARTS}
