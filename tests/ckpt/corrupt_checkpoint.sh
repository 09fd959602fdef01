#!/usr/bin/env bash
# A damaged newest checkpoint (truncated optimizer shard, one flipped byte, missing manifest, or a
# .tmp directory a dead job left): `zckpt verify` exits 1 naming the problem; ckpt.resume=auto skips
# it, says which and why, and resumes from the previous one; naming it as ckpt.resume=PATH is a
# start-up error (exit 2) that names the problem.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"

train 2 --ckpt.dir="$ZT_WORK/good" --ckpt.every=2 --train.stop_at_step=4 --log.metrics="$ZT_WORK/good.jsonl"
expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/good/step_00000004"
expect_in "$ZT_WORK/out" "sound \(step 4, 4 files"

# check_damage NAME WHAT_REGEX DAMAGE_COMMAND...: damages a copy's step_4 and checks all three paths.
check_damage() {
  local name=$1 what=$2; shift 2
  local d="$ZT_WORK/$name"
  cp -r "$ZT_WORK/good" "$d"
  (cd "$d/step_00000004" && "$@") || fail "$name: could not damage the checkpoint"
  expect_exit 1 "$ZT_BIN/zckpt" verify "$d/step_00000004"
  expect_in "$ZT_WORK/out" "$what" "$name: zckpt verify did not name the problem"
  # One process here (mpirun adds a second per failing job); the 2-rank case is checked once below.
  expect_exit 2 "$ZT_BIN/ztrain" "${CKPT_COMMON[@]}" --ckpt.resume="$d/step_00000004"
  expect_in "$ZT_WORK/err" "ckpt.resume=.*step_00000004 does not verify: .*$what" "$name: explicit path: problem not named"
  train 2 --ckpt.dir="$d" --train.stop_at_step=3 --log.metrics="$d.jsonl"
  expect_in "$ZT_WORK/err" "skipping checkpoint .*step_00000004: .*$what" "$name: resume=auto did not say what it skipped and why"
  expect_in "$ZT_WORK/out" "resuming from .*step_00000002 \(step 2\)"
  expect_in "$d.jsonl" '"event": "resume", "step": 2,'
  echo "$name: verify, resume=auto and resume=PATH all name it"
}
flip_byte() { /usr/bin/python3 -c '
import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x40; open(p, "wb").write(b)' "$1"; }

check_damage truncated "optim/rank_00001_of_00002.h5: [0-9]+ bytes, the manifest says [0-9]+ \(truncated\)" \
  truncate -s 50000 optim/rank_00001_of_00002.h5
check_damage flipped "model.h5: SHA-256 differs" flip_byte model.h5
check_damage no_manifest "MANIFEST.json: missing" rm MANIFEST.json
# ... and resume=auto set that step_4 (nobody's: no manifest) aside whole, not left in the way of step 4's save.
ls -d "$ZT_WORK"/no_manifest/abandoned/unreadable_after_step_2_*/step_00000004 >/dev/null || fail "no_manifest: step_4 not set aside"
check_damage missing_shard "optim/rank_00000_of_00002.h5: missing" rm optim/rank_00000_of_00002.h5

# A .tmp directory (a job that died while writing step 6) is never resumed from, and named.
cp -r "$ZT_WORK/good" "$ZT_WORK/tmpdir" && cp -r "$ZT_WORK/good/step_00000004" "$ZT_WORK/tmpdir/step_00000006.tmp"
train 2 --ckpt.dir="$ZT_WORK/tmpdir" --train.stop_at_step=5 --log.metrics="$ZT_WORK/tmpdir.jsonl"
expect_in "$ZT_WORK/err" "skipping checkpoint .*step_00000006.tmp: never committed"
expect_in "$ZT_WORK/out" "resuming from .*step_00000004 \(step 4\)"
[ ! -e "$ZT_WORK/tmpdir/step_00000006.tmp" ] || fail "the stale .tmp directory was not cleaned up after a commit"

# On 2 ranks: exit 2 before any training, printed once; a path that does not exist says so.
train_expect 2 2 --ckpt.resume="$ZT_WORK/flipped/step_00000004"
expect_in "$ZT_WORK/err" "does not verify: model.h5: SHA-256 differs"
[ "$(grep -c 'does not verify' "$ZT_WORK/err")" -eq 1 ] || fail "the start-up error should be printed once"
! grep -q "^step " "$ZT_WORK/out" || fail "trained despite a bad ckpt.resume"
expect_exit 2 "$ZT_BIN/ztrain" "${CKPT_COMMON[@]}" --ckpt.resume="$ZT_WORK/nowhere"
expect_in "$ZT_WORK/err" "ckpt.resume=.*nowhere does not verify: .*not a directory"

# ckpt.resume=none with ckpt.overwrite=true ignores what is there (without it: tests/faults/foreign_checkpoints.sh).
train 2 --ckpt.dir="$ZT_WORK/good" --ckpt.resume=none --ckpt.overwrite=true --train.stop_at_step=1 --log.metrics="$ZT_WORK/none.jsonl"
! grep -q '"event": "resume"' "$ZT_WORK/none.jsonl" || fail "ckpt.resume=none resumed"
echo "PASS"
