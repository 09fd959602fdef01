#!/usr/bin/env bash
# One job per ckpt.dir (ckpt/dir_lock.hpp):
#  - a second job on the directory of a running one exits 2 at start-up naming the holder (job, host,
#    pid, since) while the first goes on, checkpoints on USR1 (exit 75) and releases the lock;
#  - the lock is released on exit 0, 1 and 2 too; a SIGKILLed holder leaves it, and the next run takes
#    it over with a warning naming the dead pid and resumes;
#  - a requeued batch job (the same SLURM_JOB_ID) takes over its own lock even where the old holder's
#    host differs, and continues the same run (rotating its own older checkpoints); another job id is
#    refused.
# Every checkpoint that existed before each step still verifies.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/../ckpt/ckpt_lib.sh"
D=$ZT_WORK/ckpt
L=$D/ztrain.lock

released() { [ ! -e "$L" ] || { cat "$L"; fail "the lock was not released after $1"; }; }
last_step() { grep -o '"step": [0-9]*' "$1" 2>/dev/null | tail -n 1 | grep -o '[0-9]*$'; }

# ---- two jobs: the second refuses, naming the first, which goes on ---------------------------------
# Not under `timeout` (the USR1 must reach mpirun itself); the EXIT trap ends it if the test fails.
"$MPIEXEC" --oversubscribe -np 2 "$ZT_BIN/ztrain" "${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 \
  --train.micro_batch=2 --train.max_steps=1000000 --ckpt.dir="$D" --log.metrics="$ZT_WORK/first.jsonl" >"$ZT_WORK/first.out" 2>"$ZT_WORK/first.err" &
first=$!
trap 'kill -KILL "$first" 2>/dev/null; rm -rf "$ZT_WORK"' EXIT
end=$((SECONDS + 60))
until [ "$(last_step "$ZT_WORK/first.jsonl")" -ge 100 ] 2>/dev/null; do
  kill -0 "$first" 2>/dev/null || { cat "$ZT_WORK/first.err"; fail "the first job ended early"; }
  [ "$SECONDS" -lt "$end" ] || fail "the first job did not reach step 100 in 60 s"
  sleep 0.2
done
holder_pid=$(sed -n 's/^pid=//p' "$L")
[ -n "$holder_pid" ] || fail "no pid in the first job's lock $L"
train_expect 2 2 --ckpt.dir="$D"
expect_in "$ZT_WORK/err" "ckpt.dir=.*ckpt is in use by another job: job none, host $(hostname), pid $holder_pid, since [0-9T:-]+Z"
expect_in "$ZT_WORK/err" "wait for that job to end or give this run another ckpt.dir"
[ "$(grep -c 'is in use by another job' "$ZT_WORK/err")" -eq 1 ] || fail "the refusal should be printed once"
! grep -q "^step " "$ZT_WORK/out" || fail "the second job trained"
kill -0 "$first" 2>/dev/null || fail "the first job did not survive the second's start"
[ "$(sed -n 's/^pid=//p' "$L")" = "$holder_pid" ] || fail "the second job changed the first's lock"
kill -USR1 "$first"
end=$((SECONDS + 90))  # a checkpoint and exit 75 take seconds: never wait on it forever
while kill -0 "$first" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.5; done
kill -0 "$first" 2>/dev/null && { tail -n 20 "$ZT_WORK/first.err"; fail "the first job did not stop within 90 s of USR1"; }
wait "$first"
rc=$?
trap 'rm -rf "$ZT_WORK"' EXIT
[ "$rc" -eq 75 ] || { tail -n 20 "$ZT_WORK/first.err"; fail "the first job: exit $rc after USR1, expected 75"; }
released "exit 75"
verify_checkpoints "$D"/step_*
echo "ok: a second job on the same ckpt.dir exited 2 naming the holder (pid $holder_pid); the first checkpointed on USR1 (exit 75)"

# ---- released on exit 1; a SIGKILLed holder's lock is taken over ----------------------------------
rm -rf "$D"
train 2 --ckpt.dir="$D" --ckpt.every=2 --train.stop_at_step=2
released "exit 0"
train_expect 1 2 --ckpt.dir="$D" --debug.fail_at_step=3 --debug.rank=0
released "exit 1"
ZT_TIMEOUT=60 zt_mpirun 2 "$ZT_BIN/ztrain" "${CKPT_COMMON[@]}" --ckpt.dir="$D" --ckpt.every=2 \
  --debug.kill_at_step=5 --debug.rank=0 >"$ZT_WORK/out" 2>"$ZT_WORK/err"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "the SIGKILLed job: exit $rc"
dead=$(sed -n 's/^pid=//p' "$L")
[ -n "$dead" ] || fail "a SIGKILLed holder should leave its lock behind"
verify_checkpoints "$D"/step_*
train 2 --ckpt.dir="$D" --ckpt.every=2 --ckpt.keep=0
expect_in "$ZT_WORK/err" "warning: taking over the lock of ckpt.dir=.*ckpt from job none, host $(hostname), pid $dead, since .*: its process $dead on this host is gone"
expect_in "$ZT_WORK/out" "resuming from .*step_00000004 \(step 4\)"
expect_in "$ZT_WORK/out" "done: 8 steps"
released "the takeover run"
verify_checkpoints "$D"/step_*
echo "ok: released on exit 0 and 1; the lock of a SIGKILLed holder (pid $dead) was taken over and the run resumed"

# ---- a requeued job (same SLURM_JOB_ID) takes over its own lock and goes on as the same run --------
rm -rf "$D"
SLURM_JOB_ID=4711 train 2 --ckpt.dir="$D" --ckpt.every=2 --train.stop_at_step=4
run=$("$ZT_BIN/zckpt" info "$D/step_00000004" | sed -n 's/^  run \([^ ]*\)$/\1/p')
# As if job 4711's previous allocation, on another node, still held it (heartbeat fresh): Slurm ends a
# job's processes before it requeues it, so the same job id means that holder is gone.
printf 'job=4711\nhost=node-elsewhere\npid=4242\npid_ns=\nsince=2026-01-01T00:00:00Z\n' >"$L"
SLURM_JOB_ID=4712 train_expect 2 2 --ckpt.dir="$D"
expect_in "$ZT_WORK/err" "is in use by another job: job 4711, host node-elsewhere, pid 4242, since 2026-01-01T00:00:00Z"
SLURM_JOB_ID=4711 train 2 --ckpt.dir="$D" --ckpt.every=2 --ckpt.keep=1
expect_in "$ZT_WORK/err" "taking over the lock .* from job 4711, host node-elsewhere, pid 4242, .*: it is this batch job \(4711\) started again"
expect_in "$ZT_WORK/out" "run $run goes on"
expect_in "$ZT_WORK/out" "checkpoint .*step_00000004 deleted \(ckpt.keep=1\)"
[ "$(cd "$D" && echo step_*)" = "step_00000008" ] || fail "the requeued run did not rotate its own checkpoints: $(ls "$D")"
released "the requeued run"
verify_checkpoints "$D"/step_*
echo "ok: the requeued job 4711 took over its own lock, went on as run $run and rotated its own checkpoints"
echo "PASS"
