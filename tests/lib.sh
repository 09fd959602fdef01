# Shared helpers for the bash tests (sourced). ctest sets ZT_BIN, ZT_SOURCE and MPIEXEC.
set -uo pipefail
: "${ZT_BIN:?run through ctest (ZT_BIN unset)}"
MPIEXEC=${MPIEXEC:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# A rank waiting in a collective yields its core instead of spinning on it: the tests run more ranks than
# the CI machine's 2 cores, beside other tests, where a spinning rank takes the core from the very rank it
# waits for (a tiny 2-rank step: 17 ms -> 11 ms at load 9). Only the waiting changes, not what runs.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

ZT_WORK=$(mktemp -d /tmp/zt_test.XXXXXX)
trap 'rm -rf "$ZT_WORK"' EXIT
# Relative outputs (ztrain's default ckpt.dir=checkpoints, with ckpt.resume=auto) stay in this test's
# own directory: a run never resumes from what another test, or an earlier ctest, left behind.
cd "$ZT_WORK" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }
# full_cases: true under ZT_TEST_FULL=1 (tools/bench/full_suite.sh). The slowest tests run a
# representative subset of their cases in CI and every case when this is set.
# last_step METRICS: the last step a metrics file has a line for (empty before the first).
last_step() { grep -o '"step": [0-9]*' "$1" 2>/dev/null | tail -n 1 | grep -o '[0-9]*$'; }
full_cases() { [ "${ZT_TEST_FULL:-0}" = 1 ]; }
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

# require_cuda: skips the test (exit 77), saying why, without a CUDA backend or a visible GPU.
# (--print-config of train.device=cuda prints on a host without a GPU too, its rank lines then this host's.)
require_cuda() {
  "$ZT_BIN/ztrain" --train.device=cuda --print-config >"$ZT_WORK/probe" 2>&1 && grep -q "^# rank 0: .* device=cuda" "$ZT_WORK/probe" ||
    skip "no CUDA device visible or no CUDA backend in this build: $(grep -m1 "no GPU\|rank 0:" "$ZT_WORK/probe")"
}

# expect_in FILE PATTERN [WHAT]: the file matches the extended regex.
expect_in() {
  grep -Eq -- "$2" "$1" || { echo "--- $1"; tail -n 40 "$1"; fail "${3:-pattern '$2' not found in $1}"; }
}
# expect_not_in FILE PATTERN [WHAT]: the file does not match the extended regex.
expect_not_in() {
  ! grep -Eq -- "$2" "$1" || { echo "--- $1"; grep -E -- "$2" "$1" | head -n 5; fail "${3:-pattern '$2' found in $1}"; }
}

# A tiny synthetic GPT-2 setup: shards in $ZT_WORK/data and the ztrain options that fit them.
make_tiny_data() {
  mkdir -p "$ZT_WORK/data"
  "$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/train" --tokens "${1:-40000}" --shard-tokens 15000 --vocab 97 --seed 3 ||
    fail "make_test_shards failed"
  "$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/valid" --tokens 5000 --vocab 97 --seed 4 || fail "make_test_shards failed"
}
TINY_MODEL=(--model.n_layer=2 --model.n_head=2 --model.n_embd=32 --model.vocab_size=97 --model.seq_len=16
            --train.device=cpu --train.threads=1 --optim.lr=3e-3 --optim.warmup_steps=2 --log.every=1)
tiny_data_args() { echo "--data.train=$ZT_WORK/data/train_*.h5"; }

# loss_column METRICS.jsonl: the "loss" of every step line, one per line, in step order.
loss_column() {
  /usr/bin/python3 -c '
import json, sys
rows = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    if "loss" in o: rows[o["step"]] = o["loss"]
for s in sorted(rows): print(repr(rows[s]))' "$1"
}

# verify_checkpoints DIR...: each checkpoint directory still verifies (zckpt verify exits 0).
verify_checkpoints() {
  local d
  for d in "$@"; do
    "$ZT_BIN/zckpt" verify "$d" >"$ZT_WORK/verify" 2>&1 || { cat "$ZT_WORK/verify"; fail "$d no longer verifies"; }
  done
}

# rank_pid LAUNCHER_PID RANK: the pid of that rank among the launcher's children (from its environment).
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=$2" >/dev/null && { echo "$p"; return; }
  done
}
