#!/usr/bin/env bash
# The test suite, set-up included: make .venv-test, install headrace with the test tools, run pytest.
# GPU tests (marker gpu) skip themselves without a GPU; pass pytest options through, e.g. -m gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-test
.venv-test/bin/python -m pip install -q --upgrade pip
.venv-test/bin/python -m pip install -q -r requirements-test.txt
.venv-test/bin/python -m pip install -q -e "packages/headrace-kernels[cpu]" -e packages/headrace
.venv-test/bin/python -m pip install -q --no-deps -e packages/headrace-torch
# the Triton server binary and Python backend for the triton-marked tests (--no-deps: it pins numpy<2)
.venv-test/bin/python -m pip install -q --no-deps "nvidia-pytriton==0.7.0"
.venv-test/bin/python -m pytest -q "$@"
