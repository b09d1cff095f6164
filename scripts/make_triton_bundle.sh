#!/usr/bin/env bash
# Pack what a GPU machine without network needs to serve headrace with Triton into one .tar.xz (about 44 MB; the
# wheels alone are over the 64 MiB a device run can carry): from nvidia-pytriton 0.7.0 only tritonserver, the
# Python backend, the Python 3.12 stub and the bundled libraries they load (found with readelf), plus tritonclient
# with its HTTP dependencies and the nvImageCodec / nvJPEG wheels, installed for CPython 3.12.
# Usage: scripts/make_triton_bundle.sh OUT.tar.xz [EXTRA_WHEEL_DIR]   (EXTRA_WHEEL_DIR: e.g. the nvImageCodec wheels)
# Unpack with `tar -xJf OUT.tar.xz -C DIR` and put DIR on PYTHONPATH (scripts/gpu_triton_check.sh does).
set -euo pipefail
target="$(realpath "$1")"; extra="${2:-}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
platforms=(--platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64
           --platform manylinux_2_5_x86_64)
fetch=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
       "${platforms[@]}" -d "$work/wheels")
"${fetch[@]}" nvidia-pytriton==0.7.0
"${fetch[@]}" tritonclient==2.73.0 python-rapidjson geventhttpclient gevent zope.event zope.interface greenlet brotli
mkdir "$work/pytriton" && (cd "$work/pytriton" && unzip -q "$work"/wheels/nvidia_pytriton-*.whl)
rm "$work"/wheels/nvidia_pytriton-*.whl
python3 -m pip install -q --no-deps --no-compile --target "$work/site" --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" "$work"/wheels/*.whl ${extra:+"$extra"/*.whl}
rm -rf "$work/site/include" "$work"/site/gevent/tests "$work"/site/greenlet/tests "$work"/site/zope/interface/tests
cd "$work/pytriton"
python3 - "$work/site" <<'PY'
"""Copy tritonserver, the Python backend, the 3.12 stub and the closure of their bundled libraries."""
import re, shutil, subprocess, sys
from pathlib import Path

site, libs = Path(sys.argv[1]), Path("nvidia_pytriton.libs")
server = Path("pytriton/tritonserver")
roots = [server / "bin/tritonserver", server / "backends/python/libtriton_python.so",
         server / "python_backend_stubs/3.12/triton_python_backend_stub", server / "caches/local/libtritoncache_local.so"]
todo, keep = list(roots), set()
while todo:
    elf = todo.pop()
    for name in re.findall(r"NEEDED.*\[(.*)\]", subprocess.run(["readelf", "-d", elf], capture_output=True,
                                                               text=True, check=True).stdout):
        if (libs / name).exists() and libs / name not in keep:
            keep.add(libs / name)
            todo.append(libs / name)
for path in [*roots, server / "backends/python/triton_python_backend_utils.py", *sorted(keep)]:
    (site / path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, site / path)
PY
tar -C "$work/site" -cf - . | xz -9 -T1 > "$target"
ls -la "$target"
