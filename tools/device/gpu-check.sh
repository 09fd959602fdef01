#!/usr/bin/env bash
# Every GPU test (ctest -L gpu) on the lent GPU, with the sanitizers beside them, printing the elapsed
# time of each phase. Run ON the device from the repository root, after tools/device/prepare.sh on the
# development machine, with carry [".devdeps", ".peers"] (tools/device/call.sh runs it as one step):
#   tools/device/gpu-check.sh [--prebuilt | --built] [--sanitize] [--cpu-dry-run] [CTEST_ARGS...]   e.g. -R Cuda -j8
#   (default)   builds the GPU targets (tools/device/build.sh --gpu) in build-device/ first
#   --prebuilt  no nvcc there: use the build packed here by tools/device/pack-build.sh (carry .devbuild too)
#   --built     use $ZT_BUILD_DIR as it is (tools/device/call.sh built it)
#   --sanitize  beside ctest, on the same GPU: compute-sanitizer memcheck on every gpu test binary and on
#               ztrain (a few steps of tiny GPT-2, Llama and LoRA runs), racecheck on the attention and
#               Llama-op binaries (the kernels with shared-memory tiles), all bounded by the budget
#   --cpu-dry-run  no GPU, no .devdeps: the same phases on this machine's build/ (every gpu test skips,
#               the sanitizers say "skipped: no GPU"), to prove the script before a GPU sees it
# Order: the `gpu_serial` tests first, alone (test_cuda_memory reads the device's free memory, which any
# other process changes), then the other gpu tests (-j8 unless CTEST_ARGS say) and the sanitizers at once.
# Everything printed also goes to $OUT/gpu-check.log, the build's output to $OUT/gpu-check-build.log, and
# ctest's output, its LastTest.log and the sanitizers' logs to $OUT/gpu-check-logs.tar.gz, the counts
# (passed, failed, skipped; each sanitizer run's status) to $OUT/gpu-check.json. ZT_DEVICE_BUDGET_S
# (default 570) is the wall time it plans within: ctest and the sanitizers get what the build left of it,
# so the summary prints before the run tool's limit kills the call. ZT_MEMCHECK_S caps each sanitizer run
# (default: all that is left); ZT_RACECHECK_FILTER the attention cases racecheck runs.
# Exit: ctest's status (1 if a sanitizer found errors), 1 if the build failed, 2 on a usage error.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
budget_s=${ZT_DEVICE_BUDGET_S:-570}
mode=build sanitize=false dry_run=false
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) mode=prebuilt; shift ;;
    --built) mode=built; shift ;;
    --sanitize) sanitize=true; shift ;;
    --cpu-dry-run) dry_run=true; shift ;;
    *) break ;;
  esac
done
ctest_args=("$@")
[ ${#ctest_args[@]} -gt 0 ] || ctest_args=(-j8)
if $dry_run; then
  build_dir=${ZT_BUILD_DIR:-$root/build}
  [ "$mode" = build ] && mode=built
else
  build_dir=${ZT_BUILD_DIR:-$root/build-device}
fi
start_s=$SECONDS
work=$(mktemp -d /tmp/zt_gpu_check.XXXXXX)
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/gpu-check.log") 2>&1
  tee_pid=$!
fi
source "$root/tools/device/sanitize.sh"

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
  local visible=()
  ${have_gpu:-false} && visible=(--gpu-visible)
  python3 "$root/tools/device/check_report.py" --junit "$work"/junit-*.xml --sanitizers "$work/sanitizers.tsv" \
    --rc "$1" --json "${OUT:-$work}/gpu-check.json" "${visible[@]}"
  if [ -n "${OUT:-}" ]; then
    tar -C "$work" -czf "$OUT/gpu-check-logs.tar.gz" --exclude=./data . && echo "logs: \$OUT/gpu-check-logs.tar.gz"
  fi
  rm -rf "$work"
  if [ -n "${OUT:-}" ]; then
    exec >&- 2>&-
    wait "$tee_pid"  # gpu-check.log complete before the device collects $OUT
  fi
  exit "$1"
}
seconds_left() { echo $((budget_s - (SECONDS - start_s))); }

use_prebuilt() {  # tools/device/unpack-build.sh, its build directory becoming ours
  local dir
  dir=$(tools/device/unpack-build.sh) || return 1
  build_dir=$(tail -n 1 <<<"$dir")
  phase unpack
}
build_here() {
  # The build log goes straight to $OUT: it comes back even if the call is killed mid-build.
  local build_log=${OUT:+$OUT/gpu-check-build.log}
  build_log=${build_log:-$work/build.log}
  local build_s=$(($(seconds_left) - 30))
  echo "=== build of the GPU targets ($build_dir, at most $build_s s; log: $build_log)"
  if ! ZT_BUILD_DIR=$build_dir timeout --kill-after=10 "$build_s" tools/device/build.sh --gpu >"$build_log" 2>&1; then
    phase build
    echo "gpu-check: the build FAILED or ran out of time; its errors and last lines:"
    grep -E 'error|FAILED' "$build_log" | head -n 40
    tail -n 30 "$build_log"
    return 1
  fi
  tail -n 3 "$build_log"
  echo "warnings in the build log: $(grep -c 'warning' "$build_log")"
  phase build
}
# libraries_found: every shared library ztrain and the gpu tests need resolves (cuBLAS and NCCL may live
# only in the python wheels on the device: their lib folders are added when the toolkit lacks them).
libraries_found() {
  local missing
  missing=$(ldd "$build_dir"/bin/ztrain "$build_dir"/tests/test_*cuda* 2>&1 | awk '/not found/ {print $1}' | sort -u)
  if [ -n "$missing" ]; then
    local dir
    for dir in $(python3 -c 'import glob, site; print(" ".join(sorted(set(p.rsplit("/", 1)[0] for d in site.getsitepackages() for p in glob.glob(d + "/nvidia/*/lib/lib*.so*")))))' 2>/dev/null); do
      LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH
    done
    export LD_LIBRARY_PATH
    missing=$(ldd "$build_dir"/bin/ztrain "$build_dir"/tests/test_*cuda* 2>&1 | awk '/not found/ {print $1}' | sort -u)
  fi
  [ -z "$missing" ] && return 0
  echo "gpu-check: shared libraries not found: $missing"
  return 1
}
# run_ctest NAME LIMIT_S ARGS...: ctest -L gpu ARGS, bounded, its output in $work/ctest-NAME.log; its status.
run_ctest() {
  local name=$1 limit_s=$2
  shift 2
  timeout --kill-after=10 "$limit_s" ctest --test-dir "$build_dir" -L gpu --output-on-failure \
    --output-junit "$work/junit-$name.xml" "$@" 2>&1 |
    tee "$work/ctest-$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && echo "gpu-check: ctest ($name) was stopped at its $limit_s s"
  cp "$build_dir/Testing/Temporary/LastTest.log" "$work/LastTest-$name.log" 2>/dev/null
  return "$rc"
}

echo "=== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $root ($mode build in $build_dir$($dry_run && echo ', CPU dry run'))"
if ! $dry_run; then
  if [ ! -f .devdeps/env.sh ]; then
    echo "gpu-check: .devdeps/env.sh is missing: run tools/device/prepare.sh on the development machine, carry .devdeps" >&2
    finish 2
  fi
  set +u
  # shellcheck source=/dev/null
  source .devdeps/env.sh
  # shellcheck source=/dev/null
  [ -f tools/device/cudnn-env.sh ] && source tools/device/cudnn-env.sh  # cuDNN's libraries, where there is one
  set -u
  echo "DEVDEPS=$DEVDEPS NCCL_HOME=${NCCL_HOME:-unset} CUDNN_HOME=${CUDNN_HOME:-unset}; bundled fallbacks in use: $(find "$DEVDEPS/fallback-active" -mindepth 1 -printf '%f ')"
fi
have_gpu=false
nvidia-smi -L >/dev/null 2>&1 && have_gpu=true
$have_gpu && nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
$have_gpu || echo "gpu-check: no GPU visible (nvidia-smi -L failed): every gpu test will skip"
command -v nvcc >/dev/null && nvcc --version | tail -n 2
phase env

case "$mode" in
  prebuilt) use_prebuilt || finish 1 ;;
  build) build_here || finish 1 ;;
  built) [ -x "$build_dir/bin/ztrain" ] || { echo "gpu-check: --built, but $build_dir/bin/ztrain is missing"; finish 1; } ;;
esac
libraries_found || finish 1

left=$(seconds_left)
echo "=== ctest -L gpu (${left} s left of the ${budget_s} s budget)"
if [ "$left" -lt 40 ]; then
  echo "gpu-check: too little time left for the tests; run this again while the machine is warm (the build is kept)"
  finish 1
fi
run_ctest serial $((left / 4)) -L gpu_serial
serial_rc=$?
phase serial
if $sanitize; then
  if $have_gpu; then
    start_sanitizers "$build_dir" "$work" $(($(seconds_left) - 25))
  else
    echo "sanitizers: skipped: no GPU"
  fi
fi
run_ctest parallel $(($(seconds_left) - 20)) -LE gpu_serial "${ctest_args[@]}"
rc=$?
[ "$serial_rc" -ne 0 ] && [ "$rc" -eq 0 ] && rc=$serial_rc
phase ctest
if $sanitize && $have_gpu; then
  report_sanitizers "$work" || { echo "gpu-check: the sanitizers found errors (above)"; [ "$rc" -eq 0 ] && rc=1; }
  phase sanitizers
fi
finish "$rc"
