"""Where a fresh process's build + first batch goes on the GPU (issue 27's "first batch"): the RN50 training pipeline of
gpu_vs_dali.py, each run in a new interpreter, with CuPy's kernel cache and numba's cache empty or warm, and a warm
and a cold run under cProfile (their top functions by cumulative time).

    python benchmarks/probes/first_batch_probe.py [--images 256] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    import sys, time
    start = time.perf_counter()
    import headrace
    from headrace import fn, pipeline_def, types
    imported = time.perf_counter()
    sys.path.insert(0, {benchmarks!r})
    from gpu_vs_dali import Library, train
    lib = Library("headrace")

    @pipeline_def(batch_size={batch}, num_threads=8, device_id=0, seed=1)
    def pipe():
        return train(lib, {data!r}, 0.65)

    p = pipe()
    p.build()
    built = time.perf_counter()
    p.run()
    first = time.perf_counter()
    p.run()
    second = time.perf_counter()
    print(f"RESULT import {{imported - start:.2f}} build {{built - imported:.2f}} first {{first - built:.2f}} "
          f"second {{second - first:.3f}}")
    import numba
    compiled = []
    for module in list(sys.modules.values()):
        if not (getattr(module, "__name__", "") or "").startswith(("headrace", "numba_")):
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, numba.core.dispatcher.Dispatcher) and value.overloads:
                stats = value.stats
                compiled.append(f"{{module.__name__}}.{{name}}: {{len(value.overloads)}} "
                                f"(cache hits {{sum(stats.cache_hits.values())}}, misses "
                                f"{{sum(stats.cache_misses.values())}})")
    print("NUMBA", len(compiled), "dispatchers with overloads:")
    print("\\n".join(sorted(compiled)))
""")


def run(code: str, env: dict, profile: bool = False, verbose: bool = False) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(code)
    args = [sys.executable, script.name] if not profile else [sys.executable, "-m", "cProfile", "-s", "cumulative",
                                                              script.name]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode:
        return done.stdout[-2000:] + done.stderr[-4000:]
    if profile:
        lines = done.stdout.splitlines()
        start = next((i for i, line in enumerate(lines) if "function calls" in line), 0)
        return "\n".join(lines[start:start + 45])
    if verbose:
        return done.stdout[-6000:]
    return next((line for line in done.stdout.splitlines() if line.startswith("RESULT")), done.stdout[-500:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    from headrace.data.synthetic import make_image_folder

    root = Path(tempfile.mkdtemp(prefix="first_batch_"))
    data = root / "data"
    make_image_folder(data, args.images)
    code = CHILD.format(benchmarks=str(Path(__file__).resolve().parents[1]), batch=args.batch_size, data=str(data))
    caches = {"cupy": root / "cupy", "numba": root / "numba"}

    def env(cold: set[str], tag: str) -> dict:
        out = dict(os.environ)
        for name, path in caches.items():
            where = path / (tag if name in cold else "warm")
            where.mkdir(parents=True, exist_ok=True)
            out["CUPY_CACHE_DIR" if name == "cupy" else "NUMBA_CACHE_DIR"] = str(where)
        return out

    print("warming the caches:", run(code, env(set(), "warm"), verbose=True))
    for label, cold in (("both warm", set()), ("cupy cold", {"cupy"}), ("numba cold", {"numba"}),
                        ("both cold", {"cupy", "numba"})):
        for attempt in range(2):
            print(f"{label:<11}", run(code, env(cold, f"{label.replace(' ', '_')}{attempt}")))
    print("cProfile of a run with both caches warm:")
    print(run(code, env(set(), "warm"), profile=True))
    print("cProfile of a run with both caches cold:")
    print(run(code, env({"cupy", "numba"}, "profile"), profile=True))


if __name__ == "__main__":
    main()
