#!/usr/bin/env bash
# The training job scripts around a launcher that misbehaves, with a fake mpirun (and fake Slurm and PBS
# commands) on PATH: no MPI, no training, a few seconds in all.
#  - watchdog: ztrain's ranks have ended (its hang report diag/summary.txt, or rank 0's exit record) but
#    mpirun never exits (a frozen or lost node): train.sbatch, train-cpu.pbs and local/train.sh kill it
#    ZT_WATCHDOG_S later and end with ztrain's code (1 and the report's headline; 75 and the successor);
#    the PBS and local scripts export Open MPI's short oob TCP keepalive;
#  - no progress (Slurm): a stop before step 1 (exit 75, nothing trained) is not requeued and the log
#    says why, not "checkpointed"; a stop after training steps is requeued as before; a time limit within
#    the --signal offset is warned about at start; a USR1 during the (opt-in) preflight ends it at once
#    (the preflight runs in the background; its mpirun gets SIGTERM), with no requeue;
#  - the same stop before step 1 under PBS submits no successor.
source "$(dirname "$0")/../lib.sh"
w=$ZT_WORK
mkdir -p "$w/fakebin" "$w/work"
cd "$w/work" || fail "cd"

# ---- fakes ---------------------------------------------------------------------------------------
# mpirun: --print-config prints a line; --preflight sleeps (FAKE_PREFLIGHT_S) until a SIGTERM (exit 1);
# training does FAKE_TRAIN: hang (the hang report, then never exits), record_hang (75 after step 7, then
# never exits), startup75 (75 before step 1), progress75 (75 after step 7).
cat >"$w/fakebin/mpirun" <<EOF
#!/bin/bash
printf '%s ' "\$@" >>"$w/mpirun.calls"; echo >>"$w/mpirun.calls"
echo "keepalive=\${OMPI_MCA_oob_tcp_keepalive_time:-} \${OMPI_MCA_oob_tcp_keepalive_intvl:-} \${OMPI_MCA_oob_tcp_keepalive_probes:-}" >"$w/mpirun.env"
case " \$* " in
  *" --print-config "*) echo "# fake resolved configuration"; exit 0 ;;
  *" --preflight "*)
    sleep "\${FAKE_PREFLIGHT_S:-0}" & s=\$!
    # as ztrain --preflight: a USR1 waits for the measurements' end; mpirun on a SIGTERM ends the ranks, exit 1
    trap 'echo "fake preflight: USR1 (finishing the measurements)"' USR1
    trap 'kill \$s; echo "fake preflight: SIGTERM"; exit 1' TERM
    while kill -0 \$s 2>/dev/null; do wait \$s; done; exit 0 ;;
esac
ck=\$ZT_RUN_DIR/checkpoints m=\$ZT_RUN_DIR/metrics.jsonl
mkdir -p "\$ck" "\$ZT_RUN_DIR"
case \$FAKE_TRAIN in
  hang) mkdir -p "\$ck/diag"
    printf 'incident rank 2 pid 99 at 1.5\nrank 2 on node node1 (pid 99) sent no notes within 2.0 s\n' >"\$ck/diag/summary.txt"
    exec sleep 120 ;;
  record_hang) mkdir -p "\$ck/step_00000007"; echo '{"event": "exit", "step": 7, "code": 75, "reason": "SIGUSR1"}' >>"\$m"
    exec sleep 120 ;;
  startup75) echo '{"event": "exit", "step": 0, "code": 75, "reason": "SIGUSR1"}' >>"\$m"; exit 75 ;;
  progress75) mkdir -p "\$ck/step_00000007"; echo '{"event": "exit", "step": 7, "code": 75, "reason": "SIGUSR1"}' >>"\$m"; exit 75 ;;
esac
exit 3
EOF
cat >"$w/fakebin/scontrol" <<EOF
#!/bin/bash
case "\$1 \$2" in
  "show config") echo "KillWait                = 30 sec" ;;
  "show job"*) echo "JobId=\$3 JobName=ztest JobState=RUNNING Reason=None" ;;
  "write batch_script") printf '#!/bin/bash\n#SBATCH --time=5\n#SBATCH --signal=B:USR1@120   # early\n' ;;
  requeue*) printf '%s\n' "\$*" >>"$w/requeue.calls" ;;
  *) exit 1 ;;
esac
EOF
cat >"$w/fakebin/squeue" <<'EOF'
#!/bin/bash
echo "${FAKE_LEFT:-1:00:00}"
EOF
cat >"$w/fakebin/qsub" <<EOF
#!/bin/bash
printf '%s\t' "\$@" >>"$w/qsub.calls"; echo >>"$w/qsub.calls"; echo 1235.pbs0
EOF
cat >"$w/fakebin/qstat" <<'EOF'
#!/bin/bash
printf 'Job Id: %s\n    Resource_List.walltime = 00:30:00\n    resources_used.walltime = 00:01:00\n' "$2"
EOF
chmod +x "$w/fakebin"/*
printf 'localhost\nlocalhost\n' >"$w/nodefile"
common=(PATH="$w/fakebin:$PATH" ZT_ROOT="$ZT_SOURCE" ZT_BIN="$ZT_BIN" ZT_CONFIG= ZT_RUN_DIR=run ZT_WATCHDOG_S=2)

reset() { rm -rf run "$w"/*.calls "$w/mpirun.env" ./*.log ./*.out; }
# slurm_job OUT VAR=VALUE...: train-cpu.sbatch's train.sbatch as a Slurm job 42 of 2 ranks would run it.
slurm_job() {
  local out=$1; shift
  env "${common[@]}" SLURM_JOB_ID=42 SLURM_JOB_NAME=ztest SLURM_NTASKS=2 SLURM_JOB_NUM_NODES=1 ZT_DEVICE=cpu \
    "$@" timeout -k 5 60 bash "$ZT_SOURCE/jobscripts/slurm/train.sbatch" >"$out" 2>&1
}
# pbs_job JOBID VAR=VALUE...: train-cpu.pbs as PBS would start job JOBID (log: ztest.JOBID.log).
pbs_job() {
  local id=$1; shift
  env "${common[@]}" PBS_JOBID="$id" PBS_JOBNAME=ztest PBS_O_WORKDIR="$w/work" PBS_NODEFILE="$w/nodefile" \
    PBS_O_QUEUE=workq NCPUS=2 "$@" timeout -k 5 60 bash "$ZT_SOURCE/jobscripts/pbs/train-cpu.pbs" >/dev/null 2>&1
}
took_at_most() { [ "$2" -le "$1" ] || fail "$3: took $2 s (the watchdog should end it within $1 s)"; }

# ---- watchdog -------------------------------------------------------------------------------------
reset; t=$SECONDS
slurm_job slurm.out FAKE_TRAIN=hang
rc=$? dt=$((SECONDS - t))
[ "$rc" -eq 1 ] || { cat slurm.out; fail "Slurm, hung mpirun after the hang report: exit $rc, expected 1 (124: it waited for mpirun)"; }
took_at_most 20 "$dt" "Slurm, hung mpirun"
expect_in slurm.out "watchdog: the launcher \(pid [0-9]+\) is still running 2 s after ztrain's hang report \(run/checkpoints/diag/summary.txt\): killing it"
expect_in slurm.out "ztrain failed \(hang report\): rank 2 on node node1 \(pid 99\) sent no notes within 2.0 s"
[ ! -e "$w/requeue.calls" ] || fail "Slurm, hung mpirun: requeued"
echo "ok: Slurm: mpirun hung after ztrain's hang report is killed after ZT_WATCHDOG_S; exit 1 with the report's headline ($dt s)"

reset; t=$SECONDS
pbs_job 7000.pbs0 FAKE_TRAIN=record_hang
rc=$? dt=$((SECONDS - t))
[ "$rc" -eq 75 ] || { cat ztest.7000.log; fail "PBS, hung mpirun after the exit record: exit $rc, expected 75"; }
took_at_most 20 "$dt" "PBS, hung mpirun"
expect_in ztest.7000.log "watchdog: .* after ztrain's exit record \(run/metrics.jsonl\): killing it"
expect_in ztest.7000.log "the launcher reported exit 137, but ztrain exited 75"
[ "$(wc -l <"$w/qsub.calls" 2>/dev/null)" = 1 ] || fail "PBS, exit record 75 behind a hung mpirun: no successor"
[ "$(cat "$w/mpirun.env")" = "keepalive=15 2 3" ] || fail "PBS: mpirun's oob keepalive: $(cat "$w/mpirun.env")"
echo "ok: PBS: mpirun hung after the exit record (75) is killed; the successor is submitted; oob keepalive 15/2/3 ($dt s)"

reset; t=$SECONDS
env "${common[@]}" ZT_NP=2 FAKE_TRAIN=hang timeout -k 5 60 "$ZT_SOURCE/jobscripts/local/train.sh" >local.out 2>&1
rc=$? dt=$((SECONDS - t))
[ "$rc" -eq 1 ] || { cat local.out; fail "local, hung mpirun: exit $rc, expected 1"; }
took_at_most 20 "$dt" "local, hung mpirun"
expect_in local.out "ztrain failed \(hang report\): rank 2 on node node1"
[ "$(cat "$w/mpirun.env")" = "keepalive=15 2 3" ] || fail "local: mpirun's oob keepalive: $(cat "$w/mpirun.env")"
echo "ok: local: the same watchdog, exit 1; oob keepalive set ($dt s)"

# A stale hang report (an earlier job's, not yet moved to diag.previous/) does not fire the watchdog.
reset; mkdir -p run/checkpoints/diag
printf 'incident rank 2 pid 99 at 1.5\nold\n' >run/checkpoints/diag/summary.txt
slurm_job slurm.out FAKE_TRAIN=progress75
rc=$?
[ "$rc" -eq 75 ] || { cat slurm.out; fail "stale summary: exit $rc, expected 75"; }
expect_not_in slurm.out "watchdog" "a stale hang report fired the watchdog"
echo "ok: an earlier job's hang report (not yet moved to diag.previous/) does not fire the watchdog"

# ---- no progress: not requeued ---------------------------------------------------------------------
reset
slurm_job slurm.out FAKE_TRAIN=startup75 FAKE_LEFT=0:02:30
rc=$?
[ "$rc" -eq 75 ] || { cat slurm.out; fail "stop before step 1: exit $rc, expected 75"; }
[ ! -e "$w/requeue.calls" ] || { cat slurm.out; fail "a stop before step 1 (nothing trained) was requeued"; }
expect_in slurm.out "warning: the job's time left \(150 s\) is within --signal's USR1 offset \(120 s" "the start-up warning"
expect_in slurm.out "stopped \(exit 75\) during start-up, before training a step.*not requeued.*raise --time or lower --signal=B:USR1@N"
expect_not_in slurm.out "checkpointed|requeueing" "the log says checkpointed (or requeues) although nothing was saved"
echo "ok: Slurm: 75 before step 1 is not requeued, the log says why (and warned at start: time left within the signal offset)"

reset
slurm_job slurm.out FAKE_TRAIN=progress75
rc=$?
[ "$rc" -eq 75 ] || { cat slurm.out; fail "stop after step 7: exit $rc, expected 75"; }
[ "$(cat "$w/requeue.calls" 2>/dev/null)" = "requeue 42" ] || { cat slurm.out; fail "a stop after step 7 was not requeued"; }
expect_in slurm.out "checkpointed \(exit 75\): requeueing job 42"
expect_not_in slurm.out "warning: the job's time left" "a warning with an hour left"
echo "ok: Slurm: 75 after training steps is requeued as before"

# The preflight in the background: a USR1 during it is forwarded at once (not when it ends).
reset
env "${common[@]}" SLURM_JOB_ID=42 SLURM_JOB_NAME=ztest SLURM_NTASKS=2 SLURM_JOB_NUM_NODES=1 ZT_DEVICE=cpu \
  ZT_PREFLIGHT=1 FAKE_PREFLIGHT_S=100 FAKE_TRAIN=progress75 bash "$ZT_SOURCE/jobscripts/slurm/train.sbatch" >slurm.out 2>&1 &
pid=$!
trap 'kill -KILL "$pid" 2>/dev/null; rm -rf "$ZT_WORK"' EXIT
end=$((SECONDS + 30))
until grep -q -- '--preflight ' "$w/mpirun.calls" 2>/dev/null; do
  [ "$SECONDS" -lt "$end" ] || { cat slurm.out; fail "the preflight did not start"; }
  sleep 0.2
done
sleep 0.5; t=$SECONDS
kill -USR1 "$pid"
end=$((SECONDS + 15))
while kill -0 "$pid" 2>/dev/null; do
  [ "$SECONDS" -lt "$end" ] || { cat slurm.out; fail "USR1 during the preflight: the script still runs after 15 s (the trap waits for the preflight)"; }
  sleep 0.2
done
wait "$pid"
rc=$? dt=$((SECONDS - t))
[ "$rc" -eq 75 ] || { cat slurm.out; fail "USR1 during the preflight: exit $rc, expected 75"; }
expect_in slurm.out "got SIGUSR1: asking ztrain to checkpoint and stop"
expect_in slurm.out "fake preflight: SIGTERM" "the script ended the preflight's launcher"
[ "$(grep -c -- '--preflight' "$w/mpirun.calls")" = "$(wc -l <"$w/mpirun.calls" | awk '{print $1 - 1}')" ] ||
  fail "training started after a USR1 during the preflight"
[ ! -e "$w/requeue.calls" ] || fail "USR1 during the preflight: requeued with nothing trained"
expect_in slurm.out "before training a step.*not requeued"
echo "ok: Slurm: USR1 during the preflight ends it at once ($dt s), no training, not requeued"

# ---- PBS: a stop before step 1 submits no successor ----------------------------------------------
reset
pbs_job 7001.pbs0 FAKE_TRAIN=startup75
rc=$?
[ "$rc" -eq 75 ] || { cat ztest.7001.log; fail "PBS stop before step 1: exit $rc"; }
[ ! -e "$w/qsub.calls" ] || fail "PBS: a stop before step 1 submitted a successor"
expect_in ztest.7001.log "before training a step: no new checkpoint .*no successor"
echo "ok: PBS: 75 before step 1 submits no successor and says why"
echo "PASS"
