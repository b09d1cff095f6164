"""One benchmark run against two source trees of headrace (old and new commit), in alternating processes on one
machine: is the new code's rate within noise of the old? Two versions of a package cannot share a process, and
alternating spreads the machine's drift over both sides.

    python benchmarks/ab_trees.py --old /tmp/oldtree --new . [--rounds 5] [--warmup-runs 1] [-- COMMAND ...]

Each tree is a checkout (e.g. `git archive OLD | tar -x -C /tmp/oldtree`); its packages/*/src go first on
PYTHONPATH, and headrace_kernels finds the tree's own kernels/ through its `cuda` link. The default command is this
checkout's `gpu_train.py --rate-only hw` (the same benchmark code on both sides; only the library differs). In
COMMAND, `{tree}` is the side's tree and `{work}` a scratch folder shared by all runs (generated data is made once);
a first word ending in .py runs with this interpreter. The rate is the last `N img/s` on the command's stdout
(`--pattern` to change)."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGES = {"headrace": "headrace", "headrace_kernels": "headrace-kernels", "headrace_torch": "headrace-torch"}
DEFAULT_COMMAND = [str(HERE / "gpu_train.py"), "--rate-only", "hw", "--epochs", "10", "--data", "{work}/images"]
DEFAULT_PATTERN = r"([0-9][0-9,]*(?:\.[0-9]+)?) img/s"


def tree_environment(tree: Path) -> dict[str, str]:
    """This process's environment with `tree`'s package sources first on PYTHONPATH."""
    env = dict(os.environ)
    paths = [str(tree / "packages" / folder / "src") for folder in PACKAGES.values()]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def check_tree(python: str, tree: Path) -> str:
    """Where `python` finds each package with `tree`'s environment (without importing them); exits unless all come
    from `tree` (an installed copy or another checkout first on the path would measure the wrong code)."""
    probe = ("import importlib.util, sys\n"
             "for name in sys.argv[1:]:\n"
             "    spec = importlib.util.find_spec(name)\n"
             "    print(name, spec.origin if spec else None)\n")
    done = subprocess.run([python, "-c", probe, *PACKAGES], env=tree_environment(tree), capture_output=True,
                          text=True, check=True)
    found = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for name, origin in found.items():
        if origin == "None" or not Path(origin).resolve().is_relative_to(tree):
            sys.exit(f"{tree}: {name} is imported from {origin}, not from this tree")
    return found["headrace"]


def parse_rate(stdout: str, pattern: str) -> float | None:
    """The rate in the last match of `pattern` (its first group, thousands separators allowed), or None."""
    matches = re.findall(pattern, stdout, flags=re.MULTILINE)
    if not matches:
        return None
    last = matches[-1]
    return float((last[0] if isinstance(last, tuple) else last).replace(",", ""))


def command_for(command: list[str], tree: Path, work: Path, python: str) -> list[str]:
    words = [word.replace("{tree}", str(tree)).replace("{work}", str(work)) for word in command]
    return [python, *words] if words[0].endswith(".py") else words


def run_once(label: str, tree: Path, args, work: Path) -> tuple[float, float]:
    """One run of the command with `tree`'s packages: (rate, wall seconds); exits with the run's output tail when it
    fails or prints no rate."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command_for(args.command, tree, work, args.python), env=tree_environment(tree),
                              capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        sys.exit(f"{label}: no answer in {args.timeout:.0f} s")
    wall = time.perf_counter() - start
    rate = parse_rate(done.stdout, args.pattern) if done.returncode == 0 else None
    if rate is None:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
        sys.exit(f"{label}: exit code {done.returncode}, no rate matching {args.pattern!r}; output ends:\n{tail}")
    return rate, wall


def spread(rates: list[float]) -> float:
    """Half the range of `rates` over their median: how far one run strays."""
    return (max(rates) - min(rates)) / 2 / statistics.median(rates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=Path, required=True, help="the old source tree (has packages/*/src)")
    parser.add_argument("--new", type=Path, required=True, help="the new source tree")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds, each one run of old and of new")
    parser.add_argument("--warmup-runs", type=int, default=1,
                        help="unmeasured runs per tree first (kernel and numba caches, generated data)")
    parser.add_argument("--pattern", default=DEFAULT_PATTERN,
                        help="regular expression whose first group is the rate; its last match counts")
    parser.add_argument("--python", default=sys.executable, help="interpreter for a COMMAND that starts with a .py")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one run may take")
    parser.add_argument("--work", type=Path, help="scratch folder for {work} (default: a temporary one)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="after --: the benchmark command (default: gpu_train.py --rate-only hw --epochs 10)")
    args = parser.parse_args(argv)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    args.command = args.command or DEFAULT_COMMAND
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    for label, tree in trees.items():
        print(f"{label}: {tree} (headrace from {check_tree(args.python, tree)})")

    with tempfile.TemporaryDirectory(prefix="ab-trees-") as scratch:
        work = args.work.resolve() if args.work else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        print("command:", " ".join(command_for(args.command, Path("{tree}"), work, args.python)), flush=True)
        for _ in range(args.warmup_runs):
            for label, tree in trees.items():
                rate, wall = run_once(f"warm-up {label}", tree, args, work)
                print(f"warm-up: {label} {rate:,.1f} img/s ({wall:.0f} s, not counted)", flush=True)
        rates: dict[str, list[float]] = {label: [] for label in trees}
        for round_ in range(args.rounds):
            order = ["old", "new"] if round_ % 2 == 0 else ["new", "old"]
            for label in order:
                rate, wall = run_once(f"round {round_} {label}", trees[label], args, work)
                rates[label].append(rate)
            print(f"round {round_} ({' then '.join(order)}): old {rates['old'][-1]:,.1f} img/s, new "
                  f"{rates['new'][-1]:,.1f} img/s, new/old {rates['new'][-1] / rates['old'][-1]:.3f}", flush=True)

    if not args.rounds:
        return
    old, new = statistics.median(rates["old"]), statistics.median(rates["new"])
    ratios = [n / o for n, o in zip(rates["new"], rates["old"], strict=True)]
    print(f"\nmedian of {args.rounds} rounds: old {old:,.1f} img/s (runs within ±{spread(rates['old']):.1%}), "
          f"new {new:,.1f} img/s (±{spread(rates['new']):.1%})")
    print(f"new/old: {new / old:.3f} (medians); per round {min(ratios):.3f} to {max(ratios):.3f}, "
          f"median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
