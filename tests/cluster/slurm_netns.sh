#!/usr/bin/env bash
# Slurm across nodes: a cluster of 2 network-namespace nodes (tools/cluster/netns.sh) with one slurmd on
# each (slurm_local.sh's slurm_start_nodes: slurmctld on node0, NodeName=nodeI at the node's address) runs
# train-cpu.sbatch on 2 nodes x 1 rank: mpirun starts the second rank through Slurm (srun launches its
# orted on node1), so the ranks talk TCP through the veth links. USR1 mid-run: the job checkpoints, exits
# 75, requeues itself, resumes on 2 nodes and ends with the losses of an uninterrupted 2-rank run on one
# host, bit for bit (a 2-rank sum has one order). The log places rank 0 on node0 and rank 1 on node1.
# Skips (77), saying why, where namespaces or Slurm cannot start (not root, packages missing).
# shellcheck disable=SC2154  # job, log, signal_step, state, train_args, data: set by slurm_local.sh's helpers
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/netns_lib.sh"
source "$here/slurm_local.sh"
jobs_dir=$ZT_SOURCE/jobscripts/slurm
t0=$SECONDS
phase() { echo "== [$((SECONDS - t0)) s] $*"; }
cluster_up 2
on_exit() {
  local rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || slurm_show_logs
  slurm_stop
  cluster_down
  rm -rf "$ZT_WORK"
}
trap on_exit EXIT
chmod 711 "$ZT_WORK"  # munged (user munge) reaches its socket below it
slurm_start_nodes "$ZT_WORK/slurm" 2 || skip "Slurm could not start across the namespace nodes (see above)"
cd "$ZT_WORK" || fail "cd $ZT_WORK"
export ZT_ROOT=$ZT_SOURCE ZT_BIN
[ "$(sinfo -h -N -o '%N %t' | sort | paste -sd ' ')" = "node0 idle node1 idle" ] ||
  fail "sinfo: $(sinfo -N 2>&1 | paste -sd ' '), expected node0 and node1 idle"

make_tiny_data 40000
# As slurm_requeue.sh: long enough that USR1, sent past step $signal_at, arrives before the end.
steps=3000 signal_at=200
slurm_reference_run "$steps"

phase "train-cpu.sbatch on 2 nodes x 1 rank (mpirun through Slurm); USR1 once it is past step $signal_at"
ZT_CONFIG='' ZT_DATA=$data ZT_RUN_DIR=run slurm_requeue_by_usr1 run/metrics.jsonl "$signal_at" --nodes=2 \
  --ntasks-per-node=1 --cpus-per-task=1 --time=10 "$jobs_dir/train-cpu.sbatch" "${train_args[@]}"
expect_in "$log" "^# rank 0: host=node0 " "rank 0 on node0"
expect_in "$log" "^# rank 1: host=node1 " "rank 1 on node1"
expect_in "$log" "checkpointed \(exit 75\): requeueing job $job" "exit 75 and the requeue"
expect_in "$log" "start 2 \(requeues so far: 1\)" "the requeued start"
grep -q '"event": *"resume"' run/metrics.jsonl || fail "no resume event in run/metrics.jsonl"
loss_column run/metrics.jsonl >run.loss
[ "$(wc -l <run.loss)" -eq "$steps" ] || fail "run has $(wc -l <run.loss) step losses, expected $steps"
cmp -s ref.loss run.loss || fail "the requeued 2-node run's step losses are not bit-identical to the 2-rank run's on one host"
echo "ok: 2 nodes, requeued once, all $steps step losses bit-identical to one host's"
phase "PASS"
