#!/usr/bin/env bash
# ztok on a full disk: the output directory is a small tmpfs that fills up while shards and journals
# are written (where mounting is not allowed, RLIMIT_FSIZE makes a write fail instead). ztok ends with
# exit 1 naming the file, the cause and the fix (no SIGSEGV from HDF5's clean-up), leaves no partial
# shard and no .tmp file, every shard it did write is the reference's byte for byte, and running the
# same command again on a disk with room resumes to the reference's shards.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../ztok/common.sh"

make_corpus "$work/in" 4 4000
args=(--vocab "$vocab" -q --threads 2 --shard-tokens 30000 "$work/in/*.txt")
"$ztok" --out "$work/ref" "${args[@]}" >/dev/null || fail "reference run failed"
shards() { find "$1" -maxdepth 1 -name '*.h5' | wc -l; }
[ "$(shards "$work/ref")" -ge 4 ] || fail "the corpus should give several shards"

limit=()
cases=()
if mount -t tmpfs -o size=64k tmpfs "$work/small" 2>/dev/null || { mkdir -p "$work/small" &&
   mount -t tmpfs -o size=64k tmpfs "$work/small" 2>/dev/null; }; then
  trap 'umount "$work/small"; rm -rf "$work"' EXIT
  cases=(64k 200k 400k)  # full in the first journal, at a shard's close, a few shards in
  echo "full disk: tmpfs of ${cases[*]}"
else
  limit=(bash -c 'trap "" XFSZ; ulimit -f 48; exec "$@"' limited)  # 48 KiB per file: EFBIG
  export PMIX_MCA_gds=hash  # MPI's singleton start-up would hit the limit with its shared-memory files
  cases=(fsize)
  mkdir -p "$work/small"
  echo "full disk: RLIMIT_FSIZE of 48 KiB (mount -t tmpfs is not allowed here)"
fi

for size in "${cases[@]}"; do
  if [ "$size" != fsize ]; then
    if ! umount "$work/small" || ! mount -t tmpfs -o size="$size" tmpfs "$work/small"; then fail "remount $size"; fi
  fi
  rm -rf "$work/small/out"
  rc=0
  timeout 60 "${limit[@]}" "$ztok" --out "$work/small/out" "${args[@]}" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$work/err.txt"; fail "$size: expected exit 1 on a full disk, got $rc"; }
  grep -Eq "cannot write (shard|journal|journal of) $work/small/out/[^ ]+: " "$work/err.txt" ||
    { cat "$work/err.txt"; fail "$size: the file is not named"; }
  grep -Eq "file system is full|No space left on device|File too large" "$work/err.txt" ||
    { cat "$work/err.txt"; fail "$size: the cause is not named"; }
  grep -q "run the same command again" "$work/err.txt" || { cat "$work/err.txt"; fail "$size: no fix given"; }
  ! grep -q "Segmentation\|signal" "$work/err.txt" || fail "$size: crashed"
  leftovers=$(find "$work/small/out" -name '*.tmp')
  [ -z "$leftovers" ] || fail "$size: temporary files left: $leftovers"
  for f in "$work/small/out"/*.h5; do
    [ -e "$f" ] || continue
    cmp -s "$f" "$work/ref/$(basename "$f")" || fail "$size: $(basename "$f") is left but is not the complete shard"
  done
  # Room again: the same command resumes and ends with the reference's shards.
  cp -r "$work/small/out" "$work/roomy-$size"
  "$ztok" --out "$work/roomy-$size" "${args[@]}" >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; fail "$size: resume failed"; }
  same_shards "$work/ref" "$work/roomy-$size" "$size: resumed after a full disk"
  echo "$size: exit 1, $(grep -o 'cannot write [a-z]*' "$work/err.txt"), $(shards "$work/small/out") shard(s) kept; resume identical"
done
# An instruction run does not resume: its write error says to start over in an empty --out, never
# "run the same command again: ztok resumes" (which is refused there: the --out already holds shards).
awk 'BEGIN { for (i = 0; i < 3000; i++) printf "{\"prompt\": \"question %d about the whale and the sea\", \"response\": \"answer %d: the white whale swims far away\"}\n", i, i }' >"$work/chat.jsonl"
rc=0
PMIX_MCA_gds=hash timeout 60 bash -c 'trap "" XFSZ; ulimit -f 48; exec "$@"' limited "$ztok" --out "$work/instruct-out" \
  --vocab "$vocab" -q --format instruct --chat-template chatml --special '<|im_start|>=50257' --special '<|im_end|>=50258' \
  "$work/chat.jsonl" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
[ "$rc" -eq 1 ] || { cat "$work/err.txt"; fail "instruct: expected exit 1 at the file size limit, got $rc"; }
grep -q "run the command again into an empty --out (remove $work/instruct-out's shards and ztok-progress.json first): an instruction run does not resume" \
  "$work/err.txt" || { cat "$work/err.txt"; fail "instruct: the fix is not to start over"; }
! grep -q "resumes from its last saved state" "$work/err.txt" || { cat "$work/err.txt"; fail "instruct: promises a resume"; }
echo "instruct: exit 1, $(grep -o 'cannot write [a-z]*' "$work/err.txt"), the fix starts over"
echo "PASS"
