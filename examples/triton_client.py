"""Send JPEG files to a Triton server running model_repository/ and print the top classes (the `classify`
ensemble), or the preprocessed tensors' shapes (`preprocess`), over HTTP or gRPC.

    python examples/triton_client.py photo1.jpg photo2.jpg                      # gRPC, localhost:8001
    python examples/triton_client.py --protocol http --url localhost:8000 *.jpg
    python examples/triton_client.py --model preprocess photo.jpg

Encoded images of different lengths travel as one UINT8 batch, each row zero-padded to the longest (the JPEG
decoder stops at the image's end marker), or with --one-per-request as separate requests of one image each."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def padded_batch(files: list[Path]) -> np.ndarray:
    data = [np.fromfile(f, np.uint8) for f in files]
    batch = np.zeros((len(data), max(len(d) for d in data)), np.uint8)
    for row, encoded in zip(batch, data, strict=True):
        row[:len(encoded)] = encoded
    return batch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="JPEG files")
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--url", help="host:port (default localhost:8001 for gRPC, localhost:8000 for HTTP)")
    parser.add_argument("--model", choices=("classify", "preprocess"), default="classify")
    parser.add_argument("--top", type=int, default=3, help="how many classes to print per image")
    parser.add_argument("--one-per-request", action="store_true", help="one request per image")
    args = parser.parse_args(argv)
    if args.protocol == "grpc":
        import tritonclient.grpc as client_module
    else:
        import tritonclient.http as client_module
    url = args.url or ("localhost:8001" if args.protocol == "grpc" else "localhost:8000")
    client = client_module.InferenceServerClient(url)
    if not client.is_model_ready(args.model):
        raise SystemExit(f"model '{args.model}' is not ready on {url}")

    groups = [[f] for f in args.files] if args.one_per_request else [args.files]
    for files in groups:
        batch = padded_batch(files)
        tensor = client_module.InferInput("images", list(batch.shape), "UINT8")
        tensor.set_data_from_numpy(batch)
        if args.model == "classify":
            # Triton's classification extension: the top classes as "score:index:label" strings
            wanted = [client_module.InferRequestedOutput("probabilities", class_count=args.top)]
            top = client.infer("classify", [tensor], outputs=wanted).as_numpy("probabilities")
            for file, classes in zip(files, top, strict=True):
                entries = [entry.decode().split(":") for entry in classes]
                print(f"{file}: " + ", ".join(f"{label} ({float(score):.3f})" for score, _, label in entries))
        else:
            images = client.infer("preprocess", [tensor]).as_numpy("normalized")
            for file, image in zip(files, images, strict=True):
                print(f"{file}: {image.dtype} {list(image.shape)}, mean {image.mean():+.4f}, std {image.std():.4f}")


if __name__ == "__main__":
    main()
