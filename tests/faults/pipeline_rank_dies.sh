#!/usr/bin/env bash
# A pipeline (parallel.pp=4) whose stage 1 stops before its forward passes of step 3: its neighbours wait
# in their transfers (recorded in the p2p group), the watchdog ends every rank within its bound, and the
# hang report names rank 1 as the one in no transfer, with each waiting stage and the transfer it waits in.
# A stage SIGKILLed after step 3 of the interleaved schedule (pp=4 x vpp=2) ends the job within seconds,
# its rank named.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/faults_lib.sh"
T=3
pp=(--model.n_layer=4 --parallel.pp=4 --train.global_batch=8 --train.micro_batch=2)
run_fault hang 4 "debug.hang_phase=forward: .* on purpose" "" -- --dist.timeout_s=$T --ckpt.dir="$ZT_WORK/hang.ckpt" \
  "${pp[@]}" --debug.rank=1 --debug.hang_at_step=3 --debug.hang_phase=forward --debug.hang_mode=sleep
expect_fault_end hang $T
[ "$rc" -eq 1 ] || { tail -n 20 "$ZT_WORK/hang.err"; fail "exit $rc, expected 1"; }
report=$(grep "hang report: " "$ZT_WORK/hang.err" | head -n 1)
echo "$report"
grep -Eq "hang report: rank 1 on node $(hostname) \(pid [0-9]+\) is in no transfer or collective" <<<"$report" ||
  fail "the report does not name rank 1"
grep -Eq "rank 2 on node $(hostname) \(pid [0-9]+\) waited [0-9.]+ s in p2p recv #[0-9]+ \(step 3 pipeline stage 2 forward micro-batch 1/4, from rank 1 of 4" <<<"$report" ||
  fail "the report does not name stage 2 waiting for stage 1"
# Each waiting rank's deadline names its transfer; which of them print before the abort ends the job
# depends on the load (the report above names them all), so any one of them will do.
expect_in "$ZT_WORK/hang.err" "(recv of [0-9]+ f32 from|send of [0-9]+ f32 to) rank [0-9] did not complete within dist.timeout_s=$T s \(step 3 pipeline stage [0-3] (forward|backward)"

run_fault kill 4 "debug.kill_at_step=3" "" -- --ckpt.dir="$ZT_WORK/kill.ckpt" "${pp[@]}" --model.n_layer=8 \
  --parallel.schedule=interleaved --parallel.vpp=2 --debug.rank=2 --debug.kill_at_step=3
expect_fault_end kill 10
expect_in "$ZT_WORK/kill.err" "rank 2: warning: debug.kill_at_step=3"
echo "PASS"
