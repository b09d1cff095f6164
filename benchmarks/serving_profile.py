"""Where a served batch spends its time, in this process, without Triton: the preprocess model's pipeline run
through the backend's BatchRunner on batches of single-image requests, as the backend's `execute` does, next to
`pipe.run` on the same batch (the pipeline alone); per-batch milliseconds at each batch size, the GPU stage's
host time per step, the decoder alone (GPU), and optionally a cProfile of one batch size.

    python benchmarks/serving_profile.py [--device gpu] [--sizes 1 8 32] [--batches 200] [--cprofile 8]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from triton_helpers import jpegs  # noqa: E402

from headrace.serving.batching import BatchRunner, InputSpec  # noqa: E402


def served_pipeline(device: str):
    """scripts/make_model_repository.py's preprocess pipeline (the served one), on `device`."""
    script = ROOT / "scripts" / "make_model_repository.py"
    spec = importlib.util.spec_from_file_location("make_model_repository", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pipe = module.preprocess(device=device)
    pipe.prefetch_queue_depth = 1  # as the backend loads it
    pipe.build()
    return pipe


def per_batch_ms(call, batches: int) -> tuple[float, float]:
    """Median and 90th percentile of `call()` over `batches` calls, in ms, after 5 warm-up calls."""
    for _ in range(5):
        call()
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3), float(np.percentile(times, 90) * 1e3)


def decode_alone(decoder, ctx, images: list, size: int) -> None:
    """The pipeline's own GPU decoder on `size` images, waited for: the floor under a served batch."""
    with ctx.active():
        prepared = decoder.prepare([images[i % 2] for i in range(size)], 0, 0)
        decoder.allocate(prepared, ctx.stream)
        decoder.run(prepared, ctx.stream)
        ctx.stream.synchronize()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--sizes", nargs="*", type=int, default=[1, 8, 32])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--cprofile", type=int, default=0, help="profile the runner at this batch size")
    parser.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"), help="cProfile's order")
    args = parser.parse_args(argv)

    pipe = served_pipeline(args.device)
    runner = BatchRunner(pipe, [InputSpec("images", np.dtype(np.uint8), (-1,))], ["normalized"])
    images = [jpegs(5, seed=0)[4], jpegs(5, seed=1)[4]]  # 427x640, as triton_preprocess.py sends
    requests = [{"images": images[i % 2][None]} for i in range(max(args.sizes))]

    def direct(size):
        for out in pipe.run(images=[images[i % 2] for i in range(size)]):
            getattr(out, "synchronize", lambda: None)()

    print(f"{args.device}: {'model':<12}{'batch':>6}{'p50 ms':>9}{'p90 ms':>9}{'img/s':>9}")
    for size in args.sizes:
        for label, call in (("pipe.run", lambda s=size: direct(s)), ("BatchRunner", lambda s=size: runner.run(
                requests[:s]))):
            p50, p90 = per_batch_ms(call, args.batches)
            print(f"{args.device}: {label:<12}{size:>6}{p50:>9.2f}{p90:>9.2f}{size / p50 * 1e3:>9.0f}")
    stage = pipe._executor.gpu
    if stage is not None:
        decoder = next(step.decoder for kind, step in stage.steps if kind == "gpu" and hasattr(step, "decoder"))
        for size in args.sizes:
            p50, p90 = per_batch_ms(lambda s=size: decode_alone(decoder, stage.ctx, images, s), args.batches)
            print(f"{args.device}: {'decode only':<12}{size:>6}{p50:>9.2f}{p90:>9.2f}{size / p50 * 1e3:>9.0f}")
        total = len(args.sizes) * (args.batches + 5) * 2
        print("GPU stage host time per batch (ms, all sizes):",
              ", ".join(f"{k} {v / total * 1e3:.3f}" for k, v in stage.timings.items()))
    if args.cprofile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.batches):
            runner.run(requests[:args.cprofile])
        profiler.disable()
        print(f"cProfile of {args.batches} BatchRunner batches of {args.cprofile} (calling thread, {args.sort}):")
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(45)
    pipe.close()


if __name__ == "__main__":
    main()
