"""Multi-GPU scaling: the ResNet-50 training pipeline's img/s on 1 GPU and on N GPUs of this host, one pipeline
per GPU (examples/train_distributed.py under torchrun, --no-model: the pipelines' own rate, or with a small DDP
model). The two world sizes alternate in rounds on the same JPEGs; medians and the scaling ratio are printed.

    python benchmarks/multi_gpu_scaling.py [--gpus 2] [--rounds 3] [--images 4096] [--epochs 4] [--model]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from headrace.data.synthetic import make_image_folder

EXAMPLE = Path(__file__).parents[1] / "examples" / "train_distributed.py"


def one_run(world: int, data: Path, args: argparse.Namespace, out: Path) -> float:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world),
               str(EXAMPLE), "--gpu", "--data", str(data), "--size", "224", "--batch-size", str(args.batch_size),
               "--epochs", str(args.epochs), "--threads", str(args.threads), "--json", str(out)]
    if not args.model:
        command.append("--no-model")
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["images_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=4, help="per run; the first warms up")
    parser.add_argument("--threads", type=int, default=8, help="per rank")
    parser.add_argument("--model", action="store_true", help="train a small CNN with DDP as well")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        data = make_image_folder(Path(scratch) / "images", args.images, 10, size=(375, 500), progress=True)
        rates: dict[int, list[float]] = {1: [], args.gpus: []}
        for round_ in range(args.rounds):
            for world in rates:
                rates[world].append(one_run(world, data, args, Path(scratch) / "out.json"))
                print(f"round {round_}: {world} GPU(s) {rates[world][-1]:.0f} img/s", flush=True)
    one, many = statistics.median(rates[1]), statistics.median(rates[args.gpus])
    print(f"median img/s: 1 GPU {one:.0f}, {args.gpus} GPUs {many:.0f}; scaling {many / one:.2f}x "
          f"({many / one / args.gpus:.0%} of linear)")


if __name__ == "__main__":
    main()
