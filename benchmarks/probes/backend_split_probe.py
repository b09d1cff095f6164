"""At hw_decoder_load below 1, how does nvImageCodec's one-decoder chain (hardware decoder, then CUDA) split a batch,
and would the hardware share and the CUDA share decode faster on two decoders called at once?

For each batch it decodes the same windows three times: with the chain (as the mixed decoder does), with a
hardware-only decoder and with a CUDA-only decoder, and tells from the pixels which images the chain gave to the
hardware decoder. Then it times the chain against the two shares on their own decoders and threads, at once, and
the CUDA share with nvImageCodec's GPU Huffman decoding (`--cuda-options`) against its default (host Huffman below
10^6 pixels), with the bits of both (benchmarks/HISTORY.md, 2026-11-28, has its first run).

    python benchmarks/probes/backend_split_probe.py [--images 1024] [--batch-size 256] [--load 0.65]
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

from gpu_vs_dali import Library, train, validation

from headrace.data.synthetic import make_image_folder
from headrace_kernels import nvimgcodec_capi as capi
from headrace_kernels.gpu.decode import MixedDecoder


class CudaOnly:
    """A bare C API decoder in the role of a MixedDecoder (`.decoder`, `.release()`)."""

    def __init__(self, decoder):
        self.decoder = decoder

    def release(self) -> None:
        self.decoder.close()


def digests(cp, prepared) -> list[bytes]:
    """Each decoded image's bytes, as a hashable key."""
    return [cp.asnumpy(cp.asarray(image)).tobytes() for image in prepared.images]


def decode_parts(parts: list, streams: list) -> float:
    """Decode each (decoder, prepared, which) part on a thread and stream of its own, all at once: wall seconds."""
    def run(j: int) -> None:
        decoder, prepared, which = parts[j]
        if len(which):
            decoder.start(prepared.streams, which, prepared.shapes[which], prepared.addresses[which],
                          streams[j].ptr, False, True).finish()
        streams[j].synchronize()

    start = time.perf_counter()
    threads = [threading.Thread(target=run, args=(j,)) for j in range(len(parts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def classify(cp, name: str, made: dict, prepared_for, batches: list, n: int, streams: list) -> list[np.ndarray]:
    """Per batch, the indices the chain gave the hardware decoder: its pixels equal the hardware-only decoder's and
    differ from the CUDA-only decoder's."""
    hw_sets = []
    for b in range(len(batches)):
        outs = {}
        for label in ("chain", "hw", "cuda"):
            prepared = prepared_for(b)
            decode_parts([(made[label].decoder, prepared, np.arange(n))], streams)
            outs[label] = digests(cp, prepared)
            prepared.streams.close()
        triples = list(zip(outs["chain"], outs["hw"], outs["cuda"], strict=True))
        hw = np.flatnonzero([c == h and c != u for c, h, u in triples])
        cuda = sum(c == u and c != h for c, h, u in triples)
        same = sum(h == u for _, h, u in triples)
        first_k = bool(len(hw)) and int(hw.max()) + 1 == len(hw)
        print(f"{name}, batch {b}: the chain's pixels are the hardware decoder's on {len(hw)}, the CUDA decoder's on "
              f"{cuda}, neither on {n - len(hw) - cuda} (the two agree on {same}); the hardware share is the first "
              f"{len(hw)} in input order: {first_k}", flush=True)
        hw_sets.append(hw)
    return hw_sets


def time_cases(name: str, load: float, made: dict, cuda_variants: dict, prepared_for, hw_sets: list, n: int,
               streams: list, repeats: int) -> None:
    """Median wall time per batch of each way of decoding it."""
    everything = np.arange(n)

    def rest(hw: np.ndarray) -> np.ndarray:
        return np.setdiff1d(everything, hw)

    def hw_two(hw: np.ndarray, p) -> list:
        return [(made["hw"].decoder, p, hw[: len(hw) // 2]), (made["hw2"].decoder, p, hw[len(hw) // 2:])]

    cases = {
        "chain, one decoder": lambda p, hw: [(made["chain"].decoder, p, everything)],
        "hardware share alone": lambda p, hw: [(made["hw"].decoder, p, hw)],
        "CUDA share alone": lambda p, hw: [(made["cuda"].decoder, p, rest(hw))],
        "hw share + CUDA share at once": lambda p, hw: [(made["hw"].decoder, p, hw),
                                                         (made["cuda"].decoder, p, rest(hw))],
        "hw share on two + CUDA share, at once": lambda p, hw: [*hw_two(hw, p), (made["cuda"].decoder, p, rest(hw))],
    }
    for opt, decoder in cuda_variants.items():
        cases[f"CUDA share alone, options {opt!r}"] = lambda p, hw, d=decoder: [(d, p, rest(hw))]
        cases[f"hw share on two + CUDA share at once, options {opt!r}"] = \
            lambda p, hw, d=decoder: [*hw_two(hw, p), (d, p, rest(hw))]
    for label, make_parts in cases.items():
        try:
            runs = []
            for r in range(repeats):
                b = r % len(hw_sets)
                prepared = prepared_for(b)
                runs.append(decode_parts(make_parts(prepared, hw_sets[b]), streams))
                prepared.streams.close()
            ms = statistics.median(runs[1:]) * 1e3
            print(f"{name}, load {load}: {label}: {ms:.2f} ms a batch = {n / ms * 1e3:,.0f} img/s", flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe: report and go on
            print(f"{name}: {label}: failed ({exc})", flush=True)


def compare_variants(cp, name: str, made: dict, cuda_variants: dict, prepared_for, n: int, streams: list) -> None:
    """The bits of each CUDA decoder variant against the plain CUDA decoder, on the first batch."""
    for opt, decoder in cuda_variants.items():
        plain, other = prepared_for(0), prepared_for(0)
        decode_parts([(made["cuda"].decoder, plain, np.arange(n))], streams)
        decode_parts([(decoder, other, np.arange(n))], streams)
        equal = sum(a == b for a, b in zip(digests(cp, plain), digests(cp, other), strict=True))
        print(f"{name}: CUDA decoder with options {opt!r}: {equal}/{n} images equal to the plain one", flush=True)
        plain.streams.close()
        other.streams.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--load", type=float, default=0.65)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--cuda-options", nargs="*", default=["nvjpeg_cuda_decoder:hybrid_huffman_threshold=0"],
                        help="option strings for further CUDA-only decoders (this default: Huffman on the GPU)")
    args = parser.parse_args()
    import cupy as cp

    data = Path(tempfile.mkdtemp(prefix="backend_split_")) / "images"
    make_image_folder(data, args.images)
    files = sorted(p for p in data.rglob("*") if p.is_file())
    n, threads = args.batch_size, args.threads
    batches = [[np.fromfile(f, np.uint8) for f in files[b * n:(b + 1) * n]] for b in range(len(files) // n)]
    lib = Library("headrace")
    for name, body in (("train crops", train), ("validation", validation)):
        pipe = lib.pipeline_def(batch_size=n, num_threads=threads, device_id=0, seed=42)(
            lambda body=body: body(lib, str(data), args.load))()
        pipe.build()
        stage = pipe._executor.gpu
        base_args = next(k.decoder.args for k in stage.kernels() if hasattr(k, "decoder"))
        crop = name == "train crops"
        with stage.ctx.active():
            made = {}
            for label, load in (("chain", args.load), ("hw", 1.0), ("hw2", 1.0)):
                decoder = MixedDecoder({**base_args, "hw_decoder_load": load}, 0, threads, crop, capacity=n)
                decoder.warm_up(cp.cuda.Stream(non_blocking=True))
                made[label] = decoder
            # nvImageCodec registers its CUDA JPEG decoder as the HYBRID_CPU_GPU backend (none is GPU_ONLY)
            made["cuda"] = CudaOnly(capi.Decoder(capi.Instance.shared(), 0, threads, [(capi.BACKEND_HYBRID, 1.0)]))
            cuda_variants = {opt: capi.Decoder(capi.Instance.shared(), 0, threads, [(capi.BACKEND_HYBRID, 1.0)],
                                               options=opt) for opt in args.cuda_options}
            streams = [cp.cuda.Stream(non_blocking=True) for _ in range(3)]

            def prepared_for(b: int, made=made, streams=streams):
                prepared = made["chain"].prepare(batches[b], 7, b * n)
                made["chain"].allocate(prepared, streams[0])
                return prepared

            hw_sets = classify(cp, name, made, prepared_for, batches, n, streams)
            time_cases(name, args.load, made, cuda_variants, prepared_for, hw_sets, n, streams, args.repeats)
            compare_variants(cp, name, made, cuda_variants, prepared_for, n, streams)
            for decoder in [*made.values(), *cuda_variants.values()]:
                getattr(decoder, "release", getattr(decoder, "close", None))()
        pipe.close()


if __name__ == "__main__":
    main()
