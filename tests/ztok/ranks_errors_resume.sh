#!/usr/bin/env bash
# Multi-rank failures: a bad JSONL line on rank 2 ends every rank with exit 2 naming file and line; a
# run whose rank 1 is killed (inside a document) resumes on as many ranks to the one-process bytes,
# and is refused on another number of ranks, naming what to do.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$work"
mkdir -p jl
for i in 1 2 3; do
  for k in $(seq 1 300); do echo "{\"text\": \"file $i doc $k\"}"; done >"jl/f$i.jsonl"
done
sed -i '157s/.*/{"text": oops}/' jl/f3.jsonl  # f3 is rank 2's
set +e
on_ranks 3 "$ztok" --out bad --vocab "$vocab" --format jsonl -q "jl/*.jsonl" >/dev/null 2>"$work/bad.log"; rc=$?
set -e
[ $rc -eq 2 ] || fail "bad JSONL on rank 2: exit $rc, expected 2: $(cat "$work/bad.log")"
grep -q '^rank 2: ztok: jl/f3.jsonl:157: not valid JSON' "$work/bad.log" || fail "file and line not named: $(cat "$work/bad.log")"
echo "ok: bad JSONL on rank 2 -> exit 2: $(grep '^rank 2' "$work/bad.log" | cut -c1-60)..."

make_corpus in 5 3000
args=(--vocab "$vocab" --split file --shard-tokens 7000 --valid-fraction 0.3 --threads 1 -q --debug-chunk-bytes 20000
      --debug-checkpoint-seconds 0 "in/*.txt")
"$ztok" --out single "${args[@]}" >/dev/null
for kill_at in 2 6; do
  on_ranks 3 "$ztok" --out "killed-$kill_at" --debug-kill-after-chunks "$kill_at" --debug-kill-rank 1 "${args[@]}" \
    >/dev/null 2>&1 && fail "rank 1 was not killed"
  grep -q '"mid_doc": true' "killed-$kill_at/.ztok/rank_00001.json" || fail "expected rank 1 to stop inside a document"
  set +e
  on_ranks 2 "$ztok" --out "killed-$kill_at" "${args[@]}" >/dev/null 2>"$work/refused.log"; rc=$?
  set -e
  [ $rc -eq 2 ] || fail "resume on 2 of 3 ranks: exit $rc, expected 2"
  grep -q 'interrupted ztok run on 3 rank(s), not 2: resume it on as many (mpirun -np 3), or delete' "$work/refused.log" ||
    fail "refusal does not say what to do: $(cat "$work/refused.log")"
  on_ranks 3 "$ztok" --out "killed-$kill_at" "${args[@]}" >"$work/resume.log" 2>&1 || fail "resume failed: $(cat "$work/resume.log")"
  grep -q resumed "$work/resume.log" || fail "the rerun did not resume"
  same_shards single "killed-$kill_at" "rank 1 killed after $kill_at chunks, resumed"
  echo "ok: rank 1 killed after $kill_at chunks; -np 2 refused; -np 3 resumed to identical shards"
done
# SIGKILL of a random rank at arbitrary moments (start-up, tokenizing, writing shards), then a rerun.
descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
for delay in 0.4 0.6 0.8 1.0; do
  on_ranks 3 "$ztok" --out external "${args[@]}" >/dev/null 2>&1 & pid=$!
  sleep "$delay"
  victim=$(descendants "$pid" | xargs -r ps -o pid=,comm= -p | awk '$2 == "ztok" { print $1 }' | shuf -n 1) || true
  [ -z "$victim" ] || kill -9 "$victim" 2>/dev/null || true
  wait "$pid" || true
done
on_ranks 3 "$ztok" --out external "${args[@]}" >/dev/null 2>&1 || fail "rerun after external kills failed"
same_shards single external "random ranks killed, resumed"
echo "ok: random ranks killed at arbitrary moments, resumed: identical shards"

set +e; "$ztok" --out killed-2 "${args[@]}" >"$work/single.log" 2>&1; rc=$?; set -e
[ $rc -eq 0 ] && grep -q 'nothing to do' "$work/single.log" || fail "a complete 3-rank output should be a no-op for plain ztok"
echo "ok: complete output is a no-op for any number of ranks"
