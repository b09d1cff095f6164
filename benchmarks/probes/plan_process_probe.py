"""What SSD300's fused flip + resize + hsv + brightness_contrast + crop_mirror_normalize plan costs the thread that
asks for it, planned in the pipeline's process or in the helper process (executor option plan_process): the
calling thread's CPU time (what holds the interpreter lock) and its wall time per run, alternating rounds, medians.
Host work only (no GPU, no placing): it runs here or on the GPU machine's host. A probe for issue 20.

    python benchmarks/probes/plan_process_probe.py [--images 256] [--runs 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from headrace.schema import get_schema
from headrace.types import DALIDataType
from headrace_kernels.gpu.image_ops import plan_crop_mirror_normalize
from headrace_kernels.gpu.packing import sample_args
from headrace_kernels.gpu.plan_process import PlanProcess, adopt, chain_spec

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def literal_args(op: str, **given) -> dict:
    """The op's literal arguments: its schema's defaults, then `given`."""
    args = {name: spec.default for name, spec in get_schema(op).all_args.items()}
    args.update(given)
    return args


SSD_PARTS = (literal_args("flip"), literal_args("resize", resize_x=300, resize_y=300),
             literal_args("hsv", dtype=DALIDataType.FLOAT),
             literal_args("brightness_contrast", contrast_center=128, dtype=DALIDataType.UINT8),
             literal_args("crop_mirror_normalize", crop=(300, 300), mean=MEAN, std=STD, mirror=0,
                          dtype=DALIDataType.FLOAT, output_layout="CHW"))
"""The literal arguments of examples/ssd_pipeline.py's fused chain, op by op."""
SSD_SPEC = chain_spec(SSD_PARTS, flip=True, resize=1, colours=[(2, "hsv"), (3, "brightness_contrast")])


def ssd_run(count: int, seed: int) -> tuple[np.ndarray, list[dict[str, list]]]:
    """(decoded shapes (count, 3), each op's argument-input columns) of a run: crops of 40-480 x 40-640 pixels and
    SSD300's draws (flip coin, hue, saturation, brightness, contrast)."""
    rng = np.random.default_rng(seed)
    shapes = np.stack([rng.integers(40, 480, count), rng.integers(40, 640, count), np.full(count, 3)], axis=1)
    columns = [{"horizontal": rng.integers(0, 2, count).tolist()}, {},
               {"hue": rng.uniform(-0.5, 0.5, count).tolist(), "saturation": rng.uniform(0.5, 1.5, count).tolist()},
               {"brightness": rng.uniform(0.875, 1.125, count).tolist(),
                "contrast": rng.uniform(0.5, 1.5, count).tolist()}, {}]
    return shapes.astype(np.int64), columns


def plan_at_home(shapes: np.ndarray, columns: list[dict[str, list]], addresses: np.ndarray) -> tuple:
    """The plan as the pipeline's process makes it without the helper."""
    count = len(shapes)
    args = [sample_args(literal, part, count) for literal, part in zip(SSD_PARTS, columns, strict=True)]
    return plan_crop_mirror_normalize([None] * count, args[-1], False, args[1], (addresses, shapes), args[0],
                                      [("hsv", args[2]), ("brightness_contrast", args[3])])


def _timed(work, runs: int) -> tuple[float, float]:
    """(wall ms, this thread's CPU ms) per call of work()."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(runs):
        work()
    return (time.perf_counter() - wall) / runs * 1e3, (time.thread_time() - cpu) / runs * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256, help="images a run (SSD300's coalesced run: 8 x 32)")
    parser.add_argument("--runs", type=int, default=200, help="plans a round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    shapes, columns = ssd_run(args.images, seed=1)
    addresses = np.arange(args.images, dtype=np.uint64) * np.uint64(1 << 20)
    helper = PlanProcess(SSD_SPEC)
    try:
        helper.plan(shapes, columns, False)  # started, its loops compiled
        results: dict[str, list[tuple[float, float]]] = {"in process": [], "helper": []}
        for number in range(args.rounds):
            order = ("in process", "helper") if number % 2 == 0 else ("helper", "in process")
            for name in order:
                work = (lambda: plan_at_home(shapes, columns, addresses)) if name == "in process" else \
                    (lambda: adopt([None] * args.images, addresses, helper.plan(shapes, columns, False)))
                results[name].append(_timed(work, args.runs))
            print(f"round {number}: " + "  ".join(f"{name} {results[name][-1][1]:.3f} CPU ms" for name in order))
    finally:
        helper.close()
    print(f"the calling thread, ms a run of {args.images} images, median of {args.rounds} alternating rounds:")
    medians = {name: [statistics.median(r[k] for r in rounds) for k in (0, 1)] for name, rounds in results.items()}
    for name, (wall, cpu) in medians.items():
        print(f"  {name:10s}  wall {wall:.3f}  CPU {cpu:.3f}")
    print(f"  CPU in process / with the helper: {medians['in process'][1] / medians['helper'][1]:.2f}x")


if __name__ == "__main__":
    main()
