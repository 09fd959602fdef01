# shellcheck shell=bash
# Sourced by benchmark scripts on shared machines: wait_quiet blocks until the 1-minute load average is
# below ZT_BENCH_MAX_LOAD (unset: no wait), at most ZT_BENCH_MAX_WAIT_S seconds (default 900), then
# prints the load average it measures under (the scripts record it with each result).
wait_quiet() {
  local waited=0 limit=${ZT_BENCH_MAX_WAIT_S:-900}
  if [ -n "${ZT_BENCH_MAX_LOAD:-}" ]; then
    while awk -v max="$ZT_BENCH_MAX_LOAD" '{ exit !($1 >= max) }' /proc/loadavg && [ "$waited" -lt "$limit" ]; do
      sleep 5
      waited=$((waited + 5))
    done
    [ "$waited" -ge "$limit" ] && echo "wait_quiet: load still >= $ZT_BENCH_MAX_LOAD after ${limit}s; measuring anyway" >&2
  fi
  cut -d' ' -f1 /proc/loadavg
}
