#!/usr/bin/env bash
# ztok's progress deadline: 3 ranks, --timeout-s=3. One rank SIGSTOPped (while it tokenizes, or while
# it waits for the others) ends the job (exit 1) within the timeout + a margin, the message naming it
# and what it was doing, and Open MPI kills the stopped rank too. A run whose waiting ranks wait
# longer than the timeout for a rank that progresses succeeds: progress counts, not time.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../ztok/common.sh"
timeout_s=3
margin_s=12  # the heartbeat's last beat (<1 s), MPI_Abort's tear-down, a loaded 2-core machine

# One big input (tokenized by rank 1: its middle byte is in rank 1's share) and two tiny ones (rank 2;
# rank 0 gets none), in 64-byte chunks so rank 1 takes several seconds while ranks 0 and 2 wait.
mkdir -p "$work/in"
awk 'BEGIN { srand(7); for (i = 0; i < 20000; i++) { l = ""; for (k = 0; k < 12; k++) l = l sprintf("w%x ", int(rand() * 1e6)); print l } }' >"$work/seed.txt"
for i in $(seq 20); do cat "$work/seed.txt"; done >"$work/in/a_big.txt"  # > timeout + 1 s even on an idle machine
echo "tiny one" >"$work/in/b.txt"
echo "tiny two" >"$work/in/c.txt"
args=(--vocab "$vocab" --threads 1 -q --debug-chunk-bytes 64 --timeout-s "$timeout_s" "$work/in/*.txt")

# rank_pid LAUNCHER_PID RANK: that rank's pid among the launcher's children (from its environment).
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=$2" >/dev/null && { echo "$p"; return; }
  done
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# 1. A normal run: the waiting ranks wait longer than --timeout-s, and it succeeds.
t0=$(now)
on_ranks 3 "$ztok" --out "$work/ok" "${args[@]}" >"$work/ok.log" 2>&1 || { cat "$work/ok.log"; fail "the normal run failed"; }
secs=$(elapsed "$t0")
awk -v s="$secs" -v t="$timeout_s" 'BEGIN { exit !(s > t + 1) }' ||
  fail "the normal run took ${secs} s, not over --timeout-s=$timeout_s + 1 s: the corpus is too small to show that waiting longer than the timeout is fine"
"$ztok" --out "$work/single" "${args[@]}" >/dev/null 2>&1 || fail "the one-process run failed"
same_shards "$work/single" "$work/ok" "the normal 3-rank run"
echo "ok: a 3-rank run of ${secs} s with --timeout-s=$timeout_s succeeds (ranks 0 and 2 wait for rank 1 most of it)"

# stop_rank RANK DOING: starts the job, SIGSTOPs RANK once its heartbeat file says DOING, and checks
# that the job ends with exit 1 in time, naming RANK and DOING, and that the stopped rank is gone.
stop_rank() {
  local rank=$1 doing=$2 out="$work/stop$1" launcher victim rc=0 t0 secs
  timeout --kill-after=10 120 "${MPIEXEC:-mpirun}" --oversubscribe -np 3 "$ztok" --out "$out" "${args[@]}" \
    >"$out.log" 2>&1 &
  launcher=$!
  for _ in $(seq 600); do
    grep -qs "$doing" "$out/.ztok/alive.$rank" && break
    kill -0 "$launcher" 2>/dev/null || { cat "$out.log"; fail "the job ended before rank $rank was $doing"; }
    sleep 0.05
  done
  sleep 0.5
  victim=$(rank_pid "$(pgrep -P "$launcher" | head -n 1)" "$rank")  # the launcher's child is mpirun
  [ -n "$victim" ] || { kill -9 "$launcher"; fail "found no process of rank $rank"; }
  kill -STOP "$victim"
  t0=$(now)
  wait "$launcher" || rc=$?
  secs=$(elapsed "$t0")
  for _ in $(seq 100); do kill -0 "$victim" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$victim" 2>/dev/null; then kill -9 "$victim"; fail "the stopped rank $rank (pid $victim) outlived the job"; fi
  [ "$rc" = 1 ] || { cat "$out.log"; fail "rank $rank stopped: exit $rc, expected 1 (124: the job hung)"; }
  grep -Eq "rank [0-2]: ztok: no heartbeat .* from rank $rank \\($doing[^)]*\\) for [0-9.]+ s, over --timeout-s=3" \
    "$out.log" || { cat "$out.log"; fail "the message should name rank $rank, what it was doing and for how long"; }
  awk -v s="$secs" -v t="$timeout_s" -v m="$margin_s" 'BEGIN { exit !(s <= t + m) }' ||
    fail "rank $rank stopped: the job took ${secs} s to end, over --timeout-s=$timeout_s + ${margin_s} s"
  echo "ok: rank $rank stopped while $doing ends the job (exit 1) ${secs} s later: $(grep -m1 'no heartbeat' "$out.log")"
}

stop_rank 1 tokenizing                   # found by the waiting ranks 0 and 2
stop_rank 0 "done tokenizing, waiting"   # a waiter stopped: found by rank 2, which waits too
