"""Does a busy Python thread slow nvImageCodec's batched GPU decode (its binding takes the GIL per image)? Times one
decode of 256 random-crop regions alone, beside a pure-Python spinner, and beside it with a 10 us switch interval.

    python benchmarks/probes/gil_decode_probe.py
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from headrace.data.synthetic import make_image_folder


def main() -> None:
    import cupy as cp
    from nvidia import nvimgcodec as nv

    with tempfile.TemporaryDirectory() as tmp:
        root = make_image_folder(Path(tmp) / "images", num_images=256, num_classes=1, size=(375, 500), seed=0)
        data = [f.read_bytes() for f in sorted(root.rglob("*.jpg"))]
    rng = np.random.default_rng(0)
    streams = []
    for d in data:
        s = nv.CodeStream(d)
        h, w = s.height, s.width
        ch, cw = int(h * rng.uniform(0.3, 1)), int(w * rng.uniform(0.3, 1))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        streams.append(s.get_sub_code_stream(region=nv.Region(start=(y, x), end=(y + ch, x + cw))))
    stream = cp.cuda.Stream(non_blocking=True)
    for label, backends in (("hardware only", [nv.Backend(nv.BackendKind.HW_GPU_ONLY)]),
                            ("headrace's backends", [nv.Backend(nv.BackendKind.HW_GPU_ONLY, load_hint=0.65),
                                                     nv.Backend(nv.BackendKind.GPU_ONLY),
                                                     nv.Backend(nv.BackendKind.HYBRID_CPU_GPU),
                                                     nv.Backend(nv.BackendKind.CPU_ONLY)])):
        decoder = nv.Decoder(device_id=0, max_num_cpu_threads=8, backends=backends)

        def timed(decoder, n=8):
            decoder.decode(streams, cuda_stream=stream.ptr)
            stream.synchronize()
            start = time.perf_counter()
            for _ in range(n):
                decoder.decode(streams, cuda_stream=stream.ptr)
            stream.synchronize()
            return (time.perf_counter() - start) / n * 1e3

        alone = timed(decoder)
        stop = threading.Event()

        def spin(stop):
            x = 0
            while not stop.is_set():
                x += 1

        spinner = threading.Thread(target=spin, args=(stop,))
        spinner.start()
        beside = timed(decoder)
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)
        beside_fast = timed(decoder)
        sys.setswitchinterval(old)
        stop.set()
        spinner.join()
        print(f"{label:20s}: decode of 256 ROI images {alone:6.2f} ms alone, {beside:6.2f} ms beside a Python "
              f"thread, {beside_fast:6.2f} ms beside it with a 10 us switch interval")
        del decoder


if __name__ == "__main__":
    main()
