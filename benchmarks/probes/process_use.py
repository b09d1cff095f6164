"""What a process (this one, or the CPU stage's worker) used over a stretch of work, from /proc/PID/stat: its minor
page faults (each takes the address space's lock that mmap and munmap take too) and its CPU time."""

from __future__ import annotations

import os
from pathlib import Path


def process_use(pid: int) -> tuple[int, float]:
    """(minor page faults, CPU seconds) of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
