#!/usr/bin/env bash
# Under parallel.tp the TP and DP groups' collectives are recorded too (dist/recording_communicator.hpp):
# rank 1 of a tp=2 x dp=2 job stuck before a forward pass is named by the hang report, with the TP
# all-reduce it never entered and rank 0 (its TP peer) waiting in it, and the job ends within the
# watchdog's bound; the other TP group's ranks are not compared with it (their collectives are of other
# communicators). (Before, the report found no rank in a recorded collective.)
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/faults_lib.sh"
T=3
run_fault tp 4 "debug.hang_phase=forward: .* on purpose" "" -- --dist.timeout_s=$T --ckpt.dir="$ZT_WORK/tp.ckpt" \
  --parallel.tp=2 --debug.rank=1 --debug.hang_at_step=3 --debug.hang_phase=forward --debug.hang_mode=sleep
expect_fault_end tp $T
[ "$rc" -eq 1 ] || { tail -n 20 "$ZT_WORK/tp.err"; fail "exit $rc, expected 1"; }
report=$(grep "hang report: " "$ZT_WORK/tp.err" | head -n 1)
echo "$report"
grep -Eq "hang report: rank 1 on node $(hostname) \(pid [0-9]+\) never entered all_reduce #[0-9]+ \(step 3 micro-batch 1/2, call 1; [0-9]+ B\)" <<<"$report" ||
  fail "the report does not name rank 1 and the TP all-reduce"
grep -Eq "1 rank \(0\) waited [0-9.]+ s in (it|all_reduce)" <<<"$report" || fail "the report does not name rank 0 waiting"
# Ranks 2 and 3 are the other TP group: their collective #n is another communicator's, never compared
# with rank 0's (they were said to have "left" it).
! grep -Eq "hang report: rank [23] .*(left|never entered|disagree)" "$ZT_WORK/tp.err" ||
  fail "the report blames a rank of the other TP group: $(grep -E "hang report: rank [23]" "$ZT_WORK/tp.err")"
echo "PASS"
