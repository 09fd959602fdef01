# Shared helpers for the bash tests (sourced). ctest sets ZT_BIN, ZT_SOURCE and MPIEXEC.
set -uo pipefail
: "${ZT_BIN:?run through ctest (ZT_BIN unset)}"
MPIEXEC=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

ZT_WORK=$(mktemp -d /tmp/zt_test.XXXXXX)
trap 'rm -rf "$ZT_WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# mpirun with the test defaults and a hang guard (ZT_TIMEOUT seconds, default 240; exit 124 if hit):
# zt_mpirun NP PROGRAM ARGS...
zt_mpirun() {
  local np=$1; shift
  timeout --kill-after=10 "${ZT_TIMEOUT:-240}" "$MPIEXEC" --oversubscribe -np "$np" "$@"
}

# expect_exit CODE CMD...: runs CMD with output in $ZT_WORK/out and $ZT_WORK/err; fails unless it exits CODE.
expect_exit() {
  local want=$1; shift
  "$@" >"$ZT_WORK/out" 2>"$ZT_WORK/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "--- stdout"; tail -n 30 "$ZT_WORK/out"; echo "--- stderr"; tail -n 30 "$ZT_WORK/err"
    fail "expected exit $want, got $got: $*"
  fi
}

# expect_in FILE PATTERN [WHAT]: the file matches the extended regex.
expect_in() {
  grep -Eq -- "$2" "$1" || { echo "--- $1"; tail -n 40 "$1"; fail "${3:-pattern '$2' not found in $1}"; }
}
