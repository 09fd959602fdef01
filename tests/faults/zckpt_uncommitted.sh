#!/usr/bin/env bash
# `zckpt verify` tells apart: nothing at the path, or no checkpoint there (exit 2, saying so), and a
# save interrupted before its commit (step_N.tmp, or a step directory without manifest: exit 1, "the
# save was interrupted before commit", naming the newest checkpoint beside it that verifies). The
# checkpoints that were there before still verify. info, export and reshard refuse the same paths.
source "$(dirname "$0")/../lib.sh"
make_tiny_data
expect_exit 0 "$ZT_BIN/ztrain" "${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=4 --train.micro_batch=2 \
  --train.max_steps=4 --ckpt.every=2 --ckpt.keep=0 --ckpt.dir="$ZT_WORK/ckpt"
c="$ZT_WORK/ckpt"

expect_exit 2 "$ZT_BIN/zckpt" verify "$c/step_00000009"
expect_in "$ZT_WORK/err" "step_00000009: no such file or directory: not a checkpoint \(never written here\)"

cp -r "$c/step_00000004" "$c/step_00000006.tmp"  # a job died after writing every file, before the rename
expect_exit 2 "$ZT_BIN/zckpt" verify "$c/step_00000006"
expect_in "$ZT_WORK/err" "step_00000006: no such checkpoint: it was never committed \(.*step_00000006.tmp holds a save that was interrupted before commit\); this checkpoint is incomplete; use step_00000004"
expect_exit 1 "$ZT_BIN/zckpt" verify "$c/step_00000006.tmp"
expect_in "$ZT_WORK/out" "step_00000006.tmp: never renamed into place: the save was interrupted before commit; this checkpoint is incomplete; use step_00000004"

cp -r "$c/step_00000004" "$c/step_00000008" && rm "$c/step_00000008/MANIFEST.json"
expect_exit 1 "$ZT_BIN/zckpt" verify "$c/step_00000008/"
expect_in "$ZT_WORK/out" "step_00000008/: MANIFEST.json: missing: the save was interrupted before commit; this checkpoint is incomplete; use step_00000004"

expect_exit 2 "$ZT_BIN/zckpt" verify "$c"
expect_in "$ZT_WORK/err" "is a checkpoint directory \(ckpt.dir\), not a checkpoint: verify one of its steps, e.g. zckpt verify .*/step_0000000"
expect_exit 2 "$ZT_BIN/zckpt" verify "$ZT_WORK/data"
expect_in "$ZT_WORK/err" "data: not a checkpoint: no MANIFEST.json and none of a checkpoint's files"
expect_exit 2 "$ZT_BIN/zckpt" verify "$c/step_00000004/MANIFEST.json"
expect_in "$ZT_WORK/err" "MANIFEST.json: not a directory"

# info, export and reshard say the same instead of reading an uncommitted or absent checkpoint.
expect_exit 2 "$ZT_BIN/zckpt" info "$c/step_00000009"
expect_in "$ZT_WORK/err" "step_00000009: no such file or directory"
expect_exit 1 "$ZT_BIN/zckpt" export "$c/step_00000006.tmp" --out "$ZT_WORK/x.safetensors"
expect_in "$ZT_WORK/err" "step_00000006.tmp: never renamed into place: the save was interrupted before commit"
[ ! -e "$ZT_WORK/x.safetensors" ] || fail "exported an uncommitted checkpoint"

for step in 00000002 00000004; do expect_exit 0 "$ZT_BIN/zckpt" verify "$c/step_$step"; done
echo "PASS"
