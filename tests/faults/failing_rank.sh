#!/usr/bin/env bash
# One of 4 ranks throws, hangs or is SIGKILLed after step 3: the whole job ends within seconds with a
# non-zero code, never hangs, and the message names the rank (and, for a hang, the collective).
source "$(dirname "$0")/../lib.sh"
make_tiny_data
args=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=50)

check_ends_fast() {  # check_ends_fast MAX_SECONDS WHAT -- ztrain args...
  local max=$1 what=$2; shift 3
  local start end rc
  start=$(date +%s)
  ZT_TIMEOUT=120 zt_mpirun 4 "$ZT_BIN/ztrain" "${args[@]}" "$@" >"$ZT_WORK/out" 2>"$ZT_WORK/err"
  rc=$?
  end=$(date +%s)
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { tail -n 20 "$ZT_WORK/err"; fail "$what: exit $rc (expected non-zero, not a timeout)"; }
  [ $((end - start)) -le "$max" ] || fail "$what: took $((end - start)) s (more than $max s)"
  echo "$what: exit $rc after $((end - start)) s"
}

check_ends_fast 30 "throw on rank 2" -- --debug.fail_at_step=3 --debug.rank=2
expect_in "$ZT_WORK/err" "^rank 2: debug.fail_at_step=3: injected failure after step 3"

check_ends_fast 40 "hang on rank 1" -- --debug.hang_at_step=3 --debug.rank=1 --dist.timeout_s=4
expect_in "$ZT_WORK/err" "rank 1: warning: debug.hang_at_step=3"
expect_in "$ZT_WORK/err" "^rank [023]: .* did not complete within dist.timeout_s=4 s \(step 4"

check_ends_fast 30 "SIGKILL on rank 3" -- --debug.kill_at_step=3 --debug.rank=3
expect_in "$ZT_WORK/err" "rank 3: warning: debug.kill_at_step=3"

# A one-rank run that fails after a background save (ckpt.async) commits it on the way out: step 2's
# checkpoint survives the exit 1 (outside sweep 40 NEW-4: it was left step_00000002.tmp).
expect_exit 1 "$ZT_BIN/ztrain" "${args[@]}" --train.max_steps=6 --ckpt.every=2 --ckpt.async=true --debug.fail_at_step=3 \
  --ckpt.dir="$ZT_WORK/async_ck"
[ "$(ls "$ZT_WORK/async_ck")" = step_00000002 ] || fail "expected step 2's committed checkpoint alone: $(ls "$ZT_WORK/async_ck")"
expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/async_ck/step_00000002"
echo "one rank: the asynchronous checkpoint in flight is committed before the exit 1"
echo "PASS"
