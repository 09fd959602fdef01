#!/usr/bin/env bash
# Hang diagnosis on 4 CPU ranks (dist.timeout_s=3): when the watchdog fires, the ranks compare their
# last collectives through ckpt.dir/diag/ and the job prints one report naming the cause, then ends
# (exit 1) within dist.timeout_s + 7 s of the fault. Checked: a rank hanging (sleep) in a step's
# forward pass at ZeRO-0, in its optimizer at ZeRO-1, in its checkpoint's commit and while resuming
# is named as never entering the collective the others waited in (kind, number, step context,
# bytes); a rank stopped by SIGSTOP is named as sending no notes; a rank that leaves out the step
# boundary's all-reduce (TEST ONLY debug.skip_collective_at_step) is named as having skipped it and
# gone on to a collective no other rank entered; the abort line names the phase the report names the
# collective by; diag/ holds every rank's ring and the summary, which the next job moves to diag.previous/.
# The optimizer and commit cases run under ZT_TEST_FULL=1 only (CI: watchdog_step_phases.sh stops a rank
# in the optimizer, watchdog_checkpoint_phases.sh in the commit; the commit report's form "ranks 2, 3 gave
# rank 0 their part" is unit-tested in tests/unit/health/test_hang_report.cpp).
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/faults_lib.sh"
T=3
host=$(hostname)

# case NAME FAULT_REGEX ztrain-args...: runs the job in its own ckpt.dir; checks the bound and diag/.
case_run() {
  local name=$1 pattern=$2; shift 2
  run_fault "$name" 4 "$pattern" "" -- --dist.timeout_s=$T --ckpt.dir="$ZT_WORK/$name.ckpt" "$@"
  expect_fault_end "$name" "${BOUND:-$T}"  # within T + 7 s
  [ "$rc" -eq 1 ] || { tail -n 20 "$ZT_WORK/$name.err"; fail "$name: exit $rc, expected 1"; }
  local diag="$ZT_WORK/$name.ckpt/diag"
  [ -s "$diag/summary.txt" ] || fail "$name: no $diag/summary.txt"
  [ "$(grep -c "hang report: every rank's last collectives" "$ZT_WORK/$name.err")" -eq 1 ] ||
    fail "$name: expected exactly one hang report"
  report=$(grep "hang report: " "$ZT_WORK/$name.err")
  echo "$report"
}

# answered NAME RANKS...: these ranks' notes answer the incident of the summary, with a ring.
answered() {
  local name=$1; shift
  local diag="$ZT_WORK/$name.ckpt/diag" incident r
  incident=$(head -n 1 "$diag/summary.txt" | sed 's/^incident //')
  for r in "$@"; do
    grep -qxF "incident $incident" "$diag/rank-$r.txt" || fail "$name: rank $r's notes do not answer '$incident'"
    awk '$1 == "records" { n = $2 } END { exit !(n > 10) }' "$diag/rank-$r.txt" || fail "$name: rank $r's ring is (nearly) empty"
  done
}

hang() {  # hang NAME STAGE PHASE MODE [ztrain-args...]
  local name=$1 stage=$2 phase=$3 mode=$4; shift 4
  case_run "$name" "debug.hang_phase=$phase: .* on purpose" --train.zero_stage="$stage" --debug.rank=1 \
    --debug.hang_at_step=3 --debug.hang_phase="$phase" --debug.hang_mode="$mode" "$@"
}

hang forward 0 forward sleep
grep -Eq "hang report: rank 1 on node $host \(pid [0-9]+\) never entered all_reduce #[0-9]+ \(step 3 micro-batch 1/1, call 1; [0-9]+ B\); 3 ranks \(0, 2, 3\) waited [0-9.]+ s in" <<<"$report" ||
  fail "forward: the report does not name rank 1 and the all-reduce"
answered forward 0 1 2 3
# The abort line names the phase the report names the collective by (where it was issued), also when the
# ranks waited for it in a later phase.
ctx=$(sed -nE 's/.*never entered [a-z_]+ #[0-9]+ \(([^,]+), call 1;.*/\1/p' <<<"$report" | head -n 1)
grep -F "did not complete within dist.timeout_s=$T s (" "$ZT_WORK/forward.err" | grep -F -e "($ctx" -e "issued in $ctx)" >/dev/null ||
  { grep "did not complete" "$ZT_WORK/forward.err"; fail "forward: the abort line does not name '$ctx', the report's phase"; }
waited=$(sed -nE 's/.*3 ranks \(0, 2, 3\) waited ([0-9.]+) s in it.*/\1/p' <<<"$report" | head -n 1)
awk -v w="$waited" -v t=$T 'BEGIN { exit !(w >= t && w < t + 1.5) }' || fail "forward: the ranks waited '$waited' s, expected about $T"

# The next job of that ckpt.dir (a requeue) keeps the report aside in diag.previous/; diag/ starts clean.
expect_exit 0 zt_mpirun 4 "$ZT_BIN/ztrain" "${FAULT_ARGS[@]}" --ckpt.dir="$ZT_WORK/forward.ckpt" --train.max_steps=1
[ -s "$ZT_WORK/forward.ckpt/diag.previous/summary.txt" ] && [ ! -e "$ZT_WORK/forward.ckpt/diag" ] ||
  fail "the next job did not move diag/ to diag.previous/: $(ls "$ZT_WORK/forward.ckpt")"

# Resuming from that job's checkpoint (step 1), rank 1 hangs while loading: named at the world's barrier.
# Loading is start-up, whose deadline is 10 x dist.timeout_s (dist/deadline.hpp): dist.timeout_s=1 here.
cp -r "$ZT_WORK/forward.ckpt" "$ZT_WORK/resume.ckpt"
T=1 BOUND=10 case_run resume "debug.hang_phase=resume: .* on purpose" --debug.rank=1 --debug.hang_at_step=1 --debug.hang_phase=resume
grep -Eq "hang report: rank 1 on node $host \(pid [0-9]+\) never entered world barrier #[0-9]+ \(resume from .*step_00000001 \(every rank loaded\), call 1; 0 B\); 3 ranks \(0, 2, 3\) waited [0-9.]+ s in it" <<<"$report" ||
  fail "resume: the report does not name rank 1 and the resume's barrier"

if full_cases; then
  hang optimizer 1 optimizer sleep
  grep -Eq "hang report: rank 1 on node $host \(pid [0-9]+\) never entered all_gather #[0-9]+ \(step 3 optimizer, call 1; [0-9]+ B\); 3 ranks \(0, 2, 3\) waited" <<<"$report" ||
    fail "optimizer: the report does not name rank 1 and the all-gather"
  answered optimizer 0 1 2 3
fi

if full_cases; then
  # At the world's agreements rank 0 collects: ranks 2 and 3 gave it their part and wait in the next one.
  hang commit 0 ckpt_commit sleep --ckpt.every=3
  grep -Eq "hang report: rank 1 on node $host \(pid [0-9]+\) never entered world gather #[0-9]+ \(step 3 checkpoint commit \(file records\), call 1; [0-9]+ B\); 1 rank \(0\) waited [0-9.]+ s in it; ranks 2, 3 gave rank 0 their part" <<<"$report" ||
    fail "commit: the report does not name rank 1 and the commit's gather"
  answered commit 0 1 2 3
fi

hang stopped 0 backward sigstop
grep -Eq "hang report: rank 1 on node $host \(pid [0-9]+\) sent no notes within [0-9.]+ s: it is stopped \(SIGSTOP\), dead" <<<"$report" ||
  fail "stopped: the report does not name rank 1 as sending no notes"
answered stopped 0 2 3

case_run skipped "debug.skip_collective_at_step=4: leaving out" --ckpt.every=4 --debug.rank=2 --debug.skip_collective_at_step=4
grep -Eq "hang report: rank 2 on node $host \(pid [0-9]+\) skipped all_reduce #[0-9]+ \(step 5 start [^;]*; 24 B\): it went on to world agreement #[0-9]+ \(step 4 checkpoint start" <<<"$report" ||
  fail "skipped: the report does not name rank 2's skipped all-reduce"
answered skipped 0 1 2 3

# A skip at a step that saves no checkpoint would be a mismatched collective, not a hang: refused.
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${FAULT_ARGS[@]}" --debug.skip_collective_at_step=3
expect_in "$ZT_WORK/err" "debug.skip_collective_at_step=3 is not a step that saves a checkpoint"
echo "PASS"
