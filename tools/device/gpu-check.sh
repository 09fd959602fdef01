#!/usr/bin/env bash
# One device call that builds ztrain with the CUDA backend on the lent GPU and runs the GPU tests
# (ctest -L gpu), printing the elapsed time of each phase. Run ON the device from the repository root,
# after tools/device/prepare.sh on the development machine, with carry [".devdeps", ".peers"]:
#   tools/device/gpu-check.sh [--prebuilt] [--sanitize] [CTEST_ARGS...]   e.g. -R cuda: -j8
#   --prebuilt  no nvcc there: use the build packed here by tools/device/pack-build.sh (carry .devbuild too)
#   --sanitize  after ctest: each gpu test binary under compute-sanitizer memcheck, and a few op cases
#               (the attention and Llama ones) under racecheck
# Everything printed also goes to $OUT/gpu-check.log, the build's output to $OUT/gpu-check-build.log, and
# ctest's output and its LastTest.log to $OUT/gpu-check-logs.tar.gz (3 of the 8 files the device returns). ZT_DEVICE_BUDGET_S (default 570)
# is the wall time it plans within: ctest gets what the build left of it, so the summary prints before
# the run tool's 600 s limit kills the call. Exit: ctest's status, or 1 if the build failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
build_dir=${ZT_BUILD_DIR:-$root/build-device}
budget_s=${ZT_DEVICE_BUDGET_S:-570}
prebuilt=false sanitize=false
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=true; shift ;;
    --sanitize) sanitize=true; shift ;;
    *) break ;;
  esac
done
start_s=$SECONDS
work=$(mktemp -d /tmp/zt_gpu_check.XXXXXX)
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/gpu-check.log") 2>&1
  tee_pid=$!
fi

phases=()
phase_start=$SECONDS
phase() {  # phase NAME: closes the phase that ran since the last call under NAME
  phases+=("$(printf '%-10s %5d s' "$1" $((SECONDS - phase_start)))")
  phase_start=$SECONDS
}
finish() {
  echo "=== phases (elapsed seconds)"
  printf '%s\n' "${phases[@]}"
  echo "total      $((SECONDS - start_s)) s"
  if [ -n "${OUT:-}" ]; then
    [ -f "$build_dir/Testing/Temporary/LastTest.log" ] && cp "$build_dir/Testing/Temporary/LastTest.log" "$work/"
    tar -C "$work" -czf "$OUT/gpu-check-logs.tar.gz" . && echo "logs: \$OUT/gpu-check-logs.tar.gz"
  fi
  rm -rf "$work"
  if [ -n "${OUT:-}" ]; then
    exec >&- 2>&-
    wait "$tee_pid"  # gpu-check.log complete before the device collects $OUT
  fi
  exit "$1"
}

# use_prebuilt: unpacks .devbuild/build.tar.xz where its ctest files expect it (BUILD_DIR), with the
# source path they name (SOURCE_DIR) linked to this copy of the repository.
use_prebuilt() {
  [ -f .devbuild/build.tar.xz ] || { echo "gpu-check: --prebuilt needs .devbuild (tools/device/pack-build.sh, carry it)"; return 1; }
  local source_dir
  source_dir=$(cat .devbuild/SOURCE_DIR) build_dir=$(cat .devbuild/BUILD_DIR)
  if [ "$source_dir" != "$root" ]; then
    if [ -e "$source_dir" ] && [ ! -L "$source_dir" ]; then
      echo "gpu-check: $source_dir exists on this machine and is no link: the prebuilt ctest files cannot point here"
      return 1
    fi
    mkdir -p "$(dirname "$source_dir")" && ln -sfn "$root" "$source_dir"
  fi
  rm -rf "$build_dir" && mkdir -p "$build_dir" && tar -C "$build_dir" -xJf .devbuild/build.tar.xz || return 1
  echo "=== prebuilt build of commit $(cat .devbuild/COMMIT) in $build_dir (source $source_dir -> $root)"
  phase unpack
}
# libraries_found: every shared library ztrain and the gpu tests need resolves (cuBLAS and NCCL may live
# only in the python wheels on the device: their lib folders are added when the toolkit lacks them).
libraries_found() {
  local missing
  missing=$(ldd "$build_dir"/bin/ztrain "$build_dir"/tests/test_cuda_* "$build_dir"/tests/test_op_cases_cuda 2>&1 |
    awk '/not found/ {print $1}' | sort -u)
  if [ -n "$missing" ]; then
    local dir
    for dir in $(python3 -c 'import glob, site; print(" ".join(sorted(set(p.rsplit("/", 1)[0] for d in site.getsitepackages() for p in glob.glob(d + "/nvidia/*/lib/lib*.so*")))))' 2>/dev/null); do
      LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH
    done
    export LD_LIBRARY_PATH
    missing=$(ldd "$build_dir"/bin/ztrain "$build_dir"/tests/test_cuda_* "$build_dir"/tests/test_op_cases_cuda 2>&1 |
      awk '/not found/ {print $1}' | sort -u)
  fi
  [ -z "$missing" ] && return 0
  echo "gpu-check: shared libraries not found: $missing"
  return 1
}
# start_sanitizers: after ctest, each gpu test binary under compute-sanitizer's memcheck and a few op
# cases of the kernels with shared-memory tiles (attention, the Llama ops) under racecheck, all side by
# side, each for at most ZT_MEMCHECK_S (240) s; racecheck on the op cases ZT_RACECHECK_CASES names (a
# regex over "<case> [<dtype>]", tests/ops/test_op_cases.cpp's ZT_OP_CASE_FILTER). The
# free-memory check is left out: the sanitizer's own device allocations, and the other binaries',
# change what it reads. Logs in $work/<tool>-*.log.
sanitizer_pids=()
start_sanitizers() {
  local t limit_s=$((budget_s - (SECONDS - start_s) - 20))
  [ "$limit_s" -gt "${ZT_MEMCHECK_S:-240}" ] && limit_s=${ZT_MEMCHECK_S:-240}
  command -v compute-sanitizer >/dev/null || PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
  for t in "$build_dir"/tests/test_cuda_* "$build_dir"/tests/test_op_cases_cuda; do
    sanitize memcheck "$t" "$limit_s" -CudaMemory.WarmStepLoopMakesNoNewDeviceAllocations --leak-check no
  done
  # racecheck ran ~40 s per attention case on the H200 (2026-11-27): a few bf16 cases, not the binary.
  local cases='^(attention B=(1 T=129 NH=2 |2 T=200 NH=4 NKV=1 |1 T=65 NH=8 NKV=4 )|rmsnorm|add_rmsnorm|rope|swiglu|embedding.*no wpe).*\[bf16\]$'
  export ZT_OP_CASE_FILTER=${ZT_RACECHECK_CASES:-$cases}  # read by the op cases' driver
  sanitize racecheck "$build_dir"/tests/test_op_cases_cuda "$limit_s" "*EveryCaseMatchesTheCpuReference*"
  unset ZT_OP_CASE_FILTER
}
sanitize() {  # sanitize TOOL BINARY LIMIT_S GTEST_FILTER [TOOL_ARGS...]: in the background
  local tool=$1 t=$2 limit_s=$3 filter=$4 log="$work/$1-${2##*/}.log"
  shift 4
  ( timeout --kill-after=10 "$limit_s" compute-sanitizer --tool "$tool" "$@" --error-exitcode 3 "$t" \
      --gtest_filter="$filter" >"$log" 2>&1
    echo "exit $?" >>"$log" ) &
  sanitizer_pids+=($!)
}
report_sanitizers() {
  [ ${#sanitizer_pids[@]} -gt 0 ] || return 0
  wait "${sanitizer_pids[@]}"
  local f
  for f in "$work"/memcheck-*.log "$work"/racecheck-*.log; do
    [ -f "$f" ] || continue
    echo "=== ${f##*/}: $(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$f") $(tail -n 1 "$f")"
    grep -B2 -A12 -m3 'Invalid\|Race reported\|Error:\|hazard' "$f" | head -n 60
  done
}

echo "=== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $root"
if [ ! -f .devdeps/env.sh ]; then
  echo "gpu-check: .devdeps/env.sh is missing: run tools/device/prepare.sh on the development machine, carry .devdeps" >&2
  exit 2
fi
set +u
# shellcheck source=/dev/null
source .devdeps/env.sh
# shellcheck source=tools/device/cudnn-env.sh
source tools/device/cudnn-env.sh
set -u
echo "DEVDEPS=$DEVDEPS NCCL_HOME=${NCCL_HOME:-unset} CUDNN_HOME=${CUDNN_HOME:-unset}; bundled fallbacks in use: $(find "$DEVDEPS/fallback-active" -mindepth 1 -printf '%f ')"
phase env
nvidia-smi || echo "gpu-check: nvidia-smi failed"
nvcc --version | tail -n 2
phase smi

if $prebuilt; then
  use_prebuilt || finish 1
else
  # The build log goes straight to $OUT: it comes back even if the call is killed mid-build.
  build_log=${OUT:+$OUT/gpu-check-build.log}
  build_log=${build_log:-$work/build.log}
  build_s=$((budget_s - (SECONDS - start_s) - 30))
  echo "=== build ($build_dir, at most $build_s s; log: $build_log)"
  if ! timeout --kill-after=10 "$build_s" tools/device/build.sh >"$build_log" 2>&1; then
    phase build
    echo "gpu-check: the build FAILED or ran out of time; its errors and last lines:"
    grep -E 'error|FAILED' "$build_log" | head -n 40
    tail -n 30 "$build_log"
    finish 1
  fi
  tail -n 3 "$build_log"
  echo "warnings in the build log: $(grep -c 'warning' "$build_log")"
  phase build
fi
libraries_found || finish 1

left=$((budget_s - (SECONDS - start_s)))
echo "=== ctest -L gpu (${left} s left of the ${budget_s} s budget)"
if [ "$left" -lt 30 ]; then
  echo "gpu-check: too little time left for the tests; run this again while the machine is warm (the build is kept)"
  finish 1
fi
timeout --kill-after=10 "$left" ctest --test-dir "$build_dir" -L gpu --output-on-failure "$@" 2>&1 | tee "$work/ctest.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 124 ] && echo "gpu-check: ctest was stopped at the time budget"
phase ctest
$sanitize && start_sanitizers
report_sanitizers
phase sanitizers
finish "$rc"
