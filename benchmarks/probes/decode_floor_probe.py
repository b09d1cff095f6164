"""The floor under a served request at concurrency 1: how long one JPEG of the serving benchmark (427x640, as
triton_preprocess.py sends) takes to decode alone, by every decoder there is for it, waited for, back to back and
after idle. Whatever a model then does (resize, normalize, answer) comes on top, so no served model can add less
than the fastest of these over a model that does no work.

    python benchmarks/probes/decode_floor_probe.py [--batches 500] [--gap-ms 0 1]
"""

from __future__ import annotations

import argparse
import io
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from serving_profile import per_batch_ms  # noqa: E402
from triton_helpers import jpegs  # noqa: E402


def host_decoders(images: list[np.ndarray]) -> dict:
    """libjpeg-turbo through OpenCV and through Pillow (where installed): one image to RGB pixels in host memory."""
    decoders = {}
    turn = itertools.count()
    try:
        import cv2
        decoders["OpenCV imdecode (libjpeg-turbo)"] = lambda: cv2.imdecode(images[next(turn) % 2], cv2.IMREAD_COLOR)
    except ImportError:
        print("OpenCV: not installed")
    try:
        from PIL import Image
        encoded = [image.tobytes() for image in images]
        decoders["Pillow (libjpeg-turbo)"] = lambda: np.asarray(
            Image.open(io.BytesIO(encoded[next(turn) % 2])).convert("RGB"))
    except ImportError:
        print("Pillow: not installed")
    return decoders


def nvimgcodec_decoders(images: list[np.ndarray]) -> dict:
    """nvImageCodec with each of its backends alone (the hardware decoder, CUDA, CUDA with host Huffman, the CPU),
    one image per decode call, waited for on the device."""
    from nvidia import nvimgcodec

    try:
        import cupy
        gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy or no CUDA driver: no GPU
        gpu = False
    wait = cupy.cuda.runtime.deviceSynchronize if gpu else (lambda: None)
    kinds = {"hardware decoder": nvimgcodec.BackendKind.HW_GPU_ONLY, "CUDA": nvimgcodec.BackendKind.GPU_ONLY,
             "hybrid (host Huffman, CUDA)": nvimgcodec.BackendKind.HYBRID_CPU_GPU,
             "CPU": nvimgcodec.BackendKind.CPU_ONLY}
    decoders = {}
    turn = itertools.count()
    for label, kind in kinds.items():
        if not gpu and kind != nvimgcodec.BackendKind.CPU_ONLY:
            continue
        try:
            decoder = nvimgcodec.Decoder(backends=[nvimgcodec.Backend(kind)])
            if decoder.decode(images[0]) is None:
                raise RuntimeError("it does not decode this JPEG")
        except Exception as exc:  # noqa: BLE001 - a backend this machine lacks is reported, not fatal
            print(f"nvImageCodec {label}: unavailable ({exc})")
            continue

        def call(decoder=decoder):
            decoder.decode(images[next(turn) % 2])
            wait()

        decoders[f"nvImageCodec {label}"] = call
    return decoders


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=500, help="timed calls per decoder, one image each")
    parser.add_argument("--gap-ms", type=float, nargs="*", default=[0.0, 1.0])
    args = parser.parse_args(argv)
    images = [jpegs(5, seed=0)[4], jpegs(5, seed=1)[4]]  # triton_preprocess.py's two 427x640 images
    decoders = {**host_decoders(images), **nvimgcodec_decoders(images)}
    print(f"one 427x640 JPEG ({len(images[0])} / {len(images[1])} B), decoded alone, p50 of {args.batches}:")
    for label, call in decoders.items():
        figures = ", ".join(f"{per_batch_ms(call, args.batches, gap / 1e3)[0]:.3f} ms"
                            + (f" after {gap:g} ms idle" if gap else " back to back") for gap in args.gap_ms)
        print(f"  {label:<44}{figures}")


if __name__ == "__main__":
    main()
