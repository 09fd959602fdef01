#!/usr/bin/env bash
# For every ZeRO stage on 2 ranks with gradient accumulation and shuffled data: 8 steps straight vs
# 4 steps (train.stop_at_step, exit 0) + resume + 4 give bit-identical losses and final weights; the
# same with asynchronous checkpoints every 2 steps. The resumed run logs a resume event; the exported
# weights load with init.from. A rollback to an earlier checkpoint sets the later ones aside.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"

for stage in 0 1 2 3; do
  train 2 --train.zero_stage=$stage --ckpt.dir="$ZT_WORK/s$stage/straight" --log.metrics="$ZT_WORK/s$stage/straight.jsonl"
  train 2 --train.zero_stage=$stage --ckpt.dir="$ZT_WORK/s$stage/split" --log.metrics="$ZT_WORK/s$stage/split.jsonl" \
    --train.stop_at_step=4
  [ -f "$ZT_WORK/s$stage/split/step_00000004/MANIFEST.json" ] || fail "stage $stage: no checkpoint at stop_at_step=4"
  train 2 --train.zero_stage=$stage --ckpt.dir="$ZT_WORK/s$stage/split" --log.metrics="$ZT_WORK/s$stage/split.jsonl"
  expect_in "$ZT_WORK/out" "resuming from .*/step_00000004 \(step 4\)"
  same_losses "$ZT_WORK/s$stage/straight.jsonl" "$ZT_WORK/s$stage/split.jsonl"
  same_weights "$ZT_WORK/s$stage/straight/step_00000008" "$ZT_WORK/s$stage/split/step_00000008"
  expect_in "$ZT_WORK/s$stage/split.jsonl" "^\{\"event\": \"resume\", \"step\": 4, \"from\": \".*/step_00000004\"\}$"
  echo "stage $stage: resume at step 4 is bit-identical"
done

# `zckpt export` writes what init.from loads (HF GPT2LMHeadModel layout, config.json beside it).
[ -f "$ZT_WORK/export_b/config.json" ] || fail "zckpt export wrote no config.json"
train 1 --init.from="$ZT_WORK/export_b/model.safetensors" --ckpt.resume=none --ckpt.dir="$ZT_WORK/from_export" \
  --train.stop_at_step=1
expect_in "$ZT_WORK/out" "initialised from .*export_b/model.safetensors"

# Asynchronous writes (every 2 steps, stage 2), resumed from the newest: still bit-identical.
train 2 --train.zero_stage=2 --ckpt.async=true --ckpt.every=2 --ckpt.keep=2 --ckpt.dir="$ZT_WORK/async" \
  --log.metrics="$ZT_WORK/async.jsonl" --train.stop_at_step=6
expect_in "$ZT_WORK/out" "checkpoint .*step_00000006: .*\(async: snapshot [0-9.]+ ms"
[ "$(ls "$ZT_WORK/async")" = "$(printf 'step_00000004\nstep_00000006')" ] || fail "ckpt.keep=2 kept: $(ls "$ZT_WORK/async")"
train 2 --train.zero_stage=2 --ckpt.async=true --ckpt.every=2 --ckpt.dir="$ZT_WORK/async" --log.metrics="$ZT_WORK/async.jsonl"
same_losses "$ZT_WORK/s2/straight.jsonl" "$ZT_WORK/async.jsonl"
same_weights "$ZT_WORK/s2/straight/step_00000008" "$ZT_WORK/async/step_00000008"

# A rollback: resuming the earlier step_6 of a ckpt.dir that holds step_8 moves step_8 aside (kept, named),
# so that rotation keeps the new branch and the next ckpt.resume=auto (every requeue) continues it.
train 2 --train.zero_stage=2 --ckpt.every=1 --ckpt.keep=2 --ckpt.dir="$ZT_WORK/async" --log.metrics="$ZT_WORK/rewound.jsonl" \
  --ckpt.resume="$ZT_WORK/async/step_00000006" --train.stop_at_step=7
expect_in "$ZT_WORK/err" "rolled back to step 6: the later checkpoints of ckpt.dir \(step_00000008\) are moved to .*abandoned/after_step_6_"
[ "$(ls "$ZT_WORK/async")" = "$(printf 'abandoned\nstep_00000006\nstep_00000007')" ] || fail "after the rollback: $(ls "$ZT_WORK/async")"
ls "$ZT_WORK"/async/abandoned/after_step_6_*/step_00000008/MANIFEST.json >/dev/null || fail "step_8 was not set aside whole"
train 2 --train.zero_stage=2 --ckpt.every=1 --ckpt.keep=2 --ckpt.dir="$ZT_WORK/async" --log.metrics="$ZT_WORK/rewound.jsonl" \
  --train.stop_at_step=8
expect_in "$ZT_WORK/out" "resuming from .*async/step_00000007 \(step 7\), the newest"
# Rerun at its last step: nothing to train, exit 0, and the metrics say how it ended.
train 2 --train.zero_stage=2 --ckpt.dir="$ZT_WORK/async" --log.metrics="$ZT_WORK/rewound.jsonl"
expect_in "$ZT_WORK/rewound.jsonl" '"event": "exit", "step": 8, "code": 0, "reason": "nothing to train"'
# ckpt.resume given a ckpt.dir (Megatron's --load) is named as one, with the fix.
train_expect 2 1 --ckpt.dir="$ZT_WORK/other" --ckpt.resume="$ZT_WORK/async"
expect_in "$ZT_WORK/err" "ckpt.resume=.*/async is a directory of checkpoints \(step_00000008, ...\), not one: give one of them"
echo "PASS"
