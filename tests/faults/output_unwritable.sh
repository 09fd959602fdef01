#!/usr/bin/env bash
# What the run writes is checked before the first step: a read-only ckpt.dir, a ckpt.dir below a file
# and a read-only log.metrics directory each stop the job with exit 2 within seconds, naming the path,
# the errno text and the fix, and no step is trained; a missing ckpt.dir that can be created is fine.
# --preflight's output file likewise before any measurement (a missing directory, a directory).
source "$(dirname "$0")/../lib.sh"
make_tiny_data
args=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2)

# refused WHAT ztrain-args...: exit 2 within 60 s, nothing trained (no metrics line, no checkpoint).
refused() {
  local what=$1 start rc; shift
  start=$SECONDS
  ZT_TIMEOUT=60 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.max_steps=4 "$@" >"$ZT_WORK/out" 2>"$ZT_WORK/err"
  rc=$?
  [ "$rc" -eq 2 ] || { tail -n 20 "$ZT_WORK/err"; fail "$what: exit $rc, expected 2 before any training"; }
  [ $((SECONDS - start)) -le 60 ] || fail "$what: took $((SECONDS - start)) s"
  if grep -q '"loss"' "$ZT_WORK"/*.jsonl 2>/dev/null; then fail "$what: a step was trained"; fi
  echo "ok: $what: exit 2 after $((SECONDS - start)) s: $(grep -m1 '^rank' "$ZT_WORK/err")"
}

# preflight_refused WHAT PATTERN ztrain-args...: --preflight exits 2, PATTERN once, nothing measured.
preflight_refused() {
  local what=$1 pattern=$2; shift 2
  ZT_TIMEOUT=60 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --preflight --preflight.iters=1 --preflight.max_mb=1 "$@" \
    >"$ZT_WORK/out" 2>"$ZT_WORK/err"
  local rc=$?
  [ "$rc" -eq 2 ] || { tail -n 20 "$ZT_WORK/err"; fail "$what: exit $rc, expected 2 before measuring"; }
  expect_in "$ZT_WORK/err" "$pattern"
  [ "$(grep -Ec -- "$pattern" "$ZT_WORK/err")" -eq 1 ] || fail "$what: printed more than once"
  ! grep -q "GEMM\|bus bandwidth\|busbw" "$ZT_WORK/out" || fail "$what: measured before refusing"
  echo "ok: $what: exit 2: $(grep -m1 '^rank' "$ZT_WORK/err")"
}

# A checkpoint that existed before, on a file system mounted read-only afterwards: refused, still sound.
ro="$ZT_WORK/ro"
mkdir -p "$ro"
ZT_TIMEOUT=60 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.max_steps=2 --ckpt.dir="$ro/ckpt" >"$ZT_WORK/out" 2>&1 ||
  { tail -n 20 "$ZT_WORK/out"; fail "the run writing the first checkpoint failed"; }
if mount --bind "$ro" "$ro" 2>/dev/null && mount -o remount,bind,ro "$ro" 2>/dev/null; then
  trap 'umount "$ro" 2>/dev/null; rm -rf "$ZT_WORK"' EXIT
  refused "read-only ckpt.dir" --ckpt.dir="$ro/ckpt" --log.metrics="$ZT_WORK/m1.jsonl"
  expect_in "$ZT_WORK/err" "^rank [01]: ckpt.dir=$ro/ckpt is not writable on host [^ ]+ \(rank [01]\): cannot create $ro/ckpt/\.probe\.[^ ]+: Read-only file system\. .*Fix: " "the path, the errno text and the fix"
  [ "$(grep -c "is not writable" "$ZT_WORK/err")" -eq 1 ] || fail "the error is printed more than once"
  expect_exit 0 "$ZT_BIN/zckpt" verify "$ro/ckpt/step_00000002"
  [ "$(ls -A "$ro/ckpt")" = step_00000002 ] || fail "ckpt.dir holds more than before: $(ls -A "$ro/ckpt")"

  refused "read-only log.metrics directory" --ckpt.dir="$ZT_WORK/ok" --log.metrics="$ro/metrics.jsonl"
  expect_in "$ZT_WORK/err" "^rank 0: log.metrics=$ro/metrics.jsonl cannot be written: cannot create $ro/\.probe\.[^ ]+: Read-only file system\. Fix: "
  preflight_refused "read-only preflight.out directory" \
    "^rank 0: preflight.out=$ro/pf.json cannot be written: cannot create $ro/\.probe\.[^ ]+: Read-only file system" \
    --preflight.out="$ro/pf.json"
  umount "$ro"
else
  echo "NOTE: read-only cases not run: a read-only bind mount is not allowed here (needs root)"
fi

: >"$ZT_WORK/a_file"
refused "ckpt.dir below a file" --ckpt.dir="$ZT_WORK/a_file/ckpt" --log.metrics="$ZT_WORK/m2.jsonl"
expect_in "$ZT_WORK/err" "^rank 0: ckpt.dir=$ZT_WORK/a_file/ckpt is not writable .*: cannot create the directory $ZT_WORK/a_file/ckpt: Not a directory"

# --preflight's output file is checked before any measurement: a missing directory, a directory.
preflight_refused "preflight.out in a missing directory" \
  "^rank 0: preflight.out=$ZT_WORK/none/pf.json: its directory $ZT_WORK/none does not exist: create it" \
  --preflight.out="$ZT_WORK/none/pf.json"
preflight_refused "preflight.out a directory" "^rank 0: preflight.out=$ZT_WORK is a directory: give the JSON file's path" \
  --preflight.out="$ZT_WORK"

# Missing but creatable: created, trained, no probe file left behind.
ZT_TIMEOUT=60 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.max_steps=1 --ckpt.dir="$ZT_WORK/new/deep/ckpt" \
  --log.metrics="$ZT_WORK/new/m.jsonl" >"$ZT_WORK/out" 2>&1 || { tail -n 20 "$ZT_WORK/out"; fail "a missing ckpt.dir was not created"; }
[ "$(ls -A "$ZT_WORK/new/deep/ckpt")" = step_00000001 ] || fail "ckpt.dir holds: $(ls -A "$ZT_WORK/new/deep/ckpt")"
if compgen -G "$ZT_WORK/new/deep/ckpt/.probe*" >/dev/null || compgen -G "$ZT_WORK/new/.probe*" >/dev/null; then fail "a probe file was left behind"; fi
echo "ok: a missing ckpt.dir is created; no probe file is left"
echo "PASS"
