"""Every thread's Python stack, sampled from a thread of its own: where the wall time goes that CPU times do not
explain (a thread blocked in a C call, on a lock, the device or the GIL, shows the line that made the call). The
probes' shared sampler: ssd_stage_probe.py and stall_probe.py."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path


class StackSampler:
    """While in the `with` block, each `interval` seconds: (time, thread name, innermost line of a file whose path
    holds one of `marks`) for every other thread. The interpreter's switch interval is lowered to `interval` for
    the while, so the sampler gets the GIL on time."""

    def __init__(self, interval: float = 0.0005, marks: tuple[str, ...] = ("headrace", "benchmarks")):
        self.interval, self.marks = interval, marks
        self.samples: list[tuple[float, str, str]] = []
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved_interval = 0.0

    def _where(self, frame) -> str:
        while frame is not None:
            path = frame.f_code.co_filename
            if any(mark in path for mark in self.marks):
                return f"{Path(path).name}:{frame.f_lineno} {frame.f_code.co_name}"
            frame = frame.f_back
        return "?"

    def _sample(self) -> None:
        me, names = threading.get_ident(), {}
        while not self._done.is_set():
            names.update({t.ident: t.name for t in threading.enumerate()})
            now = time.perf_counter()
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    self.samples.append((now, names.get(ident, str(ident)), self._where(frame)))
            time.sleep(self.interval)

    def __enter__(self) -> StackSampler:
        self._done.clear()  # a sampler may be entered again: its samples add up
        self._saved_interval = sys.getswitchinterval()
        sys.setswitchinterval(self.interval)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        sys.setswitchinterval(self._saved_interval)


def print_counts(samples: list[tuple[float, str, str]], title: str, top: int = 12) -> None:
    """Per thread (most samples first), the share of its samples at each line, the `top` lines."""
    by_thread: dict[str, Counter] = {}
    for _, thread, where in samples:
        by_thread.setdefault(thread, Counter())[where] += 1
    print(f"  {title}")
    for thread, lines in sorted(by_thread.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(lines.values())
        print(f"    {thread} ({total} samples)")
        for where, n in lines.most_common(top):
            print(f"      {n / total:6.1%}  {where}")
