#!/usr/bin/env bash
# TMPDIR that is no writable directory (here a file): Open MPI made its session directory there before any
# argument was read, so even --help died with Open MPI's abort text. Now MPI's session directory goes to
# /tmp with a warning naming TMPDIR, and --version, --help and --plan answer (exit 0).
source "$(dirname "$0")/../lib.sh"
touch "$ZT_WORK/not-a-dir"
for cmd in "ztrain --version" "ztrain --plan" "ztok --help" "zgen --help"; do
  read -r -a argv <<<"$cmd"
  expect_exit 0 env TMPDIR="$ZT_WORK/not-a-dir" "$ZT_BIN/${argv[0]}" "${argv[@]:1}"
  expect_in "$ZT_WORK/err" "warning: TMPDIR=$ZT_WORK/not-a-dir is not a writable directory: MPI's session directory goes to /tmp"
  [ -s "$ZT_WORK/out" ] || fail "$cmd printed nothing"
done
echo PASS
