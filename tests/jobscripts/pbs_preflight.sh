#!/usr/bin/env bash
# The PBS job script's opt-in preflight (ZT_PREFLIGHT=1) under the environment PBS gives a job, with
# fake qsub, qstat and pbsnodes on PATH that record their arguments, and the real mpirun: one rank
# slowed (TEST ONLY debug.slow_rank_factor via ZT_PREFLIGHT_ARGS) gets its host flagged; with
# ZT_PBS_OFFLINE=1 the script marks it offline (pbsnodes -o), without it the log asks an operator
# to; either way no successor is submitted, training never starts, and the job exits 1.
source "$(dirname "$0")/../lib.sh"
w=$ZT_WORK
mkdir -p "$w/fakebin" "$w/work"
cd "$w/work" || fail "cd"
for tool in qsub pbsnodes; do
  cat >"$w/fakebin/$tool" <<EOF
#!/bin/bash
printf '%s\t' "\$@" >>"$w/$tool.calls"; echo >>"$w/$tool.calls"
EOF
done
cat >"$w/fakebin/qstat" <<'EOF'
#!/bin/bash
printf 'Job Id: %s\n    Resource_List.walltime = 00:30:00\n    resources_used.walltime = 00:01:00\n' "$2"
EOF
chmod +x "$w/fakebin"/*
printf 'localhost\nlocalhost\n' >"$w/nodefile"
host=$(hostname -s)
make_tiny_data 20000
model=()
for a in "${TINY_MODEL[@]}"; do [[ $a == --train.threads=* ]] || model+=("$a"); done
slow="--preflight.max_mb=1 --preflight.gemm_n=512 --preflight.iters=3 --preflight.min_fraction=0.3 --debug.slow_rank_factor=30 --debug.rank=1"

pbs_job() {  # pbs_job JOBID VAR=VALUE...: train-cpu.pbs as PBS would start it
  local id=$1; shift
  (cd "$HOME" && env PATH="$w/fakebin:$PATH" PBS_ENVIRONMENT=PBS_BATCH PBS_JOBID="$id" PBS_JOBNAME=ztest \
    PBS_O_WORKDIR="$w/work" PBS_NODEFILE="$w/nodefile" PBS_O_QUEUE=workq NCPUS=2 ZT_ROOT="$ZT_SOURCE" \
    ZT_BIN="$ZT_BIN" ZT_CONFIG= "ZT_DATA=$w/data/train_*.h5" "ZT_ARGS=${model[*]} --train.max_steps=5" \
    ZT_PREFLIGHT=1 "ZT_PREFLIGHT_ARGS=$slow" "$@" bash "$ZT_SOURCE/jobscripts/pbs/train-cpu.pbs" >"$w/job.out" 2>&1)
}

pbs_job 3000.pbs0 ZT_PBS_OFFLINE=1
rc=$?
log=ztest.3000.log
[ "$rc" -eq 1 ] || { tail -n 30 "$log"; fail "flagged node with ZT_PBS_OFFLINE=1: exit $rc, expected 1"; }
expect_in "$log" "job: preflight: mpirun -np 2 .* --preflight --preflight.out=runs/ztest/preflight-3000.json" "the preflight launch"
expect_in "$log" "^preflight: FLAGGED rank 1 \(host ${host}[^)]*\)" "rank 1 named"
expect_in "$log" "job: preflight: marked $host offline \(pbsnodes -o\)" "the offline message"
[ "$(cat "$w/pbsnodes.calls")" = "$(printf -- '-o\t-C\tztrain preflight, job 3000.pbs0: see %s\t%s\t' "$w/work/runs/ztest/preflight-3000.json" "$host")" ] ||
  fail "pbsnodes was called as: $(cat "$w/pbsnodes.calls")"
expect_in "$log" "job: preflight flagged $host .*: no successor" "no successor"
[ ! -e "$w/qsub.calls" ] || fail "a successor was submitted: $(cat "$w/qsub.calls")"
[ ! -e runs/ztest/metrics.jsonl ] || fail "training started although the preflight flagged $host"
echo "ok: ZT_PBS_OFFLINE=1: $host marked offline with pbsnodes -o, no successor, exit 1"

rm -f "$w/pbsnodes.calls"
pbs_job 3001.pbs0
rc=$?
log=ztest.3001.log
[ "$rc" -eq 1 ] || { tail -n 30 "$log"; fail "flagged node without ZT_PBS_OFFLINE: exit $rc, expected 1"; }
expect_in "$log" "job: preflight: $host is flagged; ask an operator to run: pbsnodes -o -C 'ztrain preflight' $host" "the operator hint"
[ ! -e "$w/pbsnodes.calls" ] || fail "pbsnodes was called without ZT_PBS_OFFLINE=1"
[ ! -e "$w/qsub.calls" ] || fail "a successor was submitted"
echo "ok: without ZT_PBS_OFFLINE: the log names the pbsnodes command, no successor, exit 1"
echo "PASS"
