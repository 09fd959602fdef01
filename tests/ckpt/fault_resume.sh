#!/usr/bin/env bash
# A rank fails after step 5 (debug.fail_at_step) of a run that checkpoints every 2 steps: ckpt.resume=
# auto continues from step 4 and ends with exactly the uninterrupted run's losses. With asynchronous
# checkpoints, step 4's write is not committed before the failure, so the rerun continues from step 2
# (never from a checkpoint whose commit did not happen), again with the same losses.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"

train 2 --ckpt.dir="$ZT_WORK/ref" --log.metrics="$ZT_WORK/ref.jsonl"
for mode in sync async; do
  d="$ZT_WORK/$mode"
  want=4; [ "$mode" = async ] && want=2
  train_expect 1 2 --ckpt.dir="$d" --ckpt.every=2 --ckpt.async=$([ "$mode" = async ] && echo true || echo false) \
    --debug.fail_at_step=5 --debug.rank=1 --log.metrics="$d.jsonl"
  expect_in "$ZT_WORK/err" "rank 1: debug.fail_at_step=5: injected failure after step 5"
  train 2 --ckpt.dir="$d" --ckpt.every=2 --log.metrics="$d.jsonl"
  expect_in "$ZT_WORK/out" "resuming from .*step_0000000$want \(step $want\)"
  same_losses "$ZT_WORK/ref.jsonl" "$d.jsonl"
  echo "$mode: resumed from step $want after the failure; losses match the uninterrupted run"
done
echo "PASS"
