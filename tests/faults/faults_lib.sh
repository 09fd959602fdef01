# Helpers for the watchdog fault tests (sourced after ../lib.sh): start a job, wait for its injected
# fault, and time how long the job takes to end on its own after it.
make_tiny_data
FAULT_ARGS=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=8)
# The bound the guide states (docs/guide/troubleshooting.md): a job ends within dist.timeout_s + 7 s of the fault (the
# peers' grace for rank 0's answer, the hang report's exchange of notes (up to 2 s), MPI_Abort's
# tear-down), with room for this loaded 2-core machine.
WATCHDOG_MARGIN_S=${WATCHDOG_MARGIN_S:-7}

# run_fault NAME NP FAULT_REGEX [HOOK] -- ztrain args...: runs the job in the background with stdout and
# stderr in $ZT_WORK/NAME.out and .err; once FAULT_REGEX appears in stderr (the fault happened), calls
# HOOK LAUNCHER_PID (if given) and measures until the job ends on its own. Sets $rc and $secs (fault to
# exit). Fails if the fault never happens or the job is still running 60 s after it.
run_fault() {
  local name=$1 np=$2 pattern=$3 hook=${4:-}; shift 4
  [ "${1:-}" = "--" ] && shift
  local out="$ZT_WORK/$name.out" err="$ZT_WORK/$name.err" i t0 t1
  "$MPIEXEC" --oversubscribe -np "$np" "$ZT_BIN/ztrain" "${FAULT_ARGS[@]}" "$@" >"$out" 2>"$err" &
  local pid=$!
  for i in $(seq 1200); do grep -Eqs -- "$pattern" "$err" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  t0=$(date +%s.%N)
  grep -Eqs -- "$pattern" "$err" || { kill -9 "$pid" 2>/dev/null; tail -n 20 "$err"; fail "$name: the fault /$pattern/ never happened"; }
  [ -n "$hook" ] && "$hook" "$pid"
  for i in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  t1=$(date +%s.%N)
  if kill -0 "$pid" 2>/dev/null; then
    pkill -9 -P "$pid"; kill -9 "$pid"; wait "$pid" 2>/dev/null
    tail -n 20 "$err"; fail "$name: still running 60 s after the fault (the watchdog did not end it)"
  fi
  wait "$pid"; rc=$?
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

# expect_fault_end NAME TIMEOUT_S: non-zero exit, within TIMEOUT_S + WATCHDOG_MARGIN_S of the fault.
expect_fault_end() {
  local name=$1 limit
  limit=$(($2 + WATCHDOG_MARGIN_S))
  [ "$rc" -ne 0 ] || { tail -n 20 "$ZT_WORK/$name.err"; fail "$name: exit 0, expected a failure"; }
  awk -v s="$secs" -v l="$limit" 'BEGIN { exit !(s <= l) }' ||
    { tail -n 20 "$ZT_WORK/$name.err"; fail "$name: ended $secs s after the fault (bound $limit s)"; }
  echo "$name: exit $rc, $secs s after the fault (bound $2 + $WATCHDOG_MARGIN_S s)"
}

