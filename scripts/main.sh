#!/usr/bin/env bash
# The main job, set-up included: make .venv, install headrace, generate an image folder (or take --data DIR),
# run the ResNet-50 training pipeline with a progress bar and print images/s, write the pipeline file.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e "packages/headrace-kernels[cpu]" -e "packages/headrace[cli]" \
    -e packages/headrace-torch   # the PyTorch iterators of the README's examples (brings torch)
.venv/bin/headrace demo "$@"
