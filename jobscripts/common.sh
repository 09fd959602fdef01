# Shared by the training job scripts (slurm/train.sbatch, pbs/train.pbs, local/train.sh), which source it
# from the checkout ($ZT_ROOT/jobscripts/common.sh): launching and waiting with a watchdog, ztrain's exit
# record, the run's progress. Needs the script's say() and its variables launcher_pid and asked (the traps').
# shellcheck shell=bash
# shellcheck disable=SC2154  # asked, ckpt_dir, launch: the sourcing script's

# Open MPI's out-of-band TCP keepalive, short (Open MPI's default: 300 s of silence, then 9 probes 20 s
# apart): mpirun notices a node's daemon it can no longer reach (a lost node, a cut link) within about
# 20 s instead of waiting on TCP's retransmissions for up to 15 min after every rank has ended
# (tools/cluster/netns.sh sets the same; docs/guide/clusters.md, "Network settings that matter").
zt_mpi_keepalive() {
  export OMPI_MCA_oob_tcp_keepalive_time=${OMPI_MCA_oob_tcp_keepalive_time:-15}
  export OMPI_MCA_oob_tcp_keepalive_intvl=${OMPI_MCA_oob_tcp_keepalive_intvl:-2}
  export OMPI_MCA_oob_tcp_keepalive_probes=${OMPI_MCA_oob_tcp_keepalive_probes:-3}
}

# zt_arg_value KEY DEFAULT ARGS...: the value of the last --KEY=V or --KEY V among ARGS, else DEFAULT.
zt_arg_value() {
  local key=$1 value=$2 i
  shift 2
  local a=("$@")
  for ((i = 0; i < ${#a[@]}; i++)); do
    case ${a[i]} in
      "--$key="*) value=${a[i]#--"$key"=} ;;
      "--$key") [ $((i + 1)) -ge ${#a[@]} ] || value=${a[i + 1]} ;;
    esac
  done
  printf '%s\n' "$value"
}

# zt_resume_value ARGS...: the last ckpt.resume among ztrain's arguments, auto when none.
zt_resume_value() { zt_arg_value ckpt.resume auto "$@"; }

# zt_resume_once ARRAY START MARKER: on a later start of a chain (START > 0: a requeue, a successor, a
# restart), a ckpt.resume other than auto among ztrain's arguments in ARRAY (a rollback to a step_K, or
# none: a new run) that an earlier start applied (MARKER holds it: zt_note_resume_applied) is replaced by
# auto, and said: repeated, every start would roll back again (moving the last segment's checkpoints to
# abandoned/) or refuse the run's own checkpoints. One no start applied yet (ztrain never got past its
# start-up: a requeue at launch) is kept. The first start (START 0) removes an earlier chain's MARKER.
zt_resume_once() {
  local -n _zt_args=$1
  local start=$2 marker=$3 value kept=() i
  value=$(zt_resume_value "${_zt_args[@]}")
  if [ "$start" -eq 0 ]; then  # a new chain: an earlier chain's record is not this one's
    rm -f "$marker"
    return 0
  fi
  [ "$value" != auto ] || return 0
  if [ "$(cat "$marker" 2>/dev/null)" != "$value" ]; then
    say "ckpt.resume=$value: no earlier start of this chain got past its start-up to apply it; this start does"
    return 0
  fi
  for ((i = 0; i < ${#_zt_args[@]}; i++)); do
    case ${_zt_args[i]} in
      --ckpt.resume=*) ;;
      --ckpt.resume) i=$((i + 1)) ;;
      *) kept+=("${_zt_args[i]}") ;;
    esac
  done
  say "ckpt.resume=$value was for the first start of this chain, which applied it; this start resumes from the newest checkpoint (ckpt.resume=auto)"
  _zt_args=("${kept[@]}" --ckpt.resume=auto)
}

# zt_note_resume_applied ARRAY METRICS BYTES MARKER: after a launch whose ckpt.resume (in ARRAY) is not auto,
# MARKER records it once ztrain got past its start-up: its resume event or its exit record among the lines
# this start appended to METRICS (after BYTES).
zt_note_resume_applied() {
  local -n _zt_launched=$1
  local value
  value=$(zt_resume_value "${_zt_launched[@]}")
  [ "$value" != auto ] || return 0
  if zt_since "$2" "$3" | grep -q -e '"event": "resume"' -e '"event": "exit"'; then
    printf '%s\n' "$value" >"$4"
  fi
}

# zt_newest_step DIR: the step of the newest committed checkpoint DIR/step_N (0 when none).
zt_newest_step() {
  local n
  n=$(find "$1" -mindepth 1 -maxdepth 1 -type d -name 'step_*' -printf '%f\n' 2>/dev/null |
    sed -n 's/^step_0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n 1)
  echo "${n:-0}"
}

# zt_newest_note STEP: what the newest checkpoint at the start was, in words.
zt_newest_note() {
  if [ "$1" -gt 0 ]; then echo "the newest checkpoint, step $1, stands"; else echo "there is no checkpoint yet"; fi
}

# zt_since FILE BYTES: what FILE holds after its first BYTES bytes (what this start appended).
zt_since() { tail -c "+$(($2 + 1))" "$1" 2>/dev/null; }

# zt_record FILE BYTES: ztrain's exit record among the lines this start appended (empty if none).
zt_record() { zt_since "$1" "$2" | grep '"event": "exit"' | tail -n 1; }

# zt_field NAME JSON_LINE: an integer field of a metrics line.
zt_field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" <<<"$2"; }

# zt_watchdog PID SUMMARY OLD METRICS BYTES GRACE_S FLAG (in the background): once ztrain's ranks have
# ended, the launcher should follow within seconds; mpirun can instead hang for minutes or for ever when
# a node is frozen (its processes stopped) or lost (its daemon unreachable). Here "ended" is: the hang
# report (ckpt.dir/diag/summary.txt, written by the reporting rank just before the job aborts) has an
# incident line other than OLD (its first line before the launch: an earlier job's), or rank 0 has appended its exit record (exit 0 or 75, written as it returns). If the launcher
# is still alive GRACE_S seconds later, it is killed (SIGKILL) and FLAG says why. The scheduler ends
# whatever the launcher leaves behind on other nodes when the job ends.
zt_watchdog() {
  local pid=$1 summary=$2 old=$3 metrics=$4 bytes=$5 grace=$6 flag=$7 first seen="" why=""
  while kill -0 "$pid" 2>/dev/null; do
    if [ -z "$seen" ]; then
      first=$(head -n 1 "$summary" 2>/dev/null)
      if [ -n "$first" ] && [ "$first" != "$old" ]; then
        why="ztrain's hang report ($summary)" seen=$SECONDS
      elif [ -n "$(zt_record "$metrics" "$bytes")" ]; then
        why="ztrain's exit record ($metrics)" seen=$SECONDS
      fi
    elif [ $((SECONDS - seen)) -ge "$grace" ]; then
      say "watchdog: the launcher (pid $pid) is still running $grace s after $why: killing it" \
        "(ZT_WATCHDOG_S; a node whose processes are stopped or unreachable keeps mpirun waiting)"
      echo "$why" >"$flag"
      kill -KILL "$pid" 2>/dev/null
      return 0
    fi
    sleep 1
  done
  return 0
}

# zt_stop_launcher PID: end a launch now: mpirun on SIGTERM ends its ranks (SIGTERM, then SIGKILL, each
# ZT_TERM_GRACE_S later: odls_base_sigkill_timeout) and exits 1; srun ends its step on two SIGINTs
# within a second.
zt_stop_launcher() {
  if [ "${launch[0]}" = srun ]; then
    kill -INT "$1" 2>/dev/null; sleep 0.3; kill -INT "$1" 2>/dev/null
  else
    kill -TERM "$1" 2>/dev/null
  fi
  return 0
}

# zt_launch [--watch SUMMARY METRICS BYTES] COMMAND...: runs COMMAND in the background and waits for it,
# so that the traps run at once when a signal comes (bash runs a trap only between commands); sets rc
# to its exit status and launcher_pid while it runs. With --watch, zt_watchdog guards it (ZT_WATCHDOG_S,
# 60 s by default) and watchdog_why says why it fired (empty if it did not).
zt_launch() {
  local watch=() watch_pid="" flag
  watchdog_why=""
  if [ "$1" = --watch ]; then  # the hang report's incident line now, before the launch: an earlier job's
    watch=("$2" "$(head -n 1 "$2" 2>/dev/null)" "$3" "$4")
    shift 4
  fi
  "$@" &
  launcher_pid=$!
  [ -z "$asked" ] || kill -USR1 "$launcher_pid" 2>/dev/null  # a signal that came while it was being started
  if [ ${#watch[@]} -gt 0 ]; then
    flag=$(mktemp "${TMPDIR:-/tmp}/ztrain-watchdog.XXXXXX")
    zt_watchdog "$launcher_pid" "${watch[@]}" "${ZT_WATCHDOG_S:-60}" "$flag" &
    watch_pid=$!
  fi
  # `wait` returns early (>128) when a trapped signal arrives: wait again until the launcher exits.
  wait "$launcher_pid"
  rc=$?
  while [ "$rc" -gt 128 ] && kill -0 "$launcher_pid" 2>/dev/null; do
    wait "$launcher_pid"
    rc=$?
  done
  launcher_pid=""
  if [ -n "$watch_pid" ]; then
    kill "$watch_pid" 2>/dev/null
    wait "$watch_pid" 2>/dev/null
    watchdog_why=$(cat "$flag" 2>/dev/null)
    rm -f "$flag"
  fi
  return 0
}

# zt_train_rc SUMMARY METRICS BYTES: after the training launch (rc, watchdog_why set by zt_launch), the
# code ztrain itself exited with. mpirun exits 1 after a SIGTERM even where every rank checkpointed and
# returned 75, and a launcher the watchdog killed reports 137: ztrain's exit record written by this start
# says what the ranks returned; without one, a hang report means 1 (its headline goes to the log), and a
# signal before it means a save was cut short.
zt_train_rc() {
  local summary=$1 metrics=$2 bytes=$3 record code
  [ "$rc" -ne 0 ] && [ "$rc" -ne 75 ] || return 0
  record=$(zt_record "$metrics" "$bytes")
  code=$(zt_field code "$record")
  if [ -n "$code" ]; then
    say "the launcher reported exit $rc, but ztrain exited $code: $record"
    rc=$code
  elif [ -n "$watchdog_why" ]; then
    say "ztrain failed (hang report): $(sed -n 2p "$summary" 2>/dev/null) (the whole report: $summary)"
    rc=1
  elif [ -n "$asked" ]; then
    say "ztrain was killed (launcher exit $rc) before it finished after SIG${asked%2}; unfinished saves:" \
      "$(find "$ckpt_dir" -maxdepth 1 -name 'step_*.tmp' 2>/dev/null | paste -sd ' ')" \
      "newest checkpoint: $(find "$ckpt_dir" -maxdepth 1 -name 'step_*[0-9]' 2>/dev/null | sort | tail -n 1)"
  fi
  return 0
}

# zt_trained METRICS BYTES STEP_AT_START: true when this start trained at least one step: its exit record
# is past the step it resumed from (its "resume" event; 0 for a fresh run), or a checkpoint newer than
# the newest one at the start exists. A stop request that comes during start-up (the preflight, loading,
# a resume's verification) ends with 75 too, having trained and saved nothing.
zt_trained() {
  local record step from
  record=$(zt_record "$1" "$2")
  step=$(zt_field step "$record")
  from=$(zt_field step "$(zt_since "$1" "$2" | grep '"event": "resume"' | tail -n 1)")
  { [ -n "$step" ] && [ "$step" -gt "${from:-0}" ]; } || [ "$(zt_newest_step "$ckpt_dir")" -gt "$3" ]
}
