#!/usr/bin/env bash
# A rank that hangs, stops (SIGSTOP, from itself or from outside) or dies while a checkpoint is
# written (synchronously or asynchronously), committed, or loaded on resume ends every rank within
# dist.timeout_s + the stated margin, with a non-zero exit and a message naming the agreement ("step 4
# checkpoint write") and, where rank 0 collects it, the rank that never arrived; every checkpoint that
# existed before still verifies, and the interrupted one was never committed.
# CI runs one case per kind of wait: a synchronous write (hang), the asynchronous writer thread alone
# (hang), a rank stopped from outside (SIGSTOP) and rank 0 stuck in the commit; ZT_TEST_FULL=1 adds the
# asynchronous write stopping its process, a rank killed mid-write, rank 3 stuck in the commit and a
# rank hanging while it loads (hang_report.sh's resume case covers that deadline in CI).
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/faults_lib.sh"
T=3
ckpt_args() { echo "--ckpt.dir=$ZT_WORK/$1 --ckpt.every=2 --dist.timeout_s=$T --debug.hang_at_step=4"; }

# after_checkpoint_fault NAME: step_2 (written before the fault) verifies; step_4 was never committed.
after_checkpoint_fault() {
  verify_checkpoints "$ZT_WORK/$1/step_00000002"
  [ ! -e "$ZT_WORK/$1/step_00000004" ] || fail "$1: step_00000004 was committed despite the fault"
}

# Synchronous write, rank 2 hangs with its shard written: rank 0 names it.
run_fault write_sync 4 "debug.hang_phase=ckpt_write" "" -- $(ckpt_args write_sync) --debug.rank=2 --debug.hang_phase=ckpt_write
expect_fault_end write_sync $T
expect_in "$ZT_WORK/write_sync.err" "^rank 0: step 4 checkpoint write \(every rank's files\): rank 2 did not arrive within dist.timeout_s=$T s"
after_checkpoint_fault write_sync

# Asynchronous write, the writer thread of rank 3 stops the whole process (SIGSTOP) mid-write.
if full_cases; then
  run_fault write_async 4 "debug.hang_phase=ckpt_write" "" -- $(ckpt_args write_async) --ckpt.async=true --debug.rank=3 \
    --debug.hang_phase=ckpt_write --debug.hang_mode=sigstop
  expect_fault_end write_async $T
  expect_in "$ZT_WORK/write_async.err" "^rank [0-2]: .*(did not complete|did not arrive) within dist.timeout_s=$T s"
  after_checkpoint_fault write_async
fi

# Asynchronous write, only the writer thread of rank 2 hangs: its training thread goes on until the
# next save waits for that write, while the others wait for rank 2 in the write's agreement.
run_fault write_async_thread 4 "debug.hang_phase=ckpt_write" "" -- $(ckpt_args write_async_thread) --ckpt.async=true \
  --debug.rank=2 --debug.hang_phase=ckpt_write
expect_fault_end write_async_thread $((T + 2))  # plus the two steps before the next save
expect_in "$ZT_WORK/write_async_thread.err" "^rank 0: step 4 checkpoint write \(every rank's files\): rank 2 did not arrive within dist.timeout_s=$T s"
after_checkpoint_fault write_async_thread

# SIGSTOP from outside: rank 1 is held inside its write, then stopped by kill -STOP.
stop_rank_1() {
  local victim
  victim=$(rank_pid "$1" 1)
  [ -n "$victim" ] || fail "write_stopped: no process of rank 1 under launcher $1"
  kill -STOP "$victim"
  echo "$victim" >"$ZT_WORK/victim"
}
run_fault write_stopped 4 "debug.hang_phase=ckpt_write" stop_rank_1 -- $(ckpt_args write_stopped) --debug.rank=1 \
  --debug.hang_phase=ckpt_write
expect_fault_end write_stopped $T
expect_in "$ZT_WORK/write_stopped.err" "^rank 0: step 4 checkpoint write \(every rank's files\): rank 1 did not arrive"
# MPI_Abort's tear-down (Open MPI's launcher) also ends the stopped process, not only the running ones.
for i in $(seq 100); do kill -0 "$(cat "$ZT_WORK/victim")" 2>/dev/null || break; sleep 0.05; done
kill -0 "$(cat "$ZT_WORK/victim")" 2>/dev/null && { kill -9 "$(cat "$ZT_WORK/victim")"; fail "write_stopped: the stopped rank outlived the job"; }
after_checkpoint_fault write_stopped

if full_cases; then
  # A rank lost (SIGKILL) mid-write.
  run_fault write_killed 4 "debug.hang_phase=ckpt_write" "" -- $(ckpt_args write_killed) --debug.rank=2 \
    --debug.hang_phase=ckpt_write --debug.hang_mode=sigkill
  expect_fault_end write_killed $T
  after_checkpoint_fault write_killed

  # The commit: rank 3 never hands in its file records (rank 0 names it).
  run_fault commit_rank3 4 "debug.hang_phase=ckpt_commit" "" -- $(ckpt_args commit_rank3) --debug.rank=3 \
    --debug.hang_phase=ckpt_commit --debug.hang_mode=sigstop
  expect_fault_end commit_rank3 $T
  expect_in "$ZT_WORK/commit_rank3.err" "^rank 0: step 4 checkpoint commit \(file records\): rank 3 did not arrive within dist.timeout_s=$T s"
  after_checkpoint_fault commit_rank3
fi
# The commit: rank 0 itself stops (the others report that rank 0 did not answer).
run_fault commit_root 4 "debug.hang_phase=ckpt_commit" "" -- $(ckpt_args commit_root) --debug.rank=0 --debug.hang_phase=ckpt_commit
expect_fault_end commit_root $((T + 1))
expect_in "$ZT_WORK/commit_root.err" "^rank [1-3]: step 4 checkpoint commit: no answer from rank 0 within dist.timeout_s=$T s"
after_checkpoint_fault commit_root

full_cases || { echo "PASS"; exit 0; }
# Resume: rank 2 hangs while loading step_4 of a finished run.
expect_exit 0 zt_mpirun 4 "$ZT_BIN/ztrain" "${FAULT_ARGS[@]}" --ckpt.dir="$ZT_WORK/resume" --train.stop_at_step=4
# Loading is start-up, whose deadline is 10 x dist.timeout_s (dist/deadline.hpp): dist.timeout_s=1 here.
run_fault resume 4 "debug.hang_phase=resume" "" -- --ckpt.dir="$ZT_WORK/resume" --dist.timeout_s=1 --debug.rank=2 \
  --debug.hang_at_step=4 --debug.hang_phase=resume
expect_fault_end resume 10
expect_in "$ZT_WORK/resume.err" "^rank 0: resume from .*step_00000004 \(every rank loaded\): rank 2 did not arrive within 10 s \(start-up, until step 1 completes: 10 x dist.timeout_s=1 s\)"
verify_checkpoints "$ZT_WORK/resume/step_00000004"
echo "PASS"
