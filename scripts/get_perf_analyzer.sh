#!/usr/bin/env bash
# Fetch NVIDIA's perf_analyzer (Triton's C++ load generator) for benchmarks/triton_preprocess.py --perf-analyzer DIR.
# PyPI's `perf-analyzer` 0.1.0 is an empty placeholder; tritonclient wheels up to 2.55 carry the real binary, so take
# it from tritonclient 2.51.0 (the release of nvidia-pytriton's tritonserver), with the two shared libraries it
# needs beyond the C/C++ runtime: libcudart.so.12 (nvidia-cuda-runtime-cu12 wheel; loaded even for system shared
# memory) and libb64.so.0d (Debian/Ubuntu package libb64-0d, fetched with apt-get download, nothing installed).
# Usage: scripts/get_perf_analyzer.sh DIR   ->  DIR/perf_analyzer, DIR/lib/; run it with LD_LIBRARY_PATH=DIR/lib
# (x86-64 Linux: the binary and the libraries are built for it)
set -euo pipefail
target="$(realpath -m "${1:?usage: $0 DIR}")"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$target/lib"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$work" tritonclient==2.51.0 \
  nvidia-cuda-runtime-cu12==12.9.79
(cd "$work" && unzip -q -o tritonclient-*.whl 'tritonclient-*.data/data/bin/perf_analyzer' \
  && unzip -q -o nvidia_cuda_runtime_cu12-*.whl 'nvidia/cuda_runtime/lib/libcudart.so.12')
install -m 755 "$work"/tritonclient-*.data/data/bin/perf_analyzer "$target/perf_analyzer"
cp "$work/nvidia/cuda_runtime/lib/libcudart.so.12" "$target/lib/"
(cd "$work" && apt-get download libb64-0d >/dev/null && dpkg -x libb64-0d_*.deb b64)
cp "$work"/b64/usr/lib/x86_64-linux-gnu/libb64.so.0d "$target/lib/"
LD_LIBRARY_PATH="$target/lib" "$target/perf_analyzer" --version
