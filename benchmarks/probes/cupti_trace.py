"""CUDA runtime and driver calls, kernels and copies recorded with CUPTI's activity API (cupti-python) while a probe
runs, to tell slow batches from the rest: which calls took the host's time and on which threads, and how long the
device ran kernels and copies. Needs cupti-python and a libcupti no newer than the driver's CUDA (the session's
`.cupti-whl`: cupti-python 13.0 with nvidia-cuda-cupti 13.0 for driver 580).

    with CuptiTrace() as trace:
        ... run the pipeline, keeping (start, end) perf_counter spans of the batches ...
    trace.compare(slow_spans, other_spans)
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter, defaultdict

API_KINDS = ("RUNTIME", "DRIVER")
DEVICE_KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET")
SYNC_CALLS = ("Synchronize", "WaitEvent", "EventQuery", "StreamQuery")
"""Parts of the names of the calls that wait for the device, or ask whether it is done: recording only these keeps
the trace light (every call of a pipeline, about 2 million a minute, slowed it 3-10x)."""


class CuptiTrace:
    """Activity records of one traced stretch, their times on time.perf_counter's clock."""

    def __init__(self, buffer_bytes: int = 8 << 20, calls: tuple[str, ...] | None = None):
        """`calls`: record only the API calls whose names hold one of these parts, and no kernels or copies (None:
        every call, kernel and copy)."""
        from cupti import cupti

        self.cupti, self.buffer_bytes, self.only = cupti, buffer_bytes, calls
        kind = cupti.ActivityKind
        self._domains = {int(kind.RUNTIME): ("rt", int(cupti.CallbackDomain.RUNTIME_API)),
                         int(kind.DRIVER): ("drv", int(cupti.CallbackDomain.DRIVER_API))}
        self._kernel, self._memcpy, self._memset = int(kind.CONCURRENT_KERNEL), int(kind.MEMCPY), int(kind.MEMSET)
        self.calls: list[tuple[int, int, str, int]] = []  # (start ns, end ns, API name, thread id)
        self.device: list[tuple[int, int, str]] = []  # (start ns, end ns, what) of kernels, copies and sets
        self._names: dict[tuple[int, int], str] = {}
        cupti.activity_register_callbacks(self._requested, self._completed)
        self.offset_ns = self._clock_offset()

    def _requested(self):
        return self.buffer_bytes, 0

    def _name(self, kind: int, cbid: int) -> str:
        key = (kind, cbid)
        name = self._names.get(key)
        if name is None:
            prefix, domain = self._domains[kind]
            try:
                name = f"{prefix} {self.cupti.get_callback_name(domain, cbid)}"
            except Exception:  # noqa: BLE001 - an id this CUPTI cannot name
                name = f"{prefix} #{cbid}"
            self._names[key] = name
        return name

    def _completed(self, activities: list) -> None:
        for record in activities:
            kind = int(record.kind)
            if kind in self._domains:
                self.calls.append((record.start, record.end, self._name(kind, record.cbid), record.thread_id))
            elif kind == self._kernel:
                self.device.append((record.start, record.end, "kernel"))
            elif kind == self._memcpy:
                self.device.append((record.start, record.end, f"memcpy kind {record.copy_kind}"))
            elif kind == self._memset:
                self.device.append((record.start, record.end, "memset"))

    def _clock_offset(self) -> int:
        """CUPTI's timestamp minus perf_counter_ns, from the tightest of a few back-to-back readings."""
        best = None
        for _ in range(9):
            before = time.perf_counter_ns()
            stamp = self.cupti.get_timestamp()
            after = time.perf_counter_ns()
            if best is None or after - before < best[0]:
                best = (after - before, stamp - (before + after) // 2)
        return best[1]

    def _kinds(self) -> tuple[str, ...]:
        return API_KINDS if self.only is not None else API_KINDS + DEVICE_KINDS

    def _keep_only(self) -> None:
        """Turn off the records of every runtime and driver call whose name holds none of `only`'s parts."""
        cupti = self.cupti
        for members, turn_off in ((cupti.runtime_api_trace_cbid, cupti.activity_enable_runtime_api),
                                  (cupti.driver_api_trace_cbid, cupti.activity_enable_driver_api)):
            for member in members:
                if member.name not in ("INVALID", "SIZE", "FORCE_INT") and \
                        not any(part in member.name for part in self.only):
                    turn_off(int(member), 0)

    def __enter__(self) -> CuptiTrace:
        for name in self._kinds():
            self.cupti.activity_enable(getattr(self.cupti.ActivityKind, name))
        if self.only is not None:
            self._keep_only()
        return self

    def __exit__(self, *exc) -> None:
        for name in self._kinds():
            self.cupti.activity_disable(getattr(self.cupti.ActivityKind, name))
        self.cupti.activity_flush_all(1)

    def _span_of(self, spans: list[tuple[float, float]]):
        """A function giving the index of the span (perf_counter seconds) a CUPTI time falls in, or None."""
        starts = [a for a, _ in spans]

        def find(stamp_ns: int):
            t = (stamp_ns - self.offset_ns) / 1e9
            i = bisect.bisect_right(starts, t) - 1
            return i if i >= 0 and t <= spans[i][1] else None
        return find

    def _totals(self, spans: list[tuple[float, float]]) -> tuple[Counter, Counter, Counter, Counter, Counter]:
        """Per API name, per thread and per (thread, name), the seconds of calls begun within `spans`, and the
        calls' count; per kind of device work, its seconds."""
        find = self._span_of(sorted(spans))
        by_name, by_thread, counts, device, pairs = Counter(), Counter(), Counter(), Counter(), Counter()
        for start, end, name, thread in self.calls:
            if find(start) is not None:
                by_name[name] += (end - start) / 1e9
                by_thread[thread] += (end - start) / 1e9
                pairs[thread, name] += (end - start) / 1e9
                counts[name] += 1
        for start, end, what in self.device:
            if find(start) is not None:
                device[what] += (end - start) / 1e9
        return by_name, by_thread, counts, device, pairs

    def compare(self, slow: list[tuple[float, float]], rest: list[tuple[float, float]], top: int = 16) -> None:
        """Print, per batch, the calls' and the device's time in the slow batches against the rest."""
        if not slow or not rest:
            print(f"CUPTI: {len(self.calls)} calls, {len(self.device)} device records; no slow batches to compare")
            return
        (s_name, s_thread, s_count, s_dev, s_pair), (r_name, r_thread, r_count, r_dev, r_pair) = \
            self._totals(slow), self._totals(rest)
        # CUPTI's thread id: pthread_self's low 32 bits, as seen
        thread_names = {t.ident & 0xFFFFFFFF: t.name for t in threading.enumerate() if t.ident is not None}
        ns, nr = len(slow), len(rest)
        print(f"\nCUPTI, ms per batch in {ns} slow batches against {nr} others ({len(self.calls)} API calls, "
              f"{len(self.device)} device records):")
        names = sorted(set(s_name) | set(r_name), key=lambda k: -(s_name[k] / ns - r_name[k] / nr))[:top]
        print(f"  {'call (most added time in slow batches first)':60} {'slow':>8} {'rest':>8} {'calls s/r':>12}")
        for name in names:
            print(f"  {name[:60]:60} {s_name[name] / ns * 1e3:8.2f} {r_name[name] / nr * 1e3:8.2f} "
                  f"{s_count[name] / ns:6.1f}/{r_count[name] / nr:<5.1f}")
        threads = defaultdict(lambda: [0.0, 0.0])
        for thread, seconds in s_thread.items():
            threads[thread][0] = seconds / ns
        for thread, seconds in r_thread.items():
            threads[thread][1] = seconds / nr
        print("  API time per thread (ms per batch, slow / rest), with each thread's calls that take most:")
        for thread, (a, b) in sorted(threads.items(), key=lambda item: -item[1][0])[:8]:
            calls = sorted({name for t, name in set(s_pair) | set(r_pair) if t == thread},
                           key=lambda name: -s_pair[thread, name])[:4]
            print(f"    {thread_names.get(thread & 0xFFFFFFFF, thread)}: {a * 1e3:.1f} / {b * 1e3:.1f}  (" + ", ".join(
                f"{name} {s_pair[thread, name] / ns * 1e3:.2f} / {r_pair[thread, name] / nr * 1e3:.2f}"
                for name in calls) + ")")
        print("  device time (ms per batch, slow / rest): " + ", ".join(
            f"{what}: {s_dev[what] / ns * 1e3:.2f} / {r_dev[what] / nr * 1e3:.2f}"
            for what in sorted(set(s_dev) | set(r_dev))))
