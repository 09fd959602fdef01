#!/usr/bin/env bash
# The PBS job scripts under the environment PBS gives a job (PBS_NODEFILE with one line per rank,
# PBS_O_WORKDIR, PBS_JOBID, PBS_JOBNAME, PBS_O_QUEUE, NCPUS) with a fake qsub and qstat on PATH that
# record their arguments, and mpirun wrapped to record its launch line (and, for the chain cases, to
# exit with a given code instead of training):
#  - a real 2-rank run: the launch line (hostfile, -np from PBS_NODEFILE, threads from NCPUS), the log
#    header (revision, resolved config, time limit from qstat's walltime), exit 0, no successor;
#    CUDA_VISIBLE_DEVICES is not forwarded with -x (PBS sets it per host);
#  - exit 75 after training steps submits the successor with depend=afterany:PBS_JOBID, the same name,
#    queue, account, project and resources (-l select/walltime/place from qstat -f, wrapped lines
#    joined) and every ZT_* setting; not when ZT_MAX_CHAIN is reached, the STOP file exists, or ztrain
#    failed;
#  - the whole chain, where ztrain stops itself at train.time_limit_min: each job's successor started
#    as PBS would (its -v settings) resumes, and the last one ends with the uninterrupted run's loss
#    (ZT_TEST_FULL=1 only: in CI the Slurm requeue test and local_restart.sh run such chains);
#  - tokenize.pbs runs ztok on PBS_NODEFILE's 2 ranks, which write one ztok's shards byte for byte.
source "$(dirname "$0")/../lib.sh"
real_mpirun=$(command -v "$MPIEXEC") || fail "no $MPIEXEC"
w=$ZT_WORK
mkdir -p "$w/fakebin" "$w/work"
cd "$w/work" || fail "cd"

# ---- fake PBS commands ------------------------------------------------------------------------
cat >"$w/fakebin/qsub" <<EOF
#!/bin/bash
# fake qsub: one line per call (arguments NUL-free, tab-separated) and a new job id
printf '%s\t' "\$@" >>"$w/qsub.calls"; echo >>"$w/qsub.calls"
n=\$(wc -l <"$w/qsub.calls"); echo "\$((1234 + n)).pbs0"
EOF
cat >"$w/fakebin/qstat" <<'EOF'
#!/bin/bash
# fake qstat -f JOBID: the lines train.pbs reads, a long value wrapped as qstat does (a tab starts the
# continuation), and job-wide resources PBS derives from select (ncpus, nodect: never passed on)
[ "$1" = -f ] || exit 1
printf 'Job Id: %s\n    Job_Name = x\n    resources_used.walltime = 00:01:00\n    Account_Name = acct1\n' "$2"
printf '    Resource_List.ncpus = 2\n    Resource_List.nodect = 1\n    Resource_List.place = scatter:excl\n'
printf '    Resource_List.select = 1:ncpus=2:mpiprocs=2:mem=4gb:site_re\n\tsource=abc\n    Resource_List.walltime = 00:30:00\n'
printf '    project = proj1\n    Variable_List = PBS_O_HOME=/root,PBS_O_QUEUE=workq\n'
EOF
cat >"$w/fakebin/mpirun" <<EOF
#!/bin/bash
# mpirun, recorded; ZT_FAKE_RC=N: the training launch (not --print-config) exits N instead of running
printf '%s ' "\$@" >>"$w/mpirun.calls"; echo >>"$w/mpirun.calls"
echo "keepalive=\${OMPI_MCA_oob_tcp_keepalive_time:-} \${OMPI_MCA_oob_tcp_keepalive_intvl:-} \${OMPI_MCA_oob_tcp_keepalive_probes:-}" >"$w/mpirun.env"
case " \$* " in *" --print-config "*) exec "$real_mpirun" "\$@" ;; esac
# ZT_FAKE_RECORD=LINE: appended to the metrics first, as ztrain's exit record (mpirun then reports 1 after a SIGTERM)
[ -z "\${ZT_FAKE_RECORD:-}" ] || echo "\$ZT_FAKE_RECORD" >>"$w/work/runs/ztest/metrics.jsonl"
[ -z "\${ZT_FAKE_RC:-}" ] || exit "\$ZT_FAKE_RC"
exec "$real_mpirun" "\$@"
EOF
chmod +x "$w/fakebin"/*
printf 'localhost\nlocalhost\n' >"$w/nodefile"

# pbs_job JOBID SCRIPT [VAR=VALUE...]: run SCRIPT as PBS would start job JOBID (output: its exit code).
pbs_job() {
  local id=$1 script=$2; shift 2
  (cd "$HOME" && env PATH="$w/fakebin:$PATH" PBS_ENVIRONMENT=PBS_BATCH PBS_JOBID="$id" PBS_JOBNAME=ztest \
    PBS_O_WORKDIR="$w/work" PBS_NODEFILE="$w/nodefile" PBS_O_QUEUE=workq PBS_QUEUE=workq NCPUS=2 \
    ZT_ROOT="$ZT_SOURCE" ZT_BIN="$ZT_BIN" "$@" bash "$script" >"$w/job.out" 2>&1)
}
make_tiny_data 40000
model=()
for a in "${TINY_MODEL[@]}"; do [[ $a == --train.threads=* ]] || model+=("$a"); done  # NCPUS decides
cpu_pbs=$ZT_SOURCE/jobscripts/pbs/train-cpu.pbs
base=(ZT_CONFIG= "ZT_DATA=$w/data/train_*.h5" "ZT_ARGS=${model[*]} --train.max_steps=20")

# ---- a real run to the end ----------------------------------------------------------------------
pbs_job 1234.pbs0 "$cpu_pbs" "${base[@]}" CUDA_VISIBLE_DEVICES=GPU-aaaa-node0
rc=$?
log=$w/work/ztest.1234.log
[ "$rc" -eq 0 ] || { cat "$w/job.out"; tail -n 30 "$log"; fail "real run: exit $rc"; }
expect_in "$w/job.out" "log in $log" "the job's output names its log"
expect_in "$log" "ztrain job 1234.pbs0 \(ztest\), job 1 of the chain" "the header names the job"
expect_in "$log" "nodes: 1 \(localhost\), ranks: 2, work dir: $w/work" "nodes and ranks from PBS_NODEFILE"
expect_in "$log" "binary: .*ztrain .*\(git [^)]+\)" "the binary's git revision"
expect_in "$log" "time: train.time_limit_min=25.00 \(walltime 00:30:00, 29 min left - 4 min margin\)" "the time limit from qstat -f"
expect_in "$log" "^# world_size = 2 " "the resolved configuration"
expect_in "$log" "launch: mpirun -np 2 --hostfile $w/nodefile --map-by slot --bind-to none -x PATH " "the launch line"
expect_in "$log" " --ckpt.dir=runs/ztest/checkpoints --ckpt.resume=auto --log.metrics=runs/ztest/metrics.jsonl --train.time_limit_min=25.00 " "the ztrain options"
expect_in "$log" " --train.threads=1 " "train.threads = NCPUS / ranks per node"
expect_not_in "$log" "launch: .*-x CUDA_VISIBLE_DEVICES" "CUDA_VISIBLE_DEVICES forwarded: PBS sets it per host, -x would give every node the first one's"
expect_in "$log" "ztrain finished \(exit 0\)" "the end"
[ "$(cat "$w/mpirun.env")" = "keepalive=15 2 3" ] || fail "train-cpu.pbs: mpirun's oob keepalive: $(cat "$w/mpirun.env")"
[ "$(grep -c -- '--hostfile' "$w/mpirun.calls")" -eq 2 ] || fail "expected 2 mpirun calls (--print-config, training)"
[ -s runs/ztest/metrics.jsonl ] || fail "no metrics in runs/ztest/"
[ ! -e "$w/qsub.calls" ] || fail "a finished run submitted a successor: $(cat "$w/qsub.calls")"
echo "ok: real run: header, launch line (no -x CUDA_VISIBLE_DEVICES), exit 0, no successor"

# ---- exit 75 -> successor; and when not ---------------------------------------------------------
trained='{"event": "exit", "step": 7, "code": 75, "reason": "train.time_limit_min"}'  # a start that trained steps
pbs_job 2000.pbs0 "$cpu_pbs" "${base[@]}" ZT_FAKE_RC=75 "ZT_FAKE_RECORD=$trained" "ZT_VALID=$w/a,$w/b" \
  ZT_TERM_GRACE_S=8 ZT_PBS_OFFLINE=1 "ZT_PREFLIGHT_ARGS=--preflight.max_mb=1 --x=a'b,c" ZT_SITE_SETTING=42
rc=$?
[ "$rc" -eq 75 ] || { tail -n 20 ztest.2000.log; fail "exit 75 case: script exit $rc"; }
[ "$(wc -l <"$w/qsub.calls")" -eq 1 ] || fail "expected one qsub call, got: $(cat "$w/qsub.calls")"
call=$(cat "$w/qsub.calls")
echo "qsub: $call"
IFS=$'\t' read -r -a q <<<"$call"
[ "${q[0]} ${q[1]}" = "-W depend=afterany:2000.pbs0" ] || fail "qsub does not start with -W depend=afterany:2000.pbs0"
[ "${q[2]} ${q[3]}" = "-N ztest" ] || fail "qsub does not keep the job name"
[ "${q[4]}" = -v ] || fail "qsub passes no -v settings"
[ "${q[6]} ${q[7]}" = "-q workq" ] || fail "qsub does not keep the queue"
[ "${q[-1]}" = "$cpu_pbs" ] || fail "the successor runs ${q[-1]}, not $cpu_pbs"
for v in "ZT_CHAIN=1" "ZT_CONFIG=" "ZT_VALID='$w/a,$w/b'" "ZT_SCRIPT=$cpu_pbs" "ZT_DEVICE=cpu" "ZT_TIME_MARGIN_MIN=4" \
         "ZT_TERM_GRACE_S=8" "ZT_PBS_OFFLINE=1" "ZT_PREFLIGHT_ARGS=\"--preflight.max_mb=1 --x=a'b,c\"" "ZT_SITE_SETTING=42"; do
  [[ ,${q[5]}, == *",$v,"* ]] || fail "qsub -v lacks $v (every ZT_* setting goes to the successor): ${q[5]}"
done
# The successor asks for this job's resources, account and project (from qstat -f), not the #PBS defaults.
args=$'\t'$call
for a in "-l"$'\t'"select=1:ncpus=2:mpiprocs=2:mem=4gb:site_resource=abc" "-l"$'\t'"walltime=00:30:00" \
         "-l"$'\t'"place=scatter:excl" "-A"$'\t'"acct1" "-P"$'\t'"proj1"; do
  [[ $args == *$'\t'"$a"$'\t'* ]] || fail "the successor's qsub lacks ${a/$'\t'/ }: $call"
done
[[ $args != *"ncpus=2"$'\t'* && $args != *"nodect"* ]] || fail "the successor's qsub passes a resource PBS derives (ncpus, nodect): $call"
expect_in ztest.2000.log "submitting the successor" "the log says it submits"
expect_in ztest.2000.log "successor 1235.pbs0 starts when 2000.pbs0 has ended" "the log names the successor"

: >"$w/qsub.calls"
no_successor() {  # no_successor WANT_RC WHAT JOBID VAR=VALUE...: exits WANT_RC, submits nothing
  local want=$1 what=$2 id=$3 rc; shift 3
  pbs_job "$id" "$cpu_pbs" "${base[@]}" "$@"
  rc=$?
  [ "$rc" -eq "$want" ] || { tail -n 20 "ztest.${id%%.*}.log"; fail "$what: exit $rc, expected $want"; }
  [ ! -s "$w/qsub.calls" ] || fail "$what: submitted a successor: $(cat "$w/qsub.calls")"
}
no_successor 75 "ZT_MAX_CHAIN reached" 2001.pbs0 ZT_FAKE_RC=75 "ZT_FAKE_RECORD=$trained" ZT_CHAIN=3 ZT_MAX_CHAIN=3
expect_in ztest.2001.log "job 4 of the chain \(ZT_MAX_CHAIN=3\): no successor"
mkdir -p runs/ztest && touch runs/ztest/STOP
no_successor 75 "STOP file" 2002.pbs0 ZT_FAKE_RC=75 "ZT_FAKE_RECORD=$trained"
rm runs/ztest/STOP
no_successor 1 "ztrain failing" 2003.pbs0 ZT_FAKE_RC=1
no_successor 2 "bad configuration" 2004.pbs0 ZT_ARGS="--train.max_steps=-3"
expect_in ztest.2004.log "--print-config failed \(exit 2\): nothing started, no successor"
echo "ok: exit 75 submits the successor (depend=afterany, name, queue, account, project, -l select/walltime/place, every ZT_* setting); not at ZT_MAX_CHAIN, with STOP, on 1 or 2"

# mpirun reports 1 after a SIGTERM although the ranks checkpointed: the exit record of this start says 75.
pbs_job 2005.pbs0 "$cpu_pbs" "${base[@]}" ZT_FAKE_RC=1 \
  ZT_FAKE_RECORD='{"event": "exit", "step": 7, "code": 75, "reason": "SIGTERM"}'
rc=$?
[ "$rc" -eq 75 ] || { tail -n 20 ztest.2005.log; fail "exit record 75 behind mpirun's 1: script exit $rc"; }
expect_in ztest.2005.log "the launcher reported exit 1, but ztrain exited 75: " "the exit record read"
[ "$(wc -l <"$w/qsub.calls")" -eq 1 ] || fail "exit 75 from the record: expected one successor"
: >"$w/qsub.calls"
echo "ok: mpirun's exit 1 with this start's exit record of 75 is exit 75 (a successor); an older record is not read"

# ---- the chain, each job stopped by train.time_limit_min ------------------------------------------
# A quarter of the uninterrupted run's training time (its steps' step_ms), in minutes: a time limit
# that stops a start well before the end whatever this machine's speed.
quarter_min() {
  /usr/bin/python3 -c '
import json, sys
ms = sum(json.loads(line).get("step_ms", 0) for line in open(sys.argv[1]))
print(f"{max(ms / 4 / 60000, 0.002):.4f}")' "$1"
}
if ! full_cases; then
  echo "NOTE: the chain case runs under ZT_TEST_FULL=1"
elif [ -x "$ZT_BIN/zckpt" ]; then
  steps=600
  train=("${TINY_MODEL[@]}" --train.global_batch=64 --train.micro_batch=8 "--train.max_steps=$steps")
  ZT_TIMEOUT=120 zt_mpirun 2 "$ZT_BIN/ztrain" "${train[@]}" "--data.train=$w/data/train_*.h5" \
    --ckpt.dir="$w/ref/ckpt" --log.metrics="$w/ref/metrics.jsonl" >"$w/ref.log" 2>&1 || fail "reference run"
  limit_min=$(quarter_min "$w/ref/metrics.jsonl")
  : >"$w/qsub.calls"
  vars=(ZT_CONFIG= "ZT_DATA=$w/data/train_*.h5" "ZT_ARGS=${train[*]}" ZT_RUN_DIR=chain "ZT_TIME_LIMIT_MIN=$limit_min")
  id=3000
  for job in $(seq 1 20); do
    pbs_job "$id.pbs0" "$cpu_pbs" "${vars[@]}"
    rc=$?
    echo "chain job $job ($id.pbs0): exit $rc, last step $(grep -o '"step": [0-9]*' chain/metrics.jsonl | tail -n 1)"
    [ "$rc" -ne 0 ] || break
    [ "$rc" -eq 75 ] || { tail -n 20 "ztest.$id.log"; fail "chain job $job: exit $rc"; }
    # Start the successor as PBS would: the settings of its qsub -v, the id qsub printed.
    IFS=$'\t' read -r -a q < <(tail -n 1 "$w/qsub.calls")
    [ "${q[1]}" = "depend=afterany:$id.pbs0" ] || fail "successor of $id does not depend on it: ${q[*]}"
    mapfile -t vars < <(/usr/bin/python3 -c '
import sys  # qsub -v: NAME=VALUE items split at commas outside single quotes, the quotes dropped
item, quoted = "", False
for ch in sys.argv[1] + ",":
    if ch == "\x27": quoted = not quoted
    elif ch == "," and not quoted: print(item); item = ""
    else: item += ch' "${q[5]}")
    id=$((1234 + $(wc -l <"$w/qsub.calls")))
  done
  [ "$rc" -eq 0 ] || fail "the chain did not finish in 20 jobs"
  [ "$job" -ge 2 ] || fail "the chain finished in one job: train.time_limit_min=$limit_min never stopped it"
  n_resume=$(grep -c '"event": *"resume"' chain/metrics.jsonl)
  [ "$n_resume" -eq $((job - 1)) ] || fail "$n_resume resume events for $job jobs"
  loss_column "$w/ref/metrics.jsonl" >"$w/ref.loss"
  loss_column chain/metrics.jsonl >"$w/chain.loss"
  cmp -s "$w/ref.loss" "$w/chain.loss" || fail "the chain's step losses differ from the uninterrupted run's"
  echo "ok: a chain of $job jobs (each stopped by its time limit of $limit_min min, exit 75, successor resumed) ends with the uninterrupted run's losses, bit for bit"
else
  echo "NOTE: chain case not run: no $ZT_BIN/zckpt (this build has no checkpointing)"
fi

# ---- tokenize.pbs: ztok on the 2 ranks of PBS_NODEFILE ---------------------------------------------
vocab=${ZT_VOCAB:-$ZT_SOURCE/data/vocab}
if "$ZT_SOURCE/tools/fetch-vocab.sh" "$vocab" >"$w/vocab.log" 2>&1; then
  mkdir -p corpus
  for f in 1 2 3; do printf 'Call me Ishmael, %s.\n\nSome years ago %s.\n' "$f" "$((f * 7))" >"corpus/d$f.txt"; done
  pbs_job 4000.pbs0 "$ZT_SOURCE/jobscripts/pbs/tokenize.pbs" ZT_INPUT='corpus/*.txt' ZT_OUT=tok \
    "ZT_VOCAB=$vocab" ZT_ZTOK_ARGS='--split paragraph --shard-tokens 10'
  rc=$?
  [ "$rc" -eq 0 ] || { tail ztest.4000.log; fail "tokenize.pbs: exit $rc"; }
  expect_in ztest.4000.log "ranks: 2 x 1 threads" "2 ranks from PBS_NODEFILE, threads from NCPUS"
  expect_in ztest.4000.log "launch: mpirun -np 2 --hostfile $w/nodefile .*ztok .* corpus/\*\.txt" "the launch line"
  [ "$(cat "$w/mpirun.env")" = "keepalive=15 2 3" ] || fail "tokenize.pbs: mpirun's oob keepalive: $(cat "$w/mpirun.env")"
  "$ZT_BIN/ztok" --vocab "$vocab" --out single --threads 1 -q --split paragraph --shard-tokens 10 'corpus/*.txt' >/dev/null ||
    fail "ztok"
  for f in single/*.h5; do cmp "$f" "tok/${f#single/}" || fail "tokenize.pbs: tok/${f#single/} differs from one ztok's"; done
  echo "ok: tokenize.pbs: 2 ranks write the shards of one ztok, byte for byte"
else
  echo "NOTE: tokenize.pbs case not run: no GPT-2 vocabulary ($(tail -n 1 "$w/vocab.log"))"
fi
echo "PASS"
