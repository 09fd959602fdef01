#!/usr/bin/env bash
# jobscripts/local/train.sh, 2 ranks: with ZT_SEGMENT_MIN ztrain stops itself at its time limit
# (exit 75) and the script restarts it from the newest checkpoint until the end; a USR1 to the script
# checkpoints and stops (exit 75, no restart) and the same command resumes. Both end with the losses
# of an uninterrupted run, bit for bit.
source "$(dirname "$0")/../lib.sh"
[ -x "$ZT_BIN/zckpt" ] || skip "no $ZT_BIN/zckpt: this build has no checkpointing, which the restart needs"
cd "$ZT_WORK" || fail "cd"
make_tiny_data 40000
# Long enough that USR1, sent once step 20 is logged, arrives before the end: at 600 steps (2 ms a step on
# a fast VM) the run once finished first under the suite's load.
steps=1200
train=("${TINY_MODEL[@]}" --train.global_batch=64 --train.micro_batch=8 "--train.max_steps=$steps")
export ZT_NP=2 ZT_CONFIG='' ZT_DATA="$ZT_WORK/data/train_*.h5"
local_train=$ZT_SOURCE/jobscripts/local/train.sh
ZT_TIMEOUT=120 zt_mpirun 2 "$ZT_BIN/ztrain" "${train[@]}" --data.train="$ZT_DATA" --ckpt.dir=ref/ckpt \
  --log.metrics=ref/metrics.jsonl >ref.log 2>&1 || { tail -n 20 ref.log; fail "reference run"; }
loss_column ref/metrics.jsonl >ref.loss
# A quarter of the uninterrupted run's training time at its fastest step (step count x the least
# step_ms), in minutes: a time limit that stops a start well before the end whatever this machine's
# speed. Not the sum of the steps: a reference slowed by load (other tests beside it) would give a
# segment longer than a whole later run, which then never restarts.
quarter_min() {
  /usr/bin/python3 -c '
import json, sys
ms = [json.loads(line)["step_ms"] for line in open(sys.argv[1]) if "\"step_ms\"" in line]
print(f"{max(min(ms) * len(ms) / 4 / 60000, 0.002):.4f}")' "$1"
}
segment_min=$(quarter_min ref/metrics.jsonl)
same_losses() {  # same_losses RUN_DIR: every step's loss equals the uninterrupted run's
  loss_column "$1/metrics.jsonl" >"$1.loss"
  cmp -s ref.loss "$1.loss" || fail "$1: the step losses differ from the uninterrupted run's"
}

# ---- segments: each start stops itself after a quarter of the run's time -------------------------
ZT_RUN_DIR=seg ZT_SEGMENT_MIN=$segment_min timeout 300 "$local_train" "${train[@]}" >seg.out 2>&1
rc=$?
[ "$rc" -eq 0 ] || { tail -n 30 seg.out; fail "segments: exit $rc"; }
restarts=$(grep -c "local: restart [0-9]*: resuming" seg.out)
[ "$restarts" -ge 1 ] || { tail -n 30 seg.out; fail "segments: no restart (did train.time_limit_min stop ztrain?)"; }
[ "$(grep -c '"event": *"resume"' seg/metrics.jsonl)" -eq "$restarts" ] || fail "segments: not one resume event per restart"
expect_in seg.out "ztrain finished \(exit 0\) after $restarts restarts"
cmp -s seg.out seg/train.log || fail "segments: seg/train.log (ZT_LOG) is not a copy of the output"
same_losses seg
echo "ok: $restarts restarts at the time limit (ZT_SEGMENT_MIN=$segment_min), then the end; losses bit-identical to the uninterrupted run"

# ---- USR1: checkpoint and stop, then the same command resumes ------------------------------------
# Not under `timeout`: the signal must reach the script itself. The EXIT trap ends it if we fail.
ZT_RUN_DIR=sig "$local_train" "${train[@]}" >sig.out 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; rm -rf "$ZT_WORK"' EXIT
end=$((SECONDS + 60))
until [ "$(last_step sig/metrics.jsonl)" -ge 20 ] 2>/dev/null; do
  [ "$SECONDS" -lt "$end" ] || fail "USR1: the run did not reach step 20"
  sleep 0.2
done
kill -USR1 "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 75 ] || { tail -n 30 sig.out; fail "USR1: exit $rc, expected 75"; }
expect_in sig.out "got SIGUSR1: asking ztrain to checkpoint and stop"
expect_in sig.out "checkpointed and stopped \(exit 75\); run the same command again to resume"
grep -q "local: restart" sig.out && fail "USR1: the script restarted ztrain after being asked to stop"
ls -d sig/checkpoints/step_* >/dev/null 2>&1 || fail "USR1: no checkpoint in sig/checkpoints"
stopped=$(loss_column sig/metrics.jsonl | wc -l)
[ "$stopped" -lt "$steps" ] || fail "USR1: the run went on to the end"
ZT_RUN_DIR=sig timeout 300 "$local_train" "${train[@]}" >sig2.out 2>&1 || { tail -n 30 sig2.out; fail "USR1: the second run failed"; }
[ "$(grep -c '"event": *"resume"' sig/metrics.jsonl)" -eq 1 ] || fail "USR1: the second run did not resume"
same_losses sig
echo "ok: USR1 stopped the run at step $stopped with a checkpoint (exit 75); the same command resumed to the same losses"
echo "PASS"
