#!/usr/bin/env bash
# ztok's --out is checked before any input is read: below a file, a file, a read-only file system (where
# mounting is allowed), for text and instruction data and under mpirun (printed once): exit 2 naming the
# path, the cause and the fix, never a raw file system error; nothing is written.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
printf 'one line of text\n' >"$work/in.txt"
printf '{"prompt": "hi", "response": "there"}\n' >"$work/in.jsonl"
echo x >"$work/a_file"

# refused WHAT PATTERN ztok-args...: exit 2, PATTERN once on stderr.
refused() {
  local what=$1 pattern=$2 rc=0; shift 2
  "$@" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$work/err.txt"; fail "$what: exit $rc, expected 2"; }
  grep -Eq -- "$pattern" "$work/err.txt" || { cat "$work/err.txt"; fail "$what: no '$pattern'"; }
  [ "$(grep -Ec -- "$pattern" "$work/err.txt")" -eq 1 ] || { cat "$work/err.txt"; fail "$what: printed more than once"; }
  ! grep -q "filesystem error\|unexpected error" "$work/err.txt" || fail "$what: a raw file system error"
  echo "ok: $what: $(head -n 1 "$work/err.txt")"
}
text=(--vocab "$vocab" -q)
instruct=(--vocab "$vocab" -q --format instruct --chat-template chatml --special '<|im_start|>=50257,<|im_end|>=50258')

refused "below a file" "ztok: --out $work/a_file/out: cannot create the directory $work/a_file/out: .*: choose a directory you can write" \
  "$ztok" "${text[@]}" --out "$work/a_file/out" "$work/in.txt"
refused "a file" "ztok: --out $work/a_file exists and is not a directory: give a directory for the shards" \
  "$ztok" "${text[@]}" --out "$work/a_file" "$work/in.txt"
refused "instruct, below a file" "ztok: --out $work/a_file/out: cannot create the directory" \
  "$ztok" "${instruct[@]}" --out "$work/a_file/out" "$work/in.jsonl"
refused "2 ranks, below a file" "--out $work/a_file/out: cannot create the directory" \
  on_ranks 2 "$ztok" "${text[@]}" --out "$work/a_file/out" "$work/in.txt"
if mkdir "$work/ro" && mount -t tmpfs -o ro,size=64k tmpfs "$work/ro" 2>/dev/null; then
  trap 'umount "$work/ro"; rm -rf "$work"' EXIT
  refused "read-only" "ztok: --out $work/ro/out: cannot create the directory $work/ro/out: Read-only file system: choose" \
    "$ztok" "${text[@]}" --out "$work/ro/out" "$work/in.txt"
  refused "read-only, instruct" "ztok: --out $work/ro/out: cannot create the directory $work/ro/out: Read-only file system" \
    "$ztok" "${instruct[@]}" --out "$work/ro/out" "$work/in.jsonl"
else
  echo "NOTE: read-only cases not run: mounting a tmpfs is not allowed here"
fi
echo "PASS"
