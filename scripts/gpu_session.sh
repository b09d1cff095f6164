#!/usr/bin/env bash
# On the GPU machine: the usual steps of a device session, each one's whole output in $OUT/STEP.log and its last
# lines (progress bars dropped) on stdout, so that one call's output keeps every step's result.
# Usage: scripts/gpu_session.sh STEP...  Steps:
#   setup     DALI's GPU build from .dali-part5 (../shared/tools/dali-gpu: the earlier parts copied by earlier calls)
#             into /tmp/dali-site where absent and carried, the wheels of .whl into /tmp/site, nvImageCodec's from
#             .codec-whl where nothing provides it yet (a session without DALI), 2048 JPEGs in /tmp/img
#   suite     scripts/gpu_suite.sh 4 (the gpu-marked tests)
#   memory    the free-memory test of the decoders three times in new processes
#   table     gpu_vs_dali.py: the pipelines and their decoder-alone cuts, same run as DALI
#   fresh     gpu_vs_dali.py --fresh, then again with --headrace-lanes 1 (first batch and GPU memory, new processes)
#   ssd       probes/ssd_stage_probe.py --cuts full slice, then ssd_cpu.py --device gpu (SSD300, same run as DALI)
#   stall     probes/stall_probe.py at hw_decoder_load 1.0 with a second identical pipeline
#   iterator  gpu_vs_dali.py --fresh --iterator: GPU memory and first batch with the batches taken through each
#             library's PyTorch iterator (DALI's copies each batch into a torch tensor), new processes
#   fed       gpu_vs_dali.py's fed case (the served pipeline, encoded JPEGs fed per batch): rates against DALI,
#             then GPU memory and first batch in new processes
#   first     gpu_vs_dali.py --fresh with --profile-first: each phase of a new process's first batch, and one more
#             process per library under yappi (its whole output is in $OUT/first.log)
#   hostprof  probes/ssd_stage_probe.py --cuts full --yappi 96: SSD300's host time per thread and function (CPU
#             clock), for the look-ahead's tail (its whole output is in $OUT/hostprof.log)
#   ahead     probes/ssd_stage_probe.py --libs headrace --cuts full "full worker 2 ahead": whether the GPU stage still
#             waits for the CPU stage's worker when the worker is asked two runs ahead (its waits per cut)
#   helper    the plan helper's tests, then probes/ssd_stage_probe.py --libs headrace --cuts full "full plan at home":
#             the fused chain's host plans in a helper process (plan_process, the default here) against in the
#             pipeline's process, and against the GPU stage collecting and placing them (place_in_gpu_stage)
#   serving   probes/serving_profile.py --device gpu --phases: the served pipeline in process against its decoder
#             alone (the floor under a served request)
#   triton    scripts/gpu_triton_check.sh .triton/bundle.tar.xz with 8 instances (as served) and outputs through
#             system shared memory, then a 60 s serving_soak.py on KIND_GPU (carry .triton:
#             scripts/make_triton_bundle.sh)
#   lone      probes/serving_profile.py --dali: a served batch of 1 / 5 / 8 in process against DALI's served model's own
#             work, back to back and after 1 ms idle, the GPU stage's parts, and a cProfile of 1,000 batches of one
#             (after setup: DALI's GPU build)
#   idle      probes/serving_profile.py --dali: a served batch of one after 0 / 0.25 / 1 / 4 ms of idle against DALI's,
#             and the timeline of each (which parts grow after idle: the gap left at concurrency 1; after setup)
#   abserve   benchmarks/ab_trees.py: a served batch of one (serving_profile.py's BatchRunner img/s) with the tree in
#             .ab-base (ignored: `git archive OLD packages kernels | tar -x -C .ab-base`; carry it) against this one, in
#             alternating processes, 5 rounds
#   abidle    the same after 1 ms of idle before each batch (--gap-ms 1; 4 rounds): what a request at concurrency 1
#             meets
#   bg        the KIND_GPU Triton tests, then the triton step's check with --background 2 0: headrace's model
#             answered from a worker thread (respond_in_background) against the same answering in execute and the
#             null model, same rounds (carry .triton)
#   peer      the triton step's check with --dali: DALI's GPU build serving the same pipeline in the same backend (8
#             instances each), measured in alternation with headrace and the null model (after setup; carry .triton)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"
export PYTHONPATH="$PWD/packages/headrace/src:$PWD/packages/headrace-kernels/src:$PWD/packages/headrace-torch/src:$PWD:/tmp/site:/tmp/dali-site"
export PYTHONUNBUFFERED=1
step() {
  case "$1" in
    setup)
      [ -d /tmp/dali-site/nvidia/dali ] || [ ! -d .dali-part5 ] || bash .dali-part5/install.sh
      [ -d /tmp/site ] || [ ! -d .whl ] || python3 -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
      if [ -d .codec-whl ] && ! python3 -c "import nvidia.nvimgcodec" 2>/dev/null; then
        # one wheel of each: .whl and .codec-whl both hold yappi's, and pip refuses a wheel given twice
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
          $(ls .codec-whl/*.whl | grep -v -F -f <(ls .whl 2>/dev/null | grep "\.whl$"))
        rm -f /tmp/site/nvidia/__init__.py  # a namespace package, as nvImageCodec's wheels expect
      fi
      [ -d /tmp/img ] || python3 -c "import headrace.data.synthetic as s; s.make_image_folder('/tmp/img', 2048, 10, size=(375, 500))"
      nvidia-smi --query-gpu=name,driver_version --format=csv,noheader ;;
    suite) scripts/gpu_suite.sh 4 ;;
    memory)
      for _ in 1 2 3; do
        python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_decode.py -k memory_is_flat 2>&1 |
          grep -E "^E |passed|failed|skipped" | head -8
      done ;;
    table) python3 benchmarks/gpu_vs_dali.py --data /tmp/img --rounds 7 --cases "train 0.65" "decode crop 0.65" \
             "train 1.0" "decode crop 1.0" validation "decode 0.65" ;;
    fresh)
      python3 benchmarks/gpu_vs_dali.py --data /tmp/img --fresh --repeats 2 --epochs 3
      python3 benchmarks/gpu_vs_dali.py --data /tmp/img --fresh --repeats 2 --epochs 3 --cases "train 1.0" \
        --libs headrace --headrace-lanes 1 ;;
    ssd)
      python3 benchmarks/probes/ssd_stage_probe.py --cuts full slice --images 512 --rounds 5
      python3 benchmarks/ssd_cpu.py --device gpu --rounds 5 --workdir /tmp/bench ;;
    stall) python3 benchmarks/probes/stall_probe.py --data /tmp/img --rounds 12 --variant lanes=2 ;;
    iterator) python3 benchmarks/gpu_vs_dali.py --data /tmp/img --fresh --repeats 2 --epochs 3 --iterator \
                --cases "train 0.65" "train 1.0" validation ;;
    fed)
      python3 benchmarks/gpu_vs_dali.py --data /tmp/img --rounds 7 --cases fed
      python3 benchmarks/gpu_vs_dali.py --data /tmp/img --fresh --repeats 2 --epochs 3 --cases fed ;;
    first)
      python3 benchmarks/gpu_vs_dali.py --data /tmp/img --fresh --repeats 3 --epochs 1 --cases "train 1.0" \
        validation --profile-first 30 ;;
    hostprof) python3 benchmarks/probes/ssd_stage_probe.py --libs headrace --cuts full --images 512 --rounds 2 \
                --yappi 96 ;;
    ahead) python3 benchmarks/probes/ssd_stage_probe.py --libs headrace --cuts full "full worker 2 ahead" \
             --images 512 --rounds 6 ;;
    helper) python3 -m pytest -q -p no:cacheprovider tests/test_gpu_plan_process.py tests/test_plan_process.py
             python3 benchmarks/probes/ssd_stage_probe.py --libs headrace --cuts full "full plan at home" \
             "full placed in gpu stage" --images 512 --rounds 6 ;;
    serving) python3 benchmarks/probes/serving_profile.py --device gpu --sizes 1 5 8 32 --batches 300 --phases ;;
    triton)
      mkdir -p "$out/triton" && OUT="$out/triton" bash scripts/gpu_triton_check.sh .triton/bundle.tar.xz --no-pil --seconds 3 --rounds 2 --instances 8 \
        --shared-memory system --log-timing-every 200
      PYTHONPATH="/tmp/headrace-site:$PYTHONPATH" TRITONSERVER_ROOT=/tmp/headrace-site/pytriton/tritonserver \
        python3 scripts/serving_soak.py --kind KIND_GPU --seconds 60 --concurrency 32 --bad 0.1 --instances 2 ;;
    lone) python3 benchmarks/probes/serving_profile.py --device gpu --dali --sizes 1 5 8 --batches 1000 --gap-ms 0 1 \
            --phases --cprofile 1 ;;
    idle) python3 benchmarks/probes/serving_profile.py --device gpu --dali --sizes 1 --batches 1000 \
            --gap-ms 0 0.25 1 4 --phases --timeline ;;
    abserve) python3 benchmarks/ab_trees.py --old .ab-base --new . --rounds 5 \
               --pattern "BatchRunner +1 +[0-9.]+ +[0-9.]+ +([0-9]+)" -- \
               benchmarks/probes/serving_profile.py --device gpu --sizes 1 --batches 1000 ;;
    abidle) python3 benchmarks/ab_trees.py --old .ab-base --new . --rounds 4 \
              --pattern "BatchRunner +1 +[0-9.]+ +[0-9.]+ +([0-9]+)" -- \
              benchmarks/probes/serving_profile.py --device gpu --sizes 1 --batches 1000 --gap-ms 1 ;;
    bg)
      mkdir -p "$out/bg" && OUT="$out/bg" bash scripts/gpu_triton_check.sh .triton/bundle.tar.xz --no-pil \
        --background 2 0 --seconds 3 --rounds 2 --instances 8 --shared-memory system ;;
    peer)
      mkdir -p "$out/peer" && OUT="$out/peer" bash scripts/gpu_triton_check.sh .triton/bundle.tar.xz --no-tests --no-pil --dali \
        --seconds 3 --rounds 2 --instances 8 --shared-memory system ;;
    *) echo "unknown step: $1"; return 2 ;;
  esac
}
status=0
for name in "$@"; do
  echo "######## $name $(date +%T)"
  step "$name" > "$out/$name.log" 2>&1; rc=$?
  [ "$rc" -gt "$status" ] && status=$rc
  tr '\r' '\n' < "$out/$name.log" | grep -v "img \[\|it/s\]\|^ *$" | tail -n 60
  echo "######## end $name (exit $rc) $(date +%T)"
done
exit "$status"
