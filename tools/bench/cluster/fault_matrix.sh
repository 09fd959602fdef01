#!/usr/bin/env bash
# The fault matrix on a cluster of network namespaces (tools/cluster/netns.sh, 4 nodes x 2 CPU ranks):
# every fault case of tests/cluster, REPEATS times each (default 3), with its bound and the times
# measured, as a Markdown table for BENCHMARKS.md. CI runs each case once (label `netns`); this is the
# repeated run that shows the spread. Needs root and tools/build.sh's build; minutes.
#   tools/bench/cluster/fault_matrix.sh [REPEATS]
# Cases (what each checks beyond its time: the test scripts' headers):
#   cut         node3's switch port down mid-training: every rank ends (bound dist.timeout_s 3 + 10 s)
#   checkpoint  the same while node3 writes a checkpoint: nodes 0-2 end (3 + 10 s), node3's stuck rank
#               when its daemon gives up (21 + 10 s); the checkpoint is never committed
#   kill        node3's processes killed: Open MPI ends the job (3 + 10 s)
#   slow        node2's link delayed 50 ms each way: the warning names node2 within 2 x 3 logged windows
#               of the delay (in steps), training goes on
# Every case also resumes (or runs on) to the uninterrupted losses; a failed check fails the row.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
repeats=${1:-3}
export ZT_BIN=${ZT_BUILD_DIR:-$root/build}/bin ZT_SOURCE=$root MPIEXEC=${MPIEXEC:-mpirun}
[ -x "$ZT_BIN/ztrain" ] || { echo "fault_matrix.sh: no $ZT_BIN/ztrain: run tools/build.sh first" >&2; exit 2; }
log=$(mktemp /tmp/zt_fault_matrix.XXXXXX)
trap 'rm -f "$log"' EXIT

# run CASE SCRIPT ARGS...: one run; prints "PASS|FAIL|SKIP <measured>" from the script's own lines.
run() {
  local case=$1 script=$2 rc
  shift 2
  bash "$root/tests/cluster/$script" "$@" >"$log" 2>&1
  rc=$?
  local status=PASS
  [ $rc -eq 77 ] && status=SKIP
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && status=FAIL
  local measured
  case $case in
    checkpoint) measured="$(sed -n 's/^nodes 0-2: every rank gone \([0-9.]*\) s.*/\1/p' "$log") s / $(sed -n 's/.*every rank gone \([0-9.]*\) s after it.*/\1/p' "$log") s" ;;
    slow) measured=$(sed -n 's/^warned for steps \([0-9]*\)-\([0-9]*\) (delayed between steps \([0-9]*\) and \([0-9]*\);.*/warned steps \1-\2, delay at \3-\4/p' "$log") ;;
    *) measured="$(sed -n 's/.*every rank gone \([0-9.]*\) s after it.*/\1/p' "$log") s" ;;
  esac
  [ "$status" = FAIL ] && measured="$measured ($(grep -m1 '^FAIL' "$log"))"
  echo "$status $measured"
}

echo "| case | bound | run | result | measured |"
echo "|---|---|---|---|---|"
for i in $(seq "$repeats"); do
  echo "| cut | 13 s | $i | $(run cut netns_lost_node.sh cut | sed 's/ / | /') |"
  echo "| checkpoint | 13 s (nodes 0-2) / 31 s (node3) | $i | $(run checkpoint netns_lost_node.sh checkpoint | sed 's/ / | /') |"
  echo "| kill | 13 s | $i | $(run kill netns_lost_node.sh kill | sed 's/ / | /') |"
  echo "| slow | warned within 6 steps of the delay | $i | $(run slow netns_slow_link.sh | sed 's/ / | /') |"
done
