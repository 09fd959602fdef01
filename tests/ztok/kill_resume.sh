#!/usr/bin/env bash
# A ztok run killed (SIGKILL) at any point and started again gives the same bytes as a straight run;
# a rerun with other settings on the same --out is refused (exit 2); a complete run reruns as a no-op.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$work"  # relative input names: the validation split hashes them
make_corpus in 9 4000
args=(--vocab "$vocab" --split paragraph --shard-tokens 15000 --valid-fraction 0.2 --threads 2 -q
      --debug-chunk-bytes 20000 "in/*.txt")
"$ztok" --out "$work/straight" "${args[@]}" >/dev/null
for kill_at in 1 4 9 23; do
  out=$work/killed-$kill_at
  set +e
  "$ztok" --out "$out" --debug-kill-after-chunks "$kill_at" "${args[@]}" >/dev/null 2>&1
  rc=$?
  set -e
  [ $rc -eq 137 ] || fail "kill after $kill_at chunks: exit $rc, expected 137 (SIGKILL)"
  grep -q '"complete": false' "$out/ztok-progress.json" || fail "kill after $kill_at: the output is not marked unfinished"
  "$ztok" --out "$out" "${args[@]}" >"$work/resume.log"
  grep -q resumed "$work/resume.log" || [ "$kill_at" -le 1 ] || fail "kill after $kill_at: the rerun did not resume"
  for f in "$work/straight"/*.h5; do
    cmp "$f" "$out/$(basename "$f")" || fail "kill after $kill_at chunks: $(basename "$f") differs from the straight run"
  done
  [ "$(ls "$out" | grep -c '\.h5$')" = "$(ls "$work/straight" | grep -c '\.h5$')" ] || fail "kill after $kill_at: shard count"
  [ ! -e "$out/.ztok" ] || fail "kill after $kill_at: journals left behind: $(ls -A "$out/.ztok")"
  echo "ok: killed after $kill_at chunks, resumed: identical shards"
done
# A scheduler's SIGTERM: ztok says what it leaves (unfinished, run again to resume) and dies by the signal.
out=$work/terminated
set +e
"$ztok" --out "$out" --debug-kill-after-chunks 4 --debug-kill-signal 15 "${args[@]}" >/dev/null 2>"$work/term.err"
rc=$?
set -e
[ $rc -eq 143 ] || fail "SIGTERM: exit $rc, expected 143"
grep -q "stopped by a signal: $out is unfinished (ztrain refuses it); run the same command again to resume" "$work/term.err" ||
  fail "SIGTERM: no line saying the output is unfinished: $(cat "$work/term.err")"
"$ztok" --out "$out" "${args[@]}" >/dev/null
for f in "$work/straight"/*.h5; do cmp "$f" "$out/$(basename "$f")" || fail "SIGTERM, resumed: $(basename "$f") differs"; done
echo "ok: SIGTERM said what it left, and the rerun finished it"
# --split file: documents of ~100 kB span many 20 kB chunks, so resumes start inside a document.
file_args=("${args[@]/paragraph/file}")
"$ztok" --out "$work/straight-file" "${file_args[@]}" >/dev/null
for kill_at in 5 13; do
  out=$work/killed-file-$kill_at
  "$ztok" --out "$out" --debug-kill-after-chunks "$kill_at" "${file_args[@]}" >/dev/null 2>&1 && fail "no kill"
  grep -q '"mid_doc": true' "$out/.ztok/rank_00000.json" || fail "kill after $kill_at: expected a mid-document position"
  "$ztok" --out "$out" "${file_args[@]}" >/dev/null
  for f in "$work/straight-file"/*.h5; do
    cmp "$f" "$out/$(basename "$f")" || fail "--split file, kill after $kill_at: $(basename "$f") differs"
  done
  echo "ok: --split file, killed inside a document after $kill_at chunks, resumed: identical shards"
done

# An external SIGKILL at an arbitrary moment, twice.
out=$work/external
for delay in 0.2 0.4; do
  "$ztok" --out "$out" "${args[@]}" >/dev/null 2>&1 & pid=$!
  sleep "$delay"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
done
"$ztok" --out "$out" "${args[@]}" >/dev/null
for f in "$work/straight"/*.h5; do cmp "$f" "$out/$(basename "$f")" || fail "external kill: $(basename "$f") differs"; done
echo "ok: external kills, resumed: identical shards"

set +e
"$ztok" --out "$work/straight" "${args[@]/15000/16000}" >/dev/null 2>"$work/refused.log"; rc=$?
set -e
[ $rc -eq 2 ] || fail "a rerun with another --shard-tokens gave exit $rc, expected 2"
grep -q -- '--shard-tokens 15000 vs 16000' "$work/refused.log" || fail "refusal does not name the setting: $(cat "$work/refused.log")"
"$ztok" --out "$work/straight" "${args[@]}" >"$work/again.log"
grep -q 'nothing to do' "$work/again.log" || fail "a complete run was not recognised: $(cat "$work/again.log")"
mkdir -p "$work/foreign" && cp "$work/straight/train_000000.h5" "$work/foreign/"
set +e; "$ztok" --out "$work/foreign" "${args[@]}" >/dev/null 2>&1; rc=$?; set -e
[ $rc -eq 2 ] || fail "an --out with foreign shards gave exit $rc, expected 2"
# An input edited in place at the same size (here only its modification time moves) is another input.
first_input=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["settings"]["inputs"][0]["name"])' \
  "$work/straight/ztok-progress.json")
touch -d '2001-01-01' "$first_input"
set +e; "$ztok" --out "$work/straight" "${args[@]}" >/dev/null 2>"$work/edited.log"; rc=$?; set -e
[ $rc -eq 2 ] && grep -q 'was modified since that run read it' "$work/edited.log" ||
  fail "an input modified since the run was not noticed (exit $rc): $(cat "$work/edited.log")"
echo "ok: other settings refused (exit 2), complete run is a no-op, foreign shards refused, an edited input refused"
# --out is the inputs' own directory, read by a glob over it: ztok's own files there (shards, progress)
# are not inputs, so a killed run resumes and a complete one reruns as a no-op; a rerun with other
# settings is refused without advising to delete the directory (it holds the inputs).
mkdir own && cp in/part_001.txt in/part_002.txt own/
own_args=(--vocab "$vocab" --shard-tokens 15000 --threads 2 -q --debug-chunk-bytes 20000 "own/*")
"$ztok" --out own-straight "${own_args[@]}" >/dev/null
"$ztok" --out own --debug-kill-after-chunks 3 "${own_args[@]}" >/dev/null 2>&1 && fail "own dir: no kill"
"$ztok" --out own "${own_args[@]}" >"$work/own.log" 2>&1 || fail "own dir: the rerun failed: $(cat "$work/own.log")"
grep -q resumed "$work/own.log" || fail "own dir: the rerun did not resume: $(cat "$work/own.log")"
same_shards own-straight own "--out the inputs' directory, killed and resumed"
"$ztok" --out own "${own_args[@]}" >"$work/own.log" 2>&1 || fail "own dir, complete: $(cat "$work/own.log")"
grep -q "nothing to do" "$work/own.log" || fail "own dir, complete: not a no-op: $(cat "$work/own.log")"
set +e
"$ztok" --out own --vocab "$vocab" --shard-tokens 9999 -q "own/*" >"$work/own.log" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "own dir, other settings: exit $rc, expected 2"
grep -q "remove ztok's files from own (train_\*.h5, valid_\*.h5, ztok-progress.json, .ztok/; not the directory: it holds inputs)" \
  "$work/own.log" || fail "own dir, other settings: $(cat "$work/own.log")"
echo "ok: --out the inputs' directory: resumed, reran as a no-op, and a refusal keeps the inputs"
