"""benchmarks/cpu_use.py, which splits a served load's CPU between server, stubs, client and machine: /proc/PID/stat
read right whatever the command name, and a child's CPU still counted once it has exited."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from cpu_use import TICK_S, cores_busy, cpu_snapshot, process_cpu

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def test_stat_fields_whatever_the_name():
    # fields after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    # cutime cstime ...
    text = "4242 (a) (b c) d) S 17 1 1 0 -1 0 5 0 0 0 300 100 40 20 20 0 1 0"
    parsed = process_cpu(text)
    assert parsed.name == "a) (b c) d" and parsed.parent == 17
    assert parsed.own_s == pytest.approx(400 * TICK_S) and parsed.reaped_children_s == pytest.approx(60 * TICK_S)


def test_a_client_that_exits_between_snapshots_is_counted():
    """A child that burns CPU and is waited for before the second snapshot (as perf_analyzer is) counts as client
    time, not as a negative or a zero."""
    before = cpu_snapshot(server_pid=-1)
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.5\n"
                    "while time.process_time() < end: pass"], check=True)
    after = cpu_snapshot(server_pid=-1)
    elapsed = time.monotonic() - started
    busy = cores_busy(before, after, elapsed)
    assert busy["client"] * elapsed >= 0.45
    assert busy["server"] == 0 and busy["stubs"] == 0
    assert after["machine"] - before["machine"] >= 0.45
