"""Regenerate model_repository/: the preprocess pipeline file and its config.pbtxt (headrace's generic backend), the
tiny classifier's weights and config (Python backend with torch), and the ensemble that chains them.

    python scripts/make_model_repository.py [--out model_repository] [--dtype fp32|fp16] [--kind KIND_CPU|KIND_GPU]
                                            [--instances N] [--queue-delay-us US]

Everything written is deterministic: running it again gives the same files."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from headrace import fn, pipeline_def, types
from headrace.cli.loading import non_negative_int, positive_int
from headrace.serving import triton_config
from headrace.serving.config import MEASURED_INSTANCE_COUNTS

ROOT = Path(__file__).resolve().parent.parent
IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
IMAGENET_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
NUM_CLASSES = 10
MAX_BATCH = 32


@pipeline_def(batch_size=MAX_BATCH, num_threads=2, device_id=None, seed=0, prefetch_queue_depth=1)
def preprocess(dtype=types.FLOAT, device: str = "cpu", hw_decoder_load: float = 1.0):
    """The validation preprocessing: decode, shorter side to 256, centre crop 224, normalize, NCHW.

    On the GPU every JPEG is offered to the hardware decoder (where the GPU has one; CUDA otherwise): on an H200 this
    ran the pipeline offline at 11.2k img/s at batch 32 against 3.9k with DALI's default split (0.65), where the
    CUDA decoder's share was the bottleneck; and with the whole batch on one decoder, an image's values do not
    depend on the batch Triton puts it in (tests/test_triton_server.py::test_gpu_instance_errors_and_burst)."""
    jpegs = fn.external_source(name="images", dtype=types.UINT8, ndim=1)
    if device == "gpu":
        images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB, hw_decoder_load=hw_decoder_load)
    else:
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
    images = fn.resize(images, resize_shorter=256)
    return fn.crop_mirror_normalize(images, crop=(224, 224), dtype=dtype, output_layout="CHW", mean=IMAGENET_MEAN,
                                    std=IMAGENET_STD, name="normalized")


def classifier_config(dtype: str, kind: str) -> str:
    # on a GPU instance the preprocessed images stay on the GPU between the two models of the ensemble (the Python
    # backend would otherwise copy every input to the host)
    gpu_inputs = ('parameters {\n  key: "FORCE_CPU_ONLY_INPUT_TENSORS"\n  value: { string_value: "no" }\n}\n'
                  if kind == "KIND_GPU" else "")
    return f'''name: "classifier"
backend: "python"
max_batch_size: {MAX_BATCH}
input [
  {{
    name: "normalized"
    data_type: {dtype}
    dims: [ 3, 224, 224 ]
  }}
]
output [
  {{
    name: "probabilities"
    data_type: TYPE_FP32
    dims: [ {NUM_CLASSES} ]
    label_filename: "labels.txt"
  }}
]
dynamic_batching {{
  max_queue_delay_microseconds: 500
}}
instance_group [
  {{
    count: 1
    kind: {kind}
  }}
]
{gpu_inputs}'''


ENSEMBLE_CONFIG = f'''name: "classify"
platform: "ensemble"
max_batch_size: {MAX_BATCH}
input [
  {{
    name: "images"
    data_type: TYPE_UINT8
    dims: [ -1 ]
  }}
]
output [
  {{
    name: "probabilities"
    data_type: TYPE_FP32
    dims: [ {NUM_CLASSES} ]
  }}
]
ensemble_scheduling {{
  step [
    {{
      model_name: "preprocess"
      model_version: -1
      input_map {{ key: "images" value: "images" }}
      output_map {{ key: "normalized" value: "normalized" }}
    }},
    {{
      model_name: "classifier"
      model_version: -1
      input_map {{ key: "normalized" value: "normalized" }}
      output_map {{ key: "probabilities" value: "probabilities" }}
    }}
  ]
}}
'''

LABELS = ["tench", "goldfish", "shark", "hammerhead", "ray", "cock", "hen", "ostrich", "brambling", "goldfinch"]


def _load_module(path: Path):
    """The classifier's model.py as a module (it lives in the repository, where Triton expects it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("classifier_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--dtype", choices=("fp32", "fp16"), default="fp32", help="element type of the images")
    parser.add_argument("--kind", choices=("KIND_CPU", "KIND_GPU"), default="KIND_CPU")
    parser.add_argument("--instances", type=positive_int,
                        help="preprocess instances (default: what measured best, "
                             f"{MEASURED_INSTANCE_COUNTS['KIND_CPU']} for KIND_CPU, "
                             f"{MEASURED_INSTANCE_COUNTS['KIND_GPU']} for KIND_GPU)")
    parser.add_argument("--queue-delay-us", type=non_negative_int, default=0,
                        help="preprocess's dynamic batching delay (default 0)")
    args = parser.parse_args(argv)
    instances = MEASURED_INSTANCE_COUNTS[args.kind] if args.instances is None else args.instances
    import torch

    TinyClassifier = _load_module(ROOT / "model_repository" / "classifier" / "1" / "model.py").TinyClassifier  # noqa: N806

    dtype = types.FLOAT16 if args.dtype == "fp16" else types.FLOAT
    triton_dtype = "TYPE_FP16" if args.dtype == "fp16" else "TYPE_FP32"
    out: Path = args.out
    pipe = preprocess(dtype=dtype, device="gpu" if args.kind == "KIND_GPU" else "cpu")
    (out / "preprocess" / "1").mkdir(parents=True, exist_ok=True)
    pipe.serialize(out / "preprocess" / "1" / "pipeline.json")
    (out / "preprocess" / "config.pbtxt").write_text(
        triton_config(pipe, "preprocess", MAX_BATCH, args.kind, instances, max_queue_delay_us=args.queue_delay_us))

    (out / "classifier" / "1").mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = TinyClassifier(NUM_CLASSES)
    torch.save(model.state_dict(), out / "classifier" / "1" / "weights.pt")
    model_py = out / "classifier" / "1" / "model.py"
    source = ROOT / "model_repository" / "classifier" / "1" / "model.py"
    if model_py.resolve() != source.resolve():
        shutil.copyfile(source, model_py)
    (out / "classifier" / "config.pbtxt").write_text(classifier_config(triton_dtype, args.kind))
    (out / "classifier" / "labels.txt").write_text("\n".join(LABELS) + "\n")

    (out / "classify" / "1").mkdir(parents=True, exist_ok=True)
    (out / "classify" / "1" / ".keep").write_text("")  # an ensemble needs a version folder, even empty
    (out / "classify" / "config.pbtxt").write_text(ENSEMBLE_CONFIG)
    print(f"wrote {out}: preprocess (headrace backend, {args.kind}), classifier (torch), classify (ensemble)")


if __name__ == "__main__":
    main()
