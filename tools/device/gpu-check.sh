#!/usr/bin/env bash
# One device call that builds ztrain with the CUDA backend on the lent GPU and runs the GPU tests
# (ctest -L gpu), printing the elapsed time of each phase. Run ON the device from the repository root,
# after tools/device/prepare.sh on the development machine, with carry [".devdeps", ".peers"]:
#   tools/device/gpu-check.sh [CTEST_ARGS...]     e.g. -R CudaOps to run some of the GPU tests only
# Everything printed also goes to $OUT/gpu-check.log, the build's output to $OUT/gpu-check-build.log, and
# ctest's output and its LastTest.log to $OUT/gpu-check-logs.tar.gz (3 of the 8 files the device returns). ZT_DEVICE_BUDGET_S (default 570)
# is the wall time it plans within: ctest gets what the build left of it, so the summary prints before
# the run tool's 600 s limit kills the call. Exit: ctest's status, or 1 if the build failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
build_dir=${ZT_BUILD_DIR:-$root/build-device}
budget_s=${ZT_DEVICE_BUDGET_S:-570}
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

echo "=== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $root"
if [ ! -f .devdeps/env.sh ]; then
  echo "gpu-check: .devdeps/env.sh is missing: run tools/device/prepare.sh on the development machine, carry .devdeps" >&2
  exit 2
fi
set +u
# shellcheck source=/dev/null
source .devdeps/env.sh
set -u
echo "DEVDEPS=$DEVDEPS NCCL_HOME=${NCCL_HOME:-unset}; bundled fallbacks in use: $(find "$DEVDEPS/fallback-active" -mindepth 1 -printf '%f ')"
phase env
nvidia-smi || echo "gpu-check: nvidia-smi failed"
nvcc --version | tail -n 2
phase smi

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
finish "$rc"
