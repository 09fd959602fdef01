#!/usr/bin/env bash
# The disk fills up while a checkpoint is written (a 900 KiB tmpfs holds one checkpoint of the tiny
# model, not two; where mounting is not allowed, RLIMIT_FSIZE makes the writes fail instead): the run
# fails cleanly (exit 1, the checkpoint named), leaves no step_N directory but complete ones, and the
# previous checkpoint still verifies and resumes to the uninterrupted run's losses.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"

small="$ZT_WORK/small"
mkdir -p "$small"
limit=()
if mount -t tmpfs -o size=900k tmpfs "$small" 2>/dev/null; then
  trap 'umount "$small"; rm -rf "$ZT_WORK"' EXIT
  echo "full disk: a 900 KiB tmpfs"
else
  # Each rank runs under the limit (writes past 100 KiB fail with EFBIG, SIGXFSZ ignored); Open MPI's
  # shared-memory segment files would hit it too, so the ranks talk over TCP here.
  limit=(bash -c 'trap "" XFSZ; ulimit -f 100; exec "$@"' limited)
  export OMPI_MCA_btl=self,tcp
  echo "full disk: RLIMIT_FSIZE of 100 KiB (mount -t tmpfs is not allowed here)"
fi

train 2 --ckpt.dir="$ZT_WORK/ref" --log.metrics="$ZT_WORK/ref.jsonl"
# --force: the start-up check would refuse this small disk (tests/faults/ckpt_dir_full.sh); here it fills mid-save.
train 2 --ckpt.dir="$small/ckpt" --log.metrics="$ZT_WORK/full.jsonl" --train.stop_at_step=4 --force
expect_exit 0 "$ZT_BIN/zckpt" verify "$small/ckpt/step_00000004"

timeout 60 "$MPIEXEC" --oversubscribe -np 2 "${limit[@]}" "$ZT_BIN/ztrain" "${CKPT_COMMON[@]}" --ckpt.dir="$small/ckpt" \
  --log.metrics="$ZT_WORK/full.jsonl" --force >"$ZT_WORK/out" 2>"$ZT_WORK/err"
rc=$?
[ "$rc" -eq 1 ] || { tail -n 20 "$ZT_WORK/err"; fail "expected exit 1 on a full disk, got $rc"; }
expect_in "$ZT_WORK/err" "checkpoint step_00000008: .*(No space left on device|File too large|HDF5 failed)" "the cause is not named"
expect_in "$ZT_WORK/err" "checkpoint step_00000008 was not written.*the checkpoints before it are intact"
[ "$(ls "$small/ckpt")" = "step_00000004" ] || fail "the failed save left: $(ls "$small/ckpt")"
expect_exit 0 "$ZT_BIN/zckpt" verify "$small/ckpt/step_00000004"

# Resume from what survived (copied to a disk with room): the losses of the uninterrupted run.
cp -r "$small/ckpt" "$ZT_WORK/roomy"
train 2 --ckpt.dir="$ZT_WORK/roomy" --log.metrics="$ZT_WORK/full.jsonl"
expect_in "$ZT_WORK/out" "resuming from .*step_00000004 \(step 4\)"
same_losses "$ZT_WORK/ref.jsonl" "$ZT_WORK/full.jsonl"
echo "PASS"
