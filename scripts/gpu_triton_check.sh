#!/usr/bin/env bash
# On a GPU machine without network: unpack a bundle of the Triton server and the client packages, run the KIND_GPU
# Triton tests and the GPU serving benchmark. Logs go to $OUT when set.
# Usage: scripts/gpu_triton_check.sh BUNDLE.tar.xz [--no-tests] [BENCHMARK ARGS...]
#   --no-tests: only the benchmark (the KIND_GPU Triton tests ran in an earlier call on this machine)
#   BUNDLE: made by scripts/make_triton_bundle.sh (tritonserver + Python backend + 3.12 stub + bundled libraries
#   from nvidia-pytriton, tritonclient with its HTTP deps, nvImageCodec and nvJPEG wheels, unpacked).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"
bundle="$1"; shift
tests=1
if [ "${1:-}" = "--no-tests" ]; then tests=0; shift; fi
site=/tmp/headrace-site
mkdir -p "$site" && tar -xJf "$bundle" -C "$site" || exit 1
rm -f "$site/nvidia/__init__.py"  # a namespace package, so that nvidia.dali is found beside nvidia.nvimgcodec
export PYTHONPATH="$site:$PWD/packages/headrace/src:$PWD/packages/headrace-kernels/src:$PWD/packages/headrace-torch/src"
# DALI's GPU build where scripts/gpu_session.sh setup put it: the benchmark's --dali peer imports it
[ -d /tmp/dali-site/nvidia/dali ] && PYTHONPATH="$PYTHONPATH:/tmp/dali-site"
export PYTHONUNBUFFERED=1 TRITONSERVER_ROOT="$site/pytriton/tritonserver"
exec > >(tee "$out/setup.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
libdir=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))")
python3 -c "import sys, numpy, cupy, torch; print(sys.executable, sys.version.split()[0], 'numpy', numpy.__version__,
'cupy', cupy.__version__, 'torch', torch.__version__)"
if [ ! -e "$libdir/libpython3.12.so.1.0" ]; then  # the stub needs the shared libpython of this Python
  found=$(find / -xdev -name 'libpython3.12.so.1.0' 2>/dev/null | head -1)
  echo "no libpython3.12.so.1.0 in $libdir; found: ${found:-none}"
  [ -n "$found" ] && export LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
LD_LIBRARY_PATH="$site/nvidia_pytriton.libs:$libdir:${LD_LIBRARY_PATH:-}" \
  ldd "$TRITONSERVER_ROOT/python_backend_stubs/3.12/triton_python_backend_stub" | grep -E "python|not found"
[ "$tests" = 1 ] && python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_triton_server.py -k "gpu" 2>&1 |
  tee "$out/gpu_triton_tests.log" | tail -30
python3 benchmarks/triton_preprocess.py --kind KIND_GPU "$@" 2>&1 | tee "$out/gpu_triton_bench.log"
