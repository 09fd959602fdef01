#!/usr/bin/env bash
# Resharding on load: a checkpoint from 4 ranks resumes on 2, one from 2 on 4, and one from ZeRO
# stage 3 at stage 0, each within 1e-5 relative of the straight 2-rank run (exact equality is not
# expected: the reduction order changes with the world size). `zckpt reshard` (the same intersection
# code, offline) gives a checkpoint that resumes bit-identically to resharding on load, and a reshard
# round trip 2 -> 3 -> 2 reproduces the optimizer shards byte for byte.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"

train 2 --train.zero_stage=1 --ckpt.dir="$ZT_WORK/straight" --log.metrics="$ZT_WORK/straight.jsonl"

# resume_on FROM_NP FROM_STAGE TO_NP TO_STAGE NAME: stop at step 4 on one layout, finish on the other.
resume_on() {
  local d="$ZT_WORK/$5"
  train "$1" --train.zero_stage="$2" --ckpt.dir="$d" --log.metrics="$d.jsonl" --train.stop_at_step=4
  train "$3" --train.zero_stage="$4" --ckpt.dir="$d" --log.metrics="$d.jsonl"
  expect_in "$ZT_WORK/out" "resumed from .*step_00000004: step 4"
  echo -n "$5: "
  close_losses "$ZT_WORK/straight.jsonl" "$d.jsonl" 1e-5
}
resume_on 4 1 2 1 "w4_to_w2"
resume_on 2 1 4 1 "w2_to_w4"
resume_on 2 3 2 0 "stage3_to_stage0"
resume_on 4 2 2 3 "w4s2_to_w2s3"

# Offline: reshard w2_to_w4's step 4 (2 ranks) to 4 ranks; resuming from it on 4 ranks matches the
# resume that resharded on load, bit for bit.
expect_exit 0 "$ZT_BIN/zckpt" reshard "$ZT_WORK/w2_to_w4/step_00000004" --world 4 --out "$ZT_WORK/offline/step_00000004"
expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/offline/step_00000004"
expect_exit 0 "$ZT_BIN/zckpt" info "$ZT_WORK/offline/step_00000004"
expect_in "$ZT_WORK/out" "world_size 4, zero_stage 1"
cp "$ZT_WORK/w2_to_w4.jsonl" "$ZT_WORK/offline.jsonl"
sed -i '/"step": [5-8],/d; /"event"/d' "$ZT_WORK/offline.jsonl"
train 4 --train.zero_stage=1 --ckpt.dir="$ZT_WORK/offline" --log.metrics="$ZT_WORK/offline.jsonl"
same_losses "$ZT_WORK/w2_to_w4.jsonl" "$ZT_WORK/offline.jsonl"
same_weights "$ZT_WORK/w2_to_w4/step_00000008" "$ZT_WORK/offline/step_00000008"

# Round trip: 2 -> 3 -> 2 ranks reproduces every optimizer shard byte for byte.
src="$ZT_WORK/straight/step_00000008"
expect_exit 0 "$ZT_BIN/zckpt" reshard "$src" --world 3 --out "$ZT_WORK/r3"
expect_exit 0 "$ZT_BIN/zckpt" reshard "$ZT_WORK/r3" --world 2 --out "$ZT_WORK/r2"
for r in 0 1; do
  f="optim/rank_0000${r}_of_00002.h5"
  cmp "$src/$f" "$ZT_WORK/r2/$f" || fail "reshard round trip changed $f"
done
expect_exit 2 "$ZT_BIN/zckpt" reshard "$src" --world 3 --out "$ZT_WORK/r3"
expect_in "$ZT_WORK/err" "exists"
echo "PASS"
