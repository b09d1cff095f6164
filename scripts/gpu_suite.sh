#!/usr/bin/env bash
# On a GPU machine: the `gpu`-marked tests, their files dealt round-robin to N pytest processes run at once (the
# device image has no pytest-xdist), then the files that read the device's free memory, alone (another process's
# allocations would move it). Logs go to $OUT (or /tmp); the exit status is the worst of the runs.
# Usage: scripts/gpu_suite.sh [N=3] [extra pytest arguments...]
set -uo pipefail
cd "$(dirname "$0")/.."
n="${1:-3}"; shift || true
out="${OUT:-/tmp}"
export PYTHONPATH="$PWD/packages/headrace/src:$PWD/packages/headrace-kernels/src:$PWD/packages/headrace-torch/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import nvidia.nvimgcodec" 2>/dev/null || echo "WARNING: nvImageCodec does not import: the mixed decoders' tests will fail (it travels with DALI's parts, ../shared/tools/dali-gpu)"
mapfile -t marked < <(grep -l "mark.gpu\|pytestmark.*gpu" tests/test_*.py | sort)
mapfile -t alone < <(grep -l "memGetInfo" "${marked[@]}")
files=()
for f in "${marked[@]}"; do [[ " ${alone[*]} " == *" $f "* ]] || files+=("$f"); done
pytest_run() { python3 -m pytest -q -p no:cacheprovider -m gpu -rfEs "$@"; }
pids=()
for ((k = 0; k < n; k++)); do
  part=()
  for ((i = k; i < ${#files[@]}; i += n)); do part+=("${files[i]}"); done
  pytest_run "$@" "${part[@]}" >"$out/gpu_suite_$k.log" 2>&1 &
  pids+=($!)
done
status=0
for k in "${!pids[@]}"; do
  wait "${pids[k]}"; rc=$?
  [ "$rc" -gt "$status" ] && status=$rc
  echo "== process $k (exit $rc)"; tail -n 25 "$out/gpu_suite_$k.log"
done
pytest_run "$@" "${alone[@]}" >"$out/gpu_suite_alone.log" 2>&1; rc=$?
[ "$rc" -gt "$status" ] && status=$rc
echo "== alone: ${alone[*]} (exit $rc)"; tail -n 25 "$out/gpu_suite_alone.log"
exit "$status"
