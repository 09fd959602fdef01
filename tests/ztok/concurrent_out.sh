#!/usr/bin/env bash
# Two ztok runs on one --out at once (a double submit, a requeue while the first still runs): the
# second is refused before it writes anything (exit 2, naming the holder's host and pid), whatever its
# format or rank count, and the first's output is what a straight run gives. The lock goes with its
# process: after a SIGKILL the same command resumes.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$work"
make_corpus in 6 4000
args=(--vocab "$vocab" --split paragraph --shard-tokens 15000 --threads 1 -q --debug-chunk-bytes 20000 "in/*.txt")
"$ztok" --out straight "${args[@]}" >/dev/null

# start_stopped OUT: a run that stops itself (SIGSTOP) after 3 chunks, holding its lock; its pid in $pid.
start_stopped() {
  "$ztok" --out "$1" --debug-kill-after-chunks 3 --debug-kill-signal 19 "${args[@]}" >"$work/first.log" 2>&1 &
  pid=$!
  local i
  for i in $(seq 1 600); do
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = T ] && return
    sleep 0.1
  done
  fail "the first run did not stop itself: $(cat "$work/first.log")"
}

# refused WHAT PID CMD...: CMD exits 2 naming pid PID and this host as the lock's holder.
refused() {
  local what=$1 pid=$2 rc; shift 2
  set +e
  "$@" >"$work/second.log" 2>&1
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2: $(cat "$work/second.log")"
  grep -q "is being written by another process (host $(hostname), pid $pid, since" "$work/second.log" ||
    fail "$what: the refusal does not name the holder: $(cat "$work/second.log")"
  grep -q "give this run another directory" "$work/second.log" || fail "$what: no fix named: $(cat "$work/second.log")"
  echo "ok: $what refused: $(grep -o 'is being written.*pid [0-9]*' "$work/second.log")"
}

start_stopped same
before=$(cd same && find . -type f -exec md5sum {} + | sort)
refused "the same command again" "$pid" "$ztok" --out same "${args[@]}"
printf '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n' >chat.jsonl
refused "an instruct run" "$pid" "$ztok" --out same --vocab "$vocab" --format instruct --chat-template chatml \
  --special '<|im_start|>=50257' --special '<|im_end|>=50258' -q chat.jsonl
if command -v "${MPIEXEC:-mpirun}" >/dev/null; then
  refused "mpirun -np 2 of the same command" "$pid" on_ranks 2 "$ztok" --out same "${args[@]}"
fi

after=$(cd same && find . -type f -exec md5sum {} + | sort)
[ "$before" = "$after" ] || fail "the refused runs changed the first's files"
kill -CONT "$pid"
wait "$pid" || fail "the first run failed after the refusals: $(cat "$work/first.log")"
same_shards straight same "the first run, after the refusals"
echo "ok: the first run's shards are a straight run's"

# A holder killed outright leaves no lock behind: the same command resumes at once.
start_stopped killed
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
"$ztok" --out killed "${args[@]}" >"$work/resume.log" 2>&1 || fail "rerun after a SIGKILL: $(cat "$work/resume.log")"
same_shards straight killed "resumed after the lock holder was killed"
echo "ok: a killed holder's lock is gone; the rerun resumed to the same shards"
