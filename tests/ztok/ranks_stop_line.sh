#!/usr/bin/env bash
# A stop under mpirun says what it leaves (outside sweep 39 F6). mpirun sends every rank SIGTERM, then
# SIGKILL to all as soon as one of them ends; rank 0, which writes the line, runs its handler only when
# it is back from a long disk write (here: stopped). So the other ranks must not end first: rank 1 is
# still there half a second after its SIGTERM (it ends a second after it), and rank 0's line comes out
# once it runs; the output stays unfinished.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$work"
make_corpus in 4 3000
# Rank 0 stops itself (SIGSTOP) after 3 chunks: past the start-up, every rank's stop handler in place.
on_ranks 2 "$ztok" --out out --vocab "$vocab" --split file --threads 1 -q --debug-chunk-bytes 20000 \
  --debug-kill-after-chunks 3 --debug-kill-rank 0 --debug-kill-signal 19 "in/*.txt" >"$work/run.log" 2>&1 &
job=$!
rank_pid() {  # RANK: the pid of this test's ztok of that rank (other tests' ztoks may run meanwhile)
  local p
  for p in $(pgrep -x ztok); do
    [ "$(readlink "/proc/$p/cwd")" = "$work" ] && tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
      grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return 0; }
  done
  return 0  # none (yet)
}
state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo gone; }
r0=
for _ in $(seq 600); do
  r0=$(rank_pid 0)
  [ -n "$r0" ] && [ "$(state "$r0")" = T ] && break
  kill -0 $job 2>/dev/null || fail "the run ended before rank 0 stopped: $(cat "$work/run.log")"
  sleep 0.1
done
[ "$(state "$r0")" = T ] || fail "rank 0 did not stop itself"
r1=$(rank_pid 1)
[ -n "$r1" ] || fail "no rank 1"
kill -TERM "$r1" "$r0"  # as mpirun does; rank 0's waits while it is stopped
sleep 0.5
s1=$(state "$r1")
if [ "$s1" = gone ] || [ "$s1" = Z ]; then
  kill -CONT "$r0"
  fail "rank 1 ended at once on SIGTERM (mpirun would SIGKILL rank 0 before its line)"
fi
kill -CONT "$r0"
set +e
wait $job
rc=$?
set -e
[ $rc -ne 0 ] || fail "a stopped run exited 0"
[ "$(grep -c "stopped by a signal: out is unfinished (ztrain refuses it); run the same command again" "$work/run.log")" -eq 1 ] ||
  fail "rank 0's line, once: $(cat "$work/run.log")"
grep -q '"complete": false' out/ztok-progress.json || fail "the output is not marked unfinished"
echo "ok: rank 1 outlived its SIGTERM, rank 0 said what the stop left"
echo "PASS"
