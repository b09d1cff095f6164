#!/usr/bin/env bash
# scratch: device calls of this session (untracked; deleted before the stop)
set -u
mode="$1"; shift
export PYTHONPATH=$PWD/packages/headrace/src:$PWD/packages/headrace-kernels/src:$PWD/packages/headrace-torch/src:$PWD:/tmp/site:/tmp/site-codec:/tmp/site-cupti
# one target per wheel folder: pip --target --upgrade replaces a whole top-level folder (nvidia/) of the target
for d in .whl .codec-whl .cupti-whl; do
  t=/tmp/site; [ "$d" = .codec-whl ] && t=/tmp/site-codec; [ "$d" = .cupti-whl ] && t=/tmp/site-cupti
  [ -d "$d" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $t $d/*.whl 2>&1 | grep -v "WARNING: Target directory" | tail -3
done
[ -d /tmp/dali-site ] && export PYTHONPATH=$PYTHONPATH:/tmp/dali-site
if [ ! -d /tmp/img ]; then
  python3 -c "import headrace.data.synthetic as s; s.make_image_folder('/tmp/img', 2048, 10, size=(375,500))" > /tmp/img.log 2>&1
fi
case "$mode" in
  suite) scripts/gpu_suite.sh 4 ;;
  *) eval "$mode" ;;
esac
