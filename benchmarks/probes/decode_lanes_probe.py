"""How fast nvImageCodec decodes one batch when it is split over 1, 2, 4 or 8 decoders, each called from a thread of
its own on a stream of its own (what gpu/decode_lanes.py does with two): the batch's wall time, and how long the
first part's decode call blocks its thread before `finish()`. The RN50 training crops of gpu_vs_dali.py.

    python benchmarks/probes/decode_lanes_probe.py [--images 2048] [--batch-size 256] [--loads 1.0 0.65]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_vs_dali import Library, train

from headrace.data.synthetic import make_image_folder
from headrace_kernels.gpu.decode import MixedDecoder


def split_batch(decoders: list, streams: list, encoded: list, first: int) -> tuple[float, float]:
    """Decode `encoded` as one part per decoder, each on a thread of its own: (wall seconds, seconds the first
    part's decode call blocked its thread)."""
    part = len(encoded) // len(decoders)
    prepared = []
    for j, decoder in enumerate(decoders):
        batch = decoder.prepare(encoded[j * part:(j + 1) * part], 1, first + j * part)
        decoder.allocate(batch, streams[0])
        prepared.append(batch)
    blocked = [0.0]

    def decode(j: int) -> None:
        batch, stream = prepared[j], streams[j]
        start = time.perf_counter()
        started = decoders[j].decoder.start(batch.streams, np.arange(len(batch.shapes)), batch.shapes,
                                            batch.addresses, stream.ptr, False, True)
        if j == 0:
            blocked[0] = time.perf_counter() - start
        started.finish()
        stream.synchronize()

    start = time.perf_counter()
    threads = [threading.Thread(target=decode, args=(j,)) for j in range(len(decoders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    for batch in prepared:
        batch.streams.close()
    return wall, blocked[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--loads", type=float, nargs="+", default=[1.0, 0.65])
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    import cupy

    data = Path(tempfile.mkdtemp(prefix="decode_lanes_")) / "images"
    make_image_folder(data, args.images)
    files = sorted(p for p in data.rglob("*") if p.is_file())
    batch = args.batch_size
    encoded = [np.fromfile(f, np.uint8) for f in files[:4 * batch]]
    lib = Library("headrace")
    for load in args.loads:
        pipe = lib.pipeline_def(batch_size=batch, num_threads=8, device_id=0, seed=42)(
            lambda load=load: train(lib, str(data), load))()
        pipe.build()
        stage = pipe._executor.gpu
        decoder_args = next(k.decoder.args for k in stage.kernels() if hasattr(k, "decoder"))
        with stage.ctx.active():
            for parts in (1, 2, 4, 8):
                decoders = [MixedDecoder(decoder_args, 0, 8, True, capacity=batch // parts) for _ in range(parts)]
                streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(parts)]
                for decoder, stream in zip(decoders, streams, strict=True):
                    decoder.warm_up(stream)
                runs = [split_batch(decoders, streams, encoded[(r % 4) * batch:(r % 4 + 1) * batch], (r % 4) * batch)
                        for r in range(args.repeats)]
                wall = statistics.median(w for w, _ in runs[1:])
                blocked = statistics.median(b for _, b in runs[1:])
                print(f"hw_decoder_load {load}, {parts} decoder(s): {wall * 1e3:.2f} ms a batch = {batch / wall:,.0f} "
                      f"img/s; the first part's decode call blocks {blocked * 1e3:.1f} ms", flush=True)
                for decoder in decoders:
                    decoder.release()
        pipe.close()


if __name__ == "__main__":
    main()
