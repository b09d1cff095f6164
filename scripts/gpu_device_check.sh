#!/usr/bin/env bash
# On a GPU machine: install carried wheels (if a .whl folder is given), run the GPU tests and the GPU benchmark.
# Usage: scripts/gpu_device_check.sh [WHEEL_DIR]   (writes logs to $OUT when set)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"
if [ -n "${1:-}" ]; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$1"/*.whl; fi
export PYTHONPATH="$PWD/packages/headrace/src:$PWD/packages/headrace-kernels/src:$PWD/packages/headrace-torch/src:$PWD"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__)"
python3 -m pytest -q -p no:cacheprovider -rfEs tests/ 2>&1 | tee "$out/tests.log" | tail -40
python3 benchmarks/gpu_train.py 2>&1 | tee "$out/bench.log"
