#!/usr/bin/env bash
# ztrain on this machine with `mpirun -np N`, restarting from the newest checkpoint whenever ztrain
# exits 75 at its time limit, as the cluster scripts requeue (jobscripts/slurm/train.sbatch).
#
#   jobscripts/local/train.sh                                 # works from any directory
#   ZT_NP=4 ZT_DATA='data/tok/sotu/train_*.h5' jobscripts/local/train.sh --train.max_steps=1000
#   ZT_SEGMENT_MIN=30 jobscripts/local/train.sh               # checkpoint + restart every 30 min
#   Ctrl-C, or kill -USR1 <script pid>   checkpoint and stop (exit 75); the same line resumes
#   Ctrl-C twice                         stop at once, without waiting for the checkpoint
#
# ---- the run: edit here, or set in the environment; relative paths are from the current directory
ZT_ROOT=${ZT_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}  # the ztrain checkout
ZT_BIN=${ZT_BIN:-$ZT_ROOT/build/bin}                          # where tools/build.sh put ztrain
ZT_CONFIG=${ZT_CONFIG-$ZT_ROOT/inputs/configs/cpu-tiny.ini}  # model and training configuration ('': defaults)
ZT_NP=${ZT_NP:-2}                  # ranks (one per GPU; on the CPU, cores are split among them)
ZT_DATA=${ZT_DATA:-}               # training shards (a glob) -> data.train; empty: the config's
ZT_VALID=${ZT_VALID:-}             # validation shards -> data.valid; empty: the config's
ZT_VOCAB=${ZT_VOCAB:-}             # vocabulary directory -> data.vocab; empty: the config's
ZT_RUN_DIR=${ZT_RUN_DIR:-runs/local}                          # metrics.jsonl and train.log
ZT_CKPT_DIR=${ZT_CKPT_DIR:-$ZT_RUN_DIR/checkpoints}           # ckpt.dir: every start resumes from here
ZT_DEVICE=${ZT_DEVICE:-auto}       # train.device: auto | cuda | cpu
ZT_SEGMENT_MIN=${ZT_SEGMENT_MIN:-0}  # train.time_limit_min of each start (0 = run to the end)
ZT_MAX_RESTARTS=${ZT_MAX_RESTARTS:-100}  # give up after this many restarts
ZT_LOG=${ZT_LOG:-$ZT_RUN_DIR/train.log}  # appended copy of the output (empty = none)
ZT_ARGS=${ZT_ARGS:-}               # more ztrain options (space-separated); the script's arguments too
ZT_WATCHDOG_S=${ZT_WATCHDOG_S:-60} # kill an mpirun still running this long after ztrain's ranks have
                                   # ended (its hang report or exit record)
# ------------------------------------------------------------------------------------------------

set -uo pipefail
say() { printf '[%(%F %T)T] local: %s\n' -1 "$*"; }
ztrain=$ZT_BIN/ztrain
[ -x "$ztrain" ] || { say "no ztrain at $ztrain (build with tools/build.sh, or set ZT_BIN)"; exit 2; }
# shellcheck source=jobscripts/common.sh
source "$ZT_ROOT/jobscripts/common.sh" || { say "no $ZT_ROOT/jobscripts/common.sh: set ZT_ROOT to the checkout"; exit 2; }
mkdir -p "$ZT_RUN_DIR"
if [ -n "$ZT_LOG" ]; then
  # tee ignores SIGINT, so that Ctrl-C leaves the log running while the ranks save.
  exec > >(trap '' INT; exec tee -a "$ZT_LOG") 2>&1
  tee_pid=$!
fi

read -r -a user_args <<<"$ZT_ARGS"
user_args+=("$@")
args=()
[ -z "$ZT_CONFIG" ] || args+=(--config "$ZT_CONFIG")
opt() {  # opt KEY VALUE: --KEY=VALUE unless the user gives --KEY (ztrain would take the last one anyway)
  local a
  for a in "${user_args[@]}"; do [[ $a == "--$1" || $a == "--$1="* ]] && return; done
  args+=("--$1=$2")
}
opt train.device "$ZT_DEVICE"
opt ckpt.dir "$ZT_CKPT_DIR"
opt ckpt.resume auto
opt log.metrics "$ZT_RUN_DIR/metrics.jsonl"
opt train.time_limit_min "$ZT_SEGMENT_MIN"
[ -z "$ZT_DATA" ] || opt data.train "$ZT_DATA"
[ -z "$ZT_VALID" ] || opt data.valid "$ZT_VALID"
[ -z "$ZT_VOCAB" ] || opt data.vocab "$ZT_VOCAB"
args+=("${user_args[@]}")
zt_mpi_keepalive  # one host needs none; with hosts added to `launch`, a lost one ends the job in seconds
launch=(mpirun -np "$ZT_NP" --bind-to none)
[ "$(id -u)" -ne 0 ] || launch+=(--allow-run-as-root)
[ "$ZT_NP" -le "$(nproc)" ] || launch+=(--oversubscribe)

say "==== ztrain on $(hostname -s), $ZT_NP ranks, script pid $$"
say "binary: $ztrain: $("$ztrain" --version)"
say "launch: ${launch[*]} $ztrain ${args[*]}"
# Trapped before the first launch: a signal during --print-config is a stop request
# too (bash runs the trap when that command returns; training then does not start: exit 75).
launcher_pid="" asked=""
# shellcheck disable=SC2317  # called from the traps below
forward() {  # first signal: every rank checkpoints and exits 75; a second Ctrl-C: stop at once
  if [ -n "$asked" ] && [ "$1" = INT ]; then
    say "second SIGINT: stopping without waiting for the checkpoint"
    asked=INT2
    [ -z "$launcher_pid" ] || kill -TERM "$launcher_pid" 2>/dev/null
    return
  fi
  say "got SIG$1: asking ztrain to checkpoint and stop (Ctrl-C again: stop at once)"
  asked=$1
  [ -z "$launcher_pid" ] || kill -USR1 "$launcher_pid" 2>/dev/null
}
trap 'forward INT' INT
trap 'forward USR1' USR1
trap 'forward TERM' TERM

say "resolved configuration (ztrain --print-config):"
"${launch[@]}" "$ztrain" "${args[@]}" --print-config
rc=$?
[ "$rc" -eq 0 ] || [ -n "$asked" ] || { say "--print-config failed (exit $rc): nothing started"; exit "$rc"; }


# Where ztrain writes its exit record and its hang report: --log.metrics and --ckpt.dir (ours or the user's).
metrics=$(zt_arg_value log.metrics "$ZT_RUN_DIR/metrics.jsonl" "${args[@]}")
ckpt_dir=$(zt_arg_value ckpt.dir "$ZT_CKPT_DIR" "${args[@]}")
summary=$ckpt_dir/diag/summary.txt
resume_marker=$ZT_RUN_DIR/.ztrain-resume-applied
restarts=0
while :; do
  [ "$restarts" -eq 0 ] || say "restart $restarts: resuming from the newest checkpoint in $ZT_CKPT_DIR"
  zt_resume_once args "$restarts" "$resume_marker"  # a rollback (or none) given to the script: applied once
  [ -z "$asked" ] || { rc=75; break; }
  metrics_bytes=$({ wc -c <"$metrics"; } 2>/dev/null || echo 0)
  step_at_start=$(zt_newest_step "$ckpt_dir")
  # Its own session: a Ctrl-C on the terminal reaches this script only, which asks for a checkpoint.
  zt_launch --watch "$summary" "$metrics" "$metrics_bytes" setsid "${launch[@]}" "$ztrain" "${args[@]}"
  zt_train_rc "$summary" "$metrics" "$metrics_bytes"
  zt_note_resume_applied args "$metrics" "$metrics_bytes" "$resume_marker"
  if [ "$rc" -ne 75 ] || [ -n "$asked" ] || [ "$restarts" -ge "$ZT_MAX_RESTARTS" ]; then break; fi
  if ! zt_trained "$metrics" "$metrics_bytes" "$step_at_start"; then
    say "ztrain stopped (exit 75) before training a step: not restarted (it would stop there again)"
    break
  fi
  say "ztrain checkpointed at its time limit (exit 75)"
  restarts=$((restarts + 1))
done

case $rc in
  0) say "ztrain finished (exit 0) after $restarts restarts" ;;
  75) say "checkpointed and stopped (exit 75); run the same command again to resume" ;;
  *) if [ "$asked" = INT2 ]; then say "stopped at once (exit $rc)"; else say "ztrain failed (exit $rc)"; fi ;;
esac
if [ -n "${tee_pid:-}" ]; then exec >&- 2>&-; wait "$tee_pid"; fi  # the log is complete on return
exit "$rc"
