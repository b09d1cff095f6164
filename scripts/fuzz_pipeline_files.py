"""Fuzz the pipeline file loader (issue 24): 10,000 mutated files, each loaded and built on the CPU.

Uses the generators of tests/test_pipeline_file_fuzz.py and prints how many files loaded fine, the headrace errors
by type, any other exception (with the first tracebacks), the hangs (cases past --timeout) and the peak RSS. Exit
status 1 when anything other than a headrace error or a clean load happened.

    .venv-test/bin/python scripts/fuzz_pipeline_files.py [--cases 10000] [--seed 0]
"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import tempfile
import traceback
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import test_pipeline_file_fuzz as fuzz  # the generators live beside the property test


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds after which a case counts as a hang")
    parser.add_argument("--memory-limit-gib", type=float, default=16.0,
                        help="address-space limit of this process (0: none), so that a runaway allocation fails "
                             "with MemoryError instead of taking the machine")
    parser.add_argument("--tracebacks", type=int, default=3, help="how many tracebacks of other exceptions to print")
    args = parser.parse_args(argv)
    if args.memory_limit_gib > 0:
        limit = int(args.memory_limit_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))

    counts: collections.Counter[str] = collections.Counter()
    others: collections.Counter[str] = collections.Counter()
    tracebacks: list[str] = []
    hangs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="headrace-fuzz-") as tmp:
        workspace = fuzz.Workspace(Path(tmp))
        valid = workspace.valid_files()
        rss_before = peak_rss_mib()
        progress = tqdm(total=args.cases, unit="file", desc="fuzzing pipeline files")

        @seed(args.seed)
        @settings(max_examples=args.cases, phases=[Phase.generate], database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def run(data):
            text = data.draw(fuzz.mutated_files(valid, workspace))
            try:
                with fuzz.time_guard(args.timeout):
                    counts[fuzz.load_and_build(text)] += 1
            except fuzz.CaseTimeout:
                counts["hang"] += 1
                hangs.append(text[:300])
            except Exception as exc:  # noqa: BLE001 - counted and shown: the point of the run
                counts["other exception"] += 1
                others[type(exc).__name__] += 1
                if len(tracebacks) < args.tracebacks:
                    tracebacks.append(f"{traceback.format_exc()}  file: {text[:400]}")
            progress.update()

        run()
        progress.close()

    total = sum(counts.values())
    print(f"\n{total} mutated pipeline files (seed {args.seed}, hang limit {args.timeout:g} s)")
    print(f"  loaded and built fine:   {counts['ok']}")
    for name, count in sorted(counts.items()):
        if name not in ("ok", "other exception", "hang"):
            print(f"  {name + ':':24} {count}")
    print(f"  other exceptions:        {counts['other exception']} {dict(others) if others else ''}")
    print(f"  hangs:                   {counts['hang']}")
    print(f"  peak RSS:                {peak_rss_mib():.0f} MiB (after loading the valid files: {rss_before:.0f} MiB)")
    for text in tracebacks:
        print("\n" + text)
    for text in hangs[:args.tracebacks]:
        print(f"\nhang: {text}")
    return 1 if counts["other exception"] or counts["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
