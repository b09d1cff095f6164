#!/usr/bin/env bash
# CPU data-loading benchmark, set-up included: makes .venv-bench (headrace, torch + torchvision, DALI's CPU build),
# then runs headrace, torchvision's DataLoader and DALI on the same generated JPEGs in one process.
# Arguments go to benchmarks/cpu_train.py (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-bench/bin/python ]; then
  python3 -m venv .venv-bench
fi
.venv-bench/bin/python -m pip install -q --upgrade pip
.venv-bench/bin/python -m pip install -q "torch==2.14.1" "torchvision==0.29.1" nvidia-dali-cuda130 tqdm \
  -e "packages/headrace-kernels[cpu]" -e packages/headrace
.venv-bench/bin/python benchmarks/cpu_train.py "$@"
