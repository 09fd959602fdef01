#!/usr/bin/env bash
# The Slurm job script's opt-in preflight (ZT_PREFLIGHT=1) on a real single-node Slurm that this test
# starts and stops itself (slurm_local.sh):
#  1. nothing flagged: the preflight's table is in the job's log, then training runs and finishes;
#  2. one rank slowed (TEST ONLY debug.slow_rank_factor via ZT_PREFLIGHT_ARGS): the job names that
#     rank's node, writes the JSON summary, and resubmits itself with sbatch --exclude=<that node>.
#     With one node, Slurm refuses the resubmitted job ("Requested node configuration is not
#     available") and records it with ExcNodeList=<node>: the exclusion reached Slurm. That the new
#     job then runs elsewhere and resumes needs a second node, which this test does not have.
# Skips (77), saying why, where Slurm cannot start (not root, packages missing).
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/slurm_local.sh"
# CI's time goes to Slurm's requeue (cluster.slurm_job_requeues_and_resumes_to_same_loss); the preflight's
# flag-and-exclude logic runs in CI under PBS (jobscripts.pbs_preflight_flags_and_offlines_node).
full_cases || skip "runs under ZT_TEST_FULL=1 (tools/bench/full_suite.sh); CI checks the preflight under PBS"
jobs_dir=$ZT_SOURCE/jobscripts/slurm
trap 'kill "$watchdog" 2>/dev/null; slurm_stop; rm -rf "$ZT_WORK"' EXIT
trap 'echo "FAIL: stopped by a signal or the 150 s watchdog"; exit 1' TERM INT
# shellcheck disable=SC2016  # expanded in the subshell
(sleep 150 & s=$!; trap 'kill $s; exit 0' TERM; wait $s && kill -TERM $$) &
watchdog=$!
chmod 711 "$ZT_WORK"  # munged (user munge) reaches its socket below it
slurm_start "$ZT_WORK/slurm" || skip "a local Slurm could not start (see above)"
cd "$ZT_WORK" || fail "cd $ZT_WORK"
export ZT_ROOT=$ZT_SOURCE ZT_BIN
node=$(hostname -s)
make_tiny_data 20000
train_args=("${TINY_MODEL[@]}" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=5)
small=(--preflight.max_mb=1 --preflight.gemm_n=512 --preflight.iters=3)

echo "== 1. ZT_PREFLIGHT=1, nothing flagged: preflight, then training"
job=$(ZT_PREFLIGHT=1 ZT_PREFLIGHT_ARGS="${small[*]} --preflight.min_fraction=0.05" ZT_CONFIG='' \
  ZT_DATA="$ZT_WORK/data/train_*.h5" ZT_RUN_DIR=ok slurm_sbatch_wait 100 --nodes=1 \
  --ntasks-per-node=2 --cpus-per-task=1 --time=5 "$jobs_dir/train-cpu.sbatch" "${train_args[@]}")
rc=$?
log=ztrain-cpu-${job%%;*}.log
[ "$rc" -eq 0 ] || { show_log "$log"; fail "the preflight-then-train job failed: $(slurm_job_field "${job%%;*}" JobState), exit $(slurm_job_field "${job%%;*}" ExitCode)"; }
expect_in "$log" "job: preflight: mpirun -np 2 .*--preflight --preflight.out=ok/preflight-${job%%;*}.json" "the preflight launch"
expect_in "$log" "^all_reduce +[0-9]+ " "the preflight table in the job log"
expect_in "$log" "job: preflight: nothing flagged" "preflight passed"
expect_in "$log" "ztrain finished \(exit 0\)" "training ran after the preflight"
[ -s "ok/preflight-${job%%;*}.json" ] || fail "no JSON summary ok/preflight-${job%%;*}.json"
echo "ok: job ${job%%;*} ran the preflight, then trained to the end"

echo "== 2. rank 1 slowed 30x: its node flagged, the job resubmits itself with --exclude=$node"
job=$(ZT_PREFLIGHT=1 ZT_CONFIG='' ZT_DATA="$ZT_WORK/data/train_*.h5" ZT_RUN_DIR=slow \
  ZT_PREFLIGHT_ARGS="${small[*]} --preflight.min_fraction=0.3 --debug.slow_rank_factor=30 --debug.rank=1" \
  slurm_sbatch_wait 100 --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=5 \
  "$jobs_dir/train-cpu.sbatch" "${train_args[@]}")
rc=$?
job=${job%%;*}
log=ztrain-cpu-$job.log
[ "$(slurm_job_field "$job" ExitCode)" = 1:0 ] || { show_log "$log"; fail "job $job: exit $(slurm_job_field "$job" ExitCode), expected 1:0 (state $(slurm_job_field "$job" JobState), wait: $rc)"; }
expect_in "$log" "^preflight: FLAGGED rank 1 \(host ${node}[^)]*\): fp32 GEMM" "rank 1 named in the log"
expect_in "$log" "^preflight: nodes to exclude: $node" "the node to exclude"
grep -q "\"flagged_nodes\": \[\"$node" "slow/preflight-$job.json" || fail "slow/preflight-$job.json does not flag $node"
expect_in "$log" "job: preflight flagged node\(s\) $node: resubmitting without them: sbatch --parsable --exclude=$node --job-name=ztrain-cpu --nodes=1 --ntasks=2 --time=00:05:00 --ntasks-per-node=2 --cpus-per-task=1 --partition=zt .*/train-cpu.sbatch --model" "the sbatch --exclude line"
expect_in "$log" "Requested node configuration is not available" "Slurm refused the only node excluded"
expect_in "$log" "job: sbatch failed: resubmit by hand with --exclude=$node" "the fallback message"
grep -q "metrics" <(ls slow 2>/dev/null) && fail "training started although the preflight flagged the node"
refused=$(scontrol show job 2>/dev/null | grep -B 30 "ExcNodeList=$node" | grep -o "JobId=[0-9]*" | tail -n 1)
[ -n "$refused" ] || fail "Slurm has no job record with ExcNodeList=$node"
echo "ok: job $job flagged $node and resubmitted with --exclude=$node; Slurm recorded $refused with ExcNodeList=$node (refused: no other node)"
echo "PASS"
