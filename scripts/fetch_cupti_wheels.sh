#!/usr/bin/env bash
# On this machine (with an index): the wheels that `benchmarks/probes/stall_probe.py --cupti` needs on the GPU
# machine (Python 3.12), into .cupti-whl (ignored by git; about 24 MB, so it travels beside .whl in one call).
# CUPTI must be no newer than the driver's CUDA: 13.0 for the device's driver 580.
# On the GPU machine: python3 -m pip install -q --no-index --no-deps --target /tmp/site .cupti-whl/*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cupti-whl
for spec in "cupti-python==13.0.1" "cuda-bindings==13.0.3" "cuda-pathfinder" "pyelftools"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any -d .cupti-whl "$spec"
done
python3 -m pip download -q --no-deps -d .cupti-whl "nvidia-cuda-cupti==13.0.85"  # a py3 wheel: any Python
ls -la .cupti-whl
