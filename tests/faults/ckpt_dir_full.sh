#!/usr/bin/env bash
# A ckpt.dir without room for the checkpoints the run will hold at once (ckpt.keep + the one being
# written) stops the job at start-up (exit 2) with the bytes needed and free and the fix, not at its
# first save; the checkpoint already there still verifies; --force starts it anyway.
source "$(dirname "$0")/../lib.sh"
make_tiny_data
args=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2)
small="$ZT_WORK/small"
mkdir -p "$small"
# The tiny model's checkpoint is about 0.6 MiB on disk (predicted 0.77 MiB): 2 MiB holds
# two (ckpt.keep=1: the kept one and the next), not four.
mount -t tmpfs -o size=2048k tmpfs "$small" 2>/dev/null || skip "mounting a small tmpfs is not allowed here (needs root)"
trap 'umount "$small"; rm -rf "$ZT_WORK"' EXIT

ZT_TIMEOUT=60 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.max_steps=2 --ckpt.dir="$small/ckpt" --ckpt.keep=1 \
  >"$ZT_WORK/out" 2>&1 || { tail -n 20 "$ZT_WORK/out"; fail "ckpt.keep=1 (two checkpoints at once) should fit"; }

start=$SECONDS
ZT_TIMEOUT=60 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.max_steps=4 --ckpt.dir="$small/ckpt" --log.metrics="$ZT_WORK/m.jsonl" \
  >"$ZT_WORK/out" 2>"$ZT_WORK/err"
rc=$?
[ "$rc" -eq 2 ] || { tail -n 20 "$ZT_WORK/err"; fail "exit $rc on a full ckpt.dir, expected 2 at start-up"; }
[ $((SECONDS - start)) -le 60 ] || fail "took $((SECONDS - start)) s"
expect_in "$ZT_WORK/err" "^rank 0: ckpt.dir=$small/ckpt has [0-9.]+ MiB free on host [^ ]+; this run needs [0-9.]+ MiB \([0-9.]+ MiB per checkpoint x 3 more checkpoint\(s\): ckpt.keep=3 plus the one being written, 1 already in ckpt.dir\)\. Fix: .*lower ckpt.keep" "needed vs free, and the fix"
message=$(grep -m1 '^rank' "$ZT_WORK/err")
predicted=$(grep -Eo '[0-9.]+ MiB per checkpoint' <<<"$message" | grep -Eo '^[0-9.]+')
if grep -q '"loss"' "$ZT_WORK/m.jsonl" 2>/dev/null; then fail "a step was trained"; fi
expect_exit 0 "$ZT_BIN/zckpt" verify "$small/ckpt/step_00000002"
# The prediction covers the real checkpoint, without doubling it.
real=$(du -sb "$small/ckpt/step_00000002" | cut -f1)
/usr/bin/python3 -c "import sys; p, r = float('$predicted') * 2**20, $real; print(f'checkpoint: predicted {p:.0f} B, on disk {r} B'); sys.exit(0 if r <= p <= 2 * r else 1)" ||
  fail "the predicted checkpoint size ($predicted MiB) is not between the real one ($real B) and twice it"
echo "ok: full ckpt.dir refused after $((SECONDS - start)) s: $message"
echo "PASS"
