#!/usr/bin/env bash
# A run never destroys checkpoints it does not own. In one ckpt.dir: run A's checkpoints (steps 2, 4)
# and one from before run ids (step 1, owner unknown).
#  - ckpt.resume=none there refuses (exit 2), naming each with its owner and the fix; with
#    ckpt.overwrite=true a new run B starts, and its ckpt.keep=1 rotation deletes only B's;
#  - ckpt.resume=auto continues B (the newest) under B's run id and again rotates only B's; one
#    resuming the checkpoint without a run id goes on under a new id and never rotates that one;
#  - ckpt.resume=auto over checkpoints none of which verifies refuses (exit 2), naming each and why;
#  - another run's damaged step_N newer than the one resumed is named at start-up, and the save of
#    that step refuses to replace it (exit 1); one whose manifest is damaged (nobody's) is set aside whole
#    into abandoned/ at start-up and the run saves that step (sweep 29 F3).
# Every checkpoint not B's still verifies at the end.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/../ckpt/ckpt_lib.sh"
D=$ZT_WORK/shared

run_of() { "$ZT_BIN/zckpt" info "$1" | sed -n 's/^  run \([^ ]*\)$/\1/p'; }
no_training() { ! grep -q "^step " "$ZT_WORK/out" || fail "$1: it trained"; }

train 2 --ckpt.dir="$D" --ckpt.every=2 --train.stop_at_step=4 --ckpt.keep=0
run_a=$(run_of "$D/step_00000004")
[ -n "$run_a" ] && [ "$(run_of "$D/step_00000002")" = "$run_a" ] || fail "run A's checkpoints do not carry one run id ('$run_a')"
# A checkpoint written before run ids: no run_id in its manifest (not checksummed: it still verifies).
train 2 --ckpt.dir="$ZT_WORK/old" --train.stop_at_step=1
sed -i '/"run_id"\|"manifest_sha256"/d' "$ZT_WORK/old/step_00000001/MANIFEST.json" && mv "$ZT_WORK/old/step_00000001" "$D/"
expect_exit 0 "$ZT_BIN/zckpt" verify "$D/step_00000001"
expect_in "$ZT_WORK/out" "sound \(step 1, .*owner unknown"
before=("$D/step_00000001" "$D/step_00000002" "$D/step_00000004")

# ---- resume=none over them: refused; with ckpt.overwrite=true a new run B ------------------------
train_expect 2 2 --ckpt.dir="$D" --ckpt.resume=none
expect_in "$ZT_WORK/err" "ckpt.resume=none starts a new run, but ckpt.dir=.*shared holds 3 checkpoint\(s\) of other runs: step_00000004 \(run $run_a\), step_00000002 \(run $run_a\), step_00000001 \(owner unknown"
expect_in "$ZT_WORK/err" "ckpt.overwrite=true to start over them"
no_training "resume=none"
[ ! -e "$D/ztrain.lock" ] || fail "the lock was not released on exit 2"
verify_checkpoints "${before[@]}"

train 2 --ckpt.dir="$D" --ckpt.resume=none --ckpt.overwrite=true --ckpt.every=3 --train.stop_at_step=6 --ckpt.keep=1
expect_in "$ZT_WORK/err" "ckpt.overwrite=true: a new run in ckpt.dir=.* over 3 checkpoint\(s\) of other runs"
run_b=$(run_of "$D/step_00000006")
[ -n "$run_b" ] && [ "$run_b" != "$run_a" ] || fail "run B has no new run id ('$run_b' vs A's '$run_a')"
expect_in "$ZT_WORK/out" "checkpoint .*step_00000003 deleted \(ckpt.keep=1\)"
expect_in "$ZT_WORK/out" "ckpt.keep=1 rotates only this run's checkpoints \(run $run_b\); kept 3 of other runs in .*: step_00000004 \(run $run_a\), step_00000002 \(run $run_a\), step_00000001 \(owner unknown"
verify_checkpoints "${before[@]}"
echo "ok: resume=none refused over other runs' checkpoints; with ckpt.overwrite=true run B rotated only its own"

# ---- resume=auto continues B (its id), rotating B's own only --------------------------------------
train 2 --ckpt.dir="$D" --ckpt.every=1 --ckpt.keep=1
expect_in "$ZT_WORK/out" "resuming from .*step_00000006 \(step 6\)"
expect_in "$ZT_WORK/out" "run $run_b goes on"
[ "$(run_of "$D/step_00000008")" = "$run_b" ] || fail "the resumed run did not keep run B's id"
left=$(cd "$D" && echo step_*)
[ "$left" = "step_00000001 step_00000002 step_00000004 step_00000008" ] || fail "left in ckpt.dir: $left"
verify_checkpoints "${before[@]}" "$D/step_00000008"
echo "ok: resume=auto continued run B and rotated only B's checkpoints"

# ---- resuming a checkpoint from before run ids: a new id, and that checkpoint is never rotated -----
G=$ZT_WORK/legacy
mkdir -p "$G" && cp -r "$D/step_00000001" "$G/"
train 2 --ckpt.dir="$G" --ckpt.every=1 --ckpt.keep=1 --train.stop_at_step=3
expect_in "$ZT_WORK/err" "step_00000001 has no run id \(written before run ids\): this run goes on as run [0-9]{8}T[0-9]{6}Z-"
[ "$(cd "$G" && echo step_*)" = "step_00000001 step_00000003" ] || fail "left in $G: $(ls "$G")"
verify_checkpoints "$G/step_00000001"
echo "ok: a checkpoint without a run id resumed under a new id and was kept by rotation"

# ---- resume=auto where none verifies: refused, each named with why --------------------------------
C=$ZT_WORK/corrupt
mkdir -p "$C" && cp -r "$D/step_00000002" "$D/step_00000004" "$C/"
truncate -s 1000 "$C/step_00000004/optim/rank_00001_of_00002.h5"
rm "$C/step_00000002/MANIFEST.json"
train_expect 2 2 --ckpt.dir="$C"
expect_in "$ZT_WORK/err" "ckpt.resume=auto: no checkpoint in ckpt.dir=.*corrupt verifies"
expect_in "$ZT_WORK/err" "corrupt/step_00000004: optim/rank_00001_of_00002.h5: 1000 bytes, the manifest says [0-9]+ \(truncated\)"
expect_in "$ZT_WORK/err" "corrupt/step_00000002: MANIFEST.json: missing"
expect_in "$ZT_WORK/err" "ckpt.overwrite=true to start at step 0 anyway"
no_training "resume=auto over corrupt checkpoints"
[ "$(cd "$C" && echo *)" = "step_00000002 step_00000004" ] || fail "the refused run left something in $C: $(ls "$C")"
train 2 --ckpt.dir="$C" --ckpt.overwrite=true --train.stop_at_step=1
expect_in "$ZT_WORK/out" "starting at step 0 as the new run"
[ -d "$C/step_00000004" ] && [ -d "$C/step_00000002" ] || fail "ckpt.overwrite=true deleted checkpoints of steps it did not save"
verify_checkpoints "${before[@]}"
echo "ok: resume=auto over only unverifiable checkpoints refused, each named"

# ---- a newer step_N of another run in the way: named at start-up, and a save refuses to replace it -
W=$ZT_WORK/in_the_way
mkdir -p "$W" && cp -r "$G/step_00000001" "$D/step_00000004" "$W/"  # owner unknown; run A's
truncate -s 1000 "$W/step_00000004/model.h5"  # A's step 4 damaged: resume=auto takes step 1
train_expect 1 2 --ckpt.dir="$W" --ckpt.every=2 --train.stop_at_step=4
expect_in "$ZT_WORK/err" "step_00000004 \(run $run_a\) is not this run's: if this run saves that step it stops there"
expect_in "$ZT_WORK/err" "in_the_way/step_00000004 belongs to run $run_a, not to this run .*: it is not replaced"
[ "$(stat -c %s "$W/step_00000004/model.h5")" -eq 1000 ] || fail "run A's damaged step_4 was replaced"
verify_checkpoints "$W/step_00000001" "$W/step_00000002"
echo "ok: another run's damaged step_4 in the way was named at start-up and not replaced (exit 1 at that save)"

# ---- a newer step_N whose manifest is damaged (nobody can say whose): set aside whole, not in the way -
W=$ZT_WORK/unreadable
mkdir -p "$W" && cp -r "$G/step_00000001" "$D/step_00000004" "$W/"
printf 'not json' >"$W/step_00000004/MANIFEST.json"
train 2 --ckpt.dir="$W" --ckpt.every=2 --train.stop_at_step=4 --ckpt.keep=0
expect_in "$ZT_WORK/err" "the skipped checkpoints step_00000004 \\(their manifests damaged or missing.*are moved to .*unreadable/abandoned/unreadable_after_step_1_"
expect_not_in "$ZT_WORK/err" "is not this run's"
grep -q "not json" "$W"/abandoned/unreadable_after_step_1_*/step_00000004/MANIFEST.json || fail "the damaged step_4 was not kept aside whole"
verify_checkpoints "$W/step_00000002" "$W/step_00000004"
echo "ok: a newer step_4 with a damaged manifest was set aside whole at start-up; the run saved its own step 4"
echo "PASS"
