# A real single-node Slurm on this machine for the job-script tests (sourced): munged, slurmctld and
# slurmd on localhost, with their key, socket, config, state, logs and ports in a scratch directory of
# their own, so that nothing on the host (/etc/slurm, /run/munge, a running Slurm) is used or touched
# and two of these can run side by side. Needs root and Debian's slurm-wlm + munge.
#   slurm_start DIR   start it (exports SLURM_CONF, and ZT_TERM_GRACE_S for the job scripts; the
#                     cluster's one partition is the default)
#                     or print why not and return 1
#   slurm_start_nodes DIR N   the same across the N nodes of a network-namespace cluster (netns_lib.sh's
#                     cluster_up N first): slurmctld on node0, one slurmd on each node (NodeName nodeI,
#                     NodeAddr its address), munged on the host (its socket is a file, which every node's
#                     mount namespace sees); the client commands (sbatch, squeue, ...) become functions
#                     that run them on node0, where slurmctld is reachable
#   slurm_stop        cancel every job, stop the daemons, end anything left that they started
#   slurm_job_field JOBID KEY   one field of `scontrol show job` (JobState, Restarts, ExitCode, ...)
#   slurm_cmd CMD ARGS...       a client command, retried when it could not reach slurmctld
#   slurm_sbatch_wait SECONDS SBATCH_ARGS...   sbatch, then wait for the job's end (polled each second)
#   slurm_show_logs             the daemons' logs (tails), for a failed test
# slurm_stop must run on every exit: `trap slurm_stop EXIT` (after lib.sh's trap, which it keeps).

SLURM_DIR="" SLURM_MUNGE_DIR=""

# Two free TCP ports for slurmctld and slurmd (the kernel's choice, released just before use).
_slurm_free_ports() {
  /usr/bin/python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))'
}

# _slurm_wait SECONDS CMD...: retry CMD every 0.5 s until it succeeds or the time is up.
_slurm_wait() {
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.5
  done
}

# _slurm_reachable DIR: every directory above DIR is searchable by others (munged runs as munge).
_slurm_reachable() {
  local d=$1
  while [ "$d" != / ]; do
    d=$(dirname "$d")
    [ "$(stat -c %A "$d" | cut -c10)" != - ] || return 1
  done
}

_slurm_no_job_running() { [ -z "$(squeue -h -t running,completing -o %i 2>/dev/null)" ]; }
_slurm_node_idle() { [ "$(sinfo -h -N -o %t 2>/dev/null | sort -u)" = idle ]; }
SLURM_NODES=0  # slurm_start_nodes: the netns cluster's node count (0: one node, this host)

slurm_start() {
  local dir=$1 host ports
  local cmd
  for cmd in munged mungekey munge slurmctld slurmd sbatch scontrol squeue scancel sinfo; do
    command -v "$cmd" >/dev/null || { echo "slurm: '$cmd' not found (Debian: slurm-wlm munge; tools/install-deps.sh)"; return 1; }
  done
  [ "$(id -u)" -eq 0 ] || { echo "slurm: slurmd and munged need root here (running as $(id -un))"; return 1; }
  id munge >/dev/null 2>&1 || { echo "slurm: no 'munge' user (the munge package creates it)"; return 1; }
  SLURM_DIR=$dir
  # A marker every daemon, step and job process inherits, so slurm_stop can find what is left.
  export ZT_SLURM_DIR=$dir
  host=$(hostname -s)
  mkdir -p "$dir"/{state,spool,log}
  chmod 755 "$dir"
  # munged (user munge) must reach its socket directory; where a directory above ours is closed to
  # others (a /tmp of mode 700 on some machines), its files go to a directory of their own in /var/tmp.
  SLURM_MUNGE_DIR=$dir/munge
  if ! _slurm_reachable "$dir"; then
    SLURM_MUNGE_DIR=$(mktemp -d /var/tmp/zt_munge.XXXXXX) || { echo "slurm: mktemp in /var/tmp failed"; return 1; }
    _slurm_reachable "$SLURM_MUNGE_DIR" ||
      { echo "slurm: munged can reach neither $dir nor $SLURM_MUNGE_DIR (chmod o+x the directories above)"; return 1; }
  fi
  local m=$SLURM_MUNGE_DIR
  mkdir -p "$m"
  # munged wants its socket directory reachable by everyone, owned by munge, writable by no one else.
  chmod 755 "$m"
  chown munge:munge "$m"
  runuser -u munge -- mungekey -c -k "$m/munge.key" >/dev/null 2>&1 ||
    { echo "slurm: mungekey -c failed"; return 1; }
  runuser -u munge -- munged --socket="$m/munge.sock" --key-file="$m/munge.key" \
    --pid-file="$m/munged.pid" --log-file="$m/munged.log" \
    --seed-file="$m/munged.seed" 2>"$dir/log/munged.err" ||
    { echo "slurm: munged did not start: $(tail -n 2 "$dir/log/munged.err" "$m/munged.log" 2>/dev/null)"; return 1; }
  _slurm_wait 10 sh -c "munge -S '$m/munge.sock' -n | unmunge -S '$m/munge.sock'" ||
    { echo "slurm: munge credentials do not round-trip (munge -n | unmunge)"; return 1; }

  if [ "$SLURM_NODES" -gt 0 ]; then ports=(6817 6818); else read -r -a ports < <(_slurm_free_ports); fi
  : >"$dir/plugstack.conf"
  # cred_expire=10: Slurm holds a requeued job back for cred_expire seconds (120 by default);
  # sched_interval=2: the main scheduler looks at pending jobs every 2 s (60 by default).
  # Timeouts sized for a loaded 2-core CI machine, where a process that is ready to run can wait
  # 20-50 s for a core (measured: load 20-40, a 0.2 s heartbeat 52 s late, slurmctld silent for 28 s):
  # MessageTimeout=100 (10 by default): slurmctld drops a connection whose request has not arrived
  # within it, and a client starved between connect and send then fails (scancel: "slurm_msg_sendto:
  # ... msg_type=5032: Unexpected missing socket error", reproduced by delaying scancel's connect 12 s);
  # KillWait=120 (30 by default): SIGTERM -> SIGKILL. slurmd stops waiting once the job's processes are
  # gone, so it costs nothing when they end in time; but a job script's trap ran 51 s after the time
  # limit's SIGTERM and requeued at 58 s (KillWait=5 means SIGKILL long before: never requeued).
  cat >"$dir/slurm.conf" <<EOF
ClusterName=zttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_MUNGE_DIR/munge.sock,cred_expire=10
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
PlugStackConfig=$dir/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
MpiDefault=none
ReturnToService=2
JobRequeue=1
MinJobAge=600
KillWait=120
MessageTimeout=100
SlurmctldDebug=info
SlurmdDebug=info
EOF
  if [ "$SLURM_NODES" -eq 0 ]; then
    echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN" >>"$dir/slurm.conf"
    echo "PartitionName=zt Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" >>"$dir/slurm.conf"
  else  # nodeI at ZT_CLUSTER_NET.(I+1) (tools/cluster/netns.sh); slurmctld on node0
    sed -i "s/^SlurmctldHost=.*/SlurmctldHost=node0(${ZT_CLUSTER_NET:-10.77.0}.1)/" "$dir/slurm.conf"
    local i
    for ((i = 0; i < SLURM_NODES; i++)); do
      echo "NodeName=node$i NodeAddr=${ZT_CLUSTER_NET:-10.77.0}.$((i + 1)) CPUs=$(nproc) State=UNKNOWN" >>"$dir/slurm.conf"
    done
    echo "PartitionName=zt Nodes=node[0-$((SLURM_NODES - 1))] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" >>"$dir/slurm.conf"
  fi
  export SLURM_CONF=$dir/slurm.conf
  # The job scripts' mpirun grace (odls_base_sigkill_timeout): 3 s to its own TERM to the ranks, 3 more
  # to SIGKILL, well inside KillWait, which leaves the scripts time to read the exit record and
  # requeue on a loaded machine. mpirun waits both out even when the ranks are done, also when they
  # exit 75 after USR1 or 1 in a flagged preflight: the default, (KillWait - 3) / 2, would hold every
  # such job 2 min here.
  export ZT_TERM_GRACE_S=3
  # No cgroup.conf beside slurm.conf: with these plugins slurmd needs none (22.05 has no
  # CgroupPlugin=disabled and refuses to start with it).
  local on_node=()  # netns: slurmctld on node0, each slurmd on its node
  [ "$SLURM_NODES" -eq 0 ] || on_node=("$NETNS" exec node0)
  mkdir -p "$dir/spool/$host"
  "${on_node[@]}" slurmctld -f "$SLURM_CONF" 2>"$dir/log/slurmctld.err" ||
    { echo "slurm: slurmctld did not start: $(tail -n 3 "$dir/log/slurmctld.err" "$dir/log/slurmctld.log" 2>/dev/null)"; return 1; }
  if [ "$SLURM_NODES" -eq 0 ]; then
    slurmd -f "$SLURM_CONF" 2>"$dir/log/slurmd.err" ||
      { echo "slurm: slurmd did not start: $(tail -n 3 "$dir/log/slurmd.err" "$dir/log/slurmd.$host.log" 2>/dev/null)"; return 1; }
  else
    local i
    for ((i = 0; i < SLURM_NODES; i++)); do
      mkdir -p "$dir/spool/node$i"
      "$NETNS" exec "node$i" slurmd -f "$SLURM_CONF" -N "node$i" 2>"$dir/log/slurmd.node$i.err" ||
        { echo "slurm: slurmd on node$i did not start: $(tail -n 3 "$dir/log/slurmd.node$i.err" "$dir/log/slurmd.node$i.log" 2>/dev/null)"; return 1; }
    done
  fi
  _slurm_wait 30 _slurm_node_idle || {
    echo "slurm: the nodes are not idle after 30 s: $(sinfo -N 2>&1 | tail -n 3)"
    tail -n 5 "$dir/log/slurmctld.log" "$dir"/log/slurmd.*.log 2>/dev/null
    return 1
  }
  echo "slurm: up on $([ "$SLURM_NODES" -eq 0 ] && echo "$host" || echo "node0..node$((SLURM_NODES - 1))") (slurmctld port ${ports[0]}, slurmd port ${ports[1]}), SLURM_CONF=$SLURM_CONF"
}

slurm_start_nodes() {
  SLURM_NODES=$2
  local c
  # The client commands run where slurmctld listens (node0's network), with this shell's environment.
  for c in sbatch squeue scontrol scancel sinfo srun; do
    eval "$c() { \"\$NETNS\" exec node0 $(command -v "$c") \"\$@\"; }"
  done
  slurm_start "$1"
}

# slurm_cmd CMD ARGS...: a Slurm client command (scancel, scontrol), tried again (3 tries, 5 s apart)
# when it failed to reach slurmctld: on a loaded machine a request can still time out (see
# MessageTimeout above), and so can the client's munge credential ("Zero Bytes" in slurmctld's log). A retried scancel whose first try got through finds the job completing: done.
slurm_cmd() {
  local try rc err=$SLURM_DIR/cmd.err
  for try in 1 2 3; do
    "$@" 2>"$err"
    rc=$?
    cat "$err" >&2
    [ "$rc" -ne 0 ] || return 0
    if [ "$try" -gt 1 ] && grep -q "already completing or completed" "$err"; then return 0; fi
    grep -Eqi "socket|unable to contact|timed out|zero bytes|connection|authentication|munge" "$err" || return "$rc"
    echo "slurm: '$*' failed to reach slurmctld (try $try of 3)" >&2
    sleep 5
  done
  return "$rc"
}

# slurm_sbatch_wait SECONDS SBATCH_ARGS...: submits the job (sbatch --parsable), prints its id and
# polls its state each second until it has ended; returns 0 if it COMPLETED (exit 0), 1 if it ended
# otherwise or is still running after SECONDS. Not `sbatch --wait`: that polls 2, 8, then 32 s apart
# (with this cluster's MinJobAge), so it notices a job of a few seconds up to half a minute late.
slurm_sbatch_wait() {
  local limit=$1 job end; shift
  job=$(sbatch --parsable "$@") || return 1
  job=${job%%;*}
  echo "$job"
  end=$((SECONDS + limit))
  while [ "$SECONDS" -lt "$end" ]; do
    case $(slurm_job_field "$job" JobState) in
      COMPLETED) return 0 ;;
      FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED) return 1 ;;
    esac
    sleep 1
  done
  return 1
}

slurm_job_field() {  # asked again when scontrol fails (a loaded machine can time out munge or slurmctld)
  local try info
  for try in 1 2 3; do
    info=$(scontrol show job "$1" 2>/dev/null) && break
    sleep 2
  done
  tr ' ' '\n' <<<"$info" | sed -n "s/^$2=//p" | head -n 1
}

# Waiting on jobs (the job-script tests'):
# wait_job JOBID POLLS [PROGRESS_FILE]: until the job has ended for good; prints its state. It gives
# up after POLLS polls (1 s apart, or more) in which neither the job's state nor PROGRESS_FILE (its
# metrics) changed: a loaded machine slows a training job down several-fold, which is no reason to
# fail it, and counting polls rather than seconds lets a stall of the whole machine (164 s once, in
# which this loop did not run either) pass without counting against the job.
wait_job() {
  local idle=0 state seen="" now
  while :; do
    state=$(slurm_job_field "$1" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;;
    esac
    now="$state $(stat -c %s "${3:-/dev/null}" 2>/dev/null)"
    if [ "$now" = "$seen" ]; then idle=$((idle + 1)); else seen=$now idle=0; fi
    [ "$idle" -lt "$2" ] || { state="$state (still, after $2 polls without progress)"; break; }
    sleep 1
  done
  echo "$state"
}
# wait_step METRICS STEP SECONDS: until the metrics file has a line for STEP or later (last_step: lib.sh).
wait_step() {
  local end=$((SECONDS + $3)) s
  while :; do
    s=$(last_step "$1")
    [ "${s:-0}" -lt "$2" ] || return 0
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}
show_log() { echo "--- $1"; tail -n 40 "$1"; }

# slurm_reference_run STEPS: the uninterrupted 2-rank run on this host (ref/metrics.jsonl, ref.loss) that a
# requeued job must equal; sets train_args (the tiny model, STEPS steps) and data (make_tiny_data's shards).
slurm_reference_run() {
  train_args=("${TINY_MODEL[@]}" --train.global_batch=64 --train.micro_batch=8 "--train.max_steps=$1")
  data="$ZT_WORK/data/train_*.h5"
  echo "== reference: an uninterrupted 2-rank run of $1 steps on one host"
  ZT_TIMEOUT=300 zt_mpirun 2 "$ZT_BIN/ztrain" "${train_args[@]}" --data.train="$data" \
    --ckpt.dir=ref/checkpoints --log.metrics=ref/metrics.jsonl >ref.log 2>&1 || { tail -n 20 ref.log; fail "reference run"; }
  loss_column ref/metrics.jsonl >ref.loss
}

# slurm_requeue_by_usr1 METRICS STEP SBATCH_ARGS...: submits a train job (its log ztrain-cpu-JOBID.log),
# sends USR1 to its batch script once METRICS has a line for STEP, waits for the job's end by its progress
# (wait_job) and checks that it COMPLETED after exactly one requeue. Sets job, log, signal_step and state.
slurm_requeue_by_usr1() {
  local metrics=$1 at=$2
  shift 2
  job=$(sbatch --parsable "$@") || fail "sbatch $*"
  job=${job%%;*}
  log=ztrain-cpu-$job.log
  wait_step "$metrics" "$at" 180 || { show_log "$log"; fail "job $job did not reach step $at"; }
  slurm_cmd scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 --batch $job"
  signal_step=$(last_step "$metrics")
  echo "USR1 sent at step $signal_step"
  state=$(wait_job "$job" 120 "$metrics")
  echo "== job $job: $state, restarts $(slurm_job_field "$job" Restarts), exit $(slurm_job_field "$job" ExitCode), nodes $(slurm_job_field "$job" NodeList)"
  [ "$state" = COMPLETED ] || { show_log "$log"; fail "job $job ended $state (expected COMPLETED after a requeue)"; }
  [ "$(slurm_job_field "$job" Restarts)" = 1 ] ||
    { show_log "$log"; fail "job $job was not requeued exactly once (did it end before USR1 arrived?)"; }
}

slurm_show_logs() {
  [ -n "$SLURM_DIR" ] || return 0
  local f
  for f in "$SLURM_DIR/log/slurmctld.log" "$SLURM_DIR"/log/slurmd.*.log; do
    echo "--- $f (errors, job events; last 40)"
    grep -Ev "state file|NOTE: Trying backup" "$f" 2>/dev/null |
      grep -Ei "error|Time limit|requeu|kill|Allocate|Launching|CANCELLED|drain|not responding" | tail -n 40
  done
  echo "--- uptime: $(uptime)"
}

# The processes that carry our marker but are not this test's own (its session): daemons, steps, jobs.
_slurm_session() {  # the session id of a process (/proc/PID/stat, field 6; comm may hold spaces)
  local stat f
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -r -a f <<<"${stat##*) }"
  echo "${f[3]}"
}
_slurm_leftovers() {
  local own p sid
  own=$(_slurm_session $$)
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    if ! sid=$(_slurm_session "$p") || [ "$sid" = "$own" ]; then continue; fi
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -xF "ZT_SLURM_DIR=$SLURM_DIR" >/dev/null && echo "$p"
  done
}

slurm_stop() {
  [ -n "$SLURM_DIR" ] || return 0
  local dir=$SLURM_DIR f pid left
  if [ -f "$dir/slurmctld.pid" ]; then
    scancel --quiet --user=root 2>/dev/null
    _slurm_wait 15 _slurm_no_job_running
  fi
  for f in "$dir"/slurmd.*.pid "$dir/slurmctld.pid" "$SLURM_MUNGE_DIR/munged.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    _slurm_wait 10 sh -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null
  done
  left=$(_slurm_leftovers)
  if [ -n "$left" ]; then
    echo "slurm: ending processes left by the test cluster: $(echo "$left" | paste -sd ' ')"
    # shellcheck disable=SC2086  # a list of pids
    kill -KILL $left 2>/dev/null
  fi
  [ "$SLURM_MUNGE_DIR" = "$dir/munge" ] || rm -rf "$SLURM_MUNGE_DIR"
  echo "slurm: stopped"
  SLURM_DIR="" SLURM_MUNGE_DIR=""
}
