#!/usr/bin/env bash
# Collective bandwidth across emulated links against the rate the link is given (issue 35): a cluster of
# 2 network-namespace nodes (tools/cluster/netns.sh), one CPU rank each, node1's link limited by tc tbf
# to each RATE in turn (both directions), and `ztrain --preflight` measuring over it: the node pair's
# exchange (both ranks send and receive at once, receives posted first: dist::exchange_with) and the
# all-reduce, all-gather and reduce-scatter bus bandwidths at preflight.max_mb. Prints a Markdown table for BENCHMARKS.md: each
# figure in Mbit/s and as a fraction of the link rate, so the planner's plan.inter_node_gbps can be set
# from what the collectives reach rather than from the link's name plate. A last row repeats the middle
# rate with Open MPI's btl_tcp_links 2 (two TCP connections per peer).
# Needs root and tools/build.sh's build; about a minute per rate.
#   tools/bench/cluster/bandwidth.sh [RATE_MBIT...]      (default 25 50 100)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${ZT_BUILD_DIR:-$root/build}/bin
[ -x "$bin/ztrain" ] || { echo "bandwidth.sh: no $bin/ztrain: run tools/build.sh first" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "bandwidth.sh: needs root (network namespaces)" >&2; exit 2; }
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(25 50 100)
export ZT_CLUSTER=ztbw ZT_CLUSTER_NET=10.78.0
netns=$root/tools/cluster/netns.sh
work=$(mktemp -d /tmp/zt_bandwidth.XXXXXX)
trap '"$netns" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$netns" down >/dev/null 2>&1 || true
"$netns" up 2 >/dev/null

# measure NAME MPIRUN_ARGS...: one preflight on the two nodes (one rank each), its JSON in $work/NAME.json.
measure() {
  local name=$1
  shift
  "$netns" mpirun "$@" --host node0:1,node1:1 -np 2 "$bin/ztrain" --preflight --preflight.max_mb=8 \
    --preflight.iters=3 --preflight.gemm_n=256 --preflight.min_fraction=0 --preflight.out="$work/$name.json" \
    >"$work/$name.log" 2>&1 || { tail -20 "$work/$name.log" >&2; echo "bandwidth.sh: the preflight at $name failed" >&2; exit 1; }
}

echo "| link rate (tbf, each way) | Open MPI | node pair (both ways at once) | all_reduce busbw | all_gather busbw | reduce_scatter busbw |"
echo "|---|---|---|---|---|---|"
row() {  # row RATE_MBIT LABEL JSON
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
rate, label, path = float(sys.argv[1]), sys.argv[2], sys.argv[3]
r = json.load(open(path))
biggest = max(c["bytes"] for c in r["collectives"])
def cell(gbs):
    mbit = gbs * 8e3
    return f"{mbit:.1f} Mbit/s ({mbit / rate:.2f})"
coll = {c["op"]: c["busbw_gbs"] for c in r["collectives"] if c["bytes"] == biggest}
pair = max((p for p in r["pairs"]), key=lambda p: p["bytes"])["busbw_gbs"]
print(f"| {rate:g} Mbit/s | {label} | {cell(pair)} | {cell(coll['all_reduce'])} | {cell(coll['all_gather'])} | "
      f"{cell(coll['reduce_scatter'])} |")
PY
}
for rate in "${rates[@]}"; do
  "$netns" link node1 rate "${rate}mbit" >/dev/null
  measure "r$rate"
  row "$rate" "defaults" "$work/r$rate.json"
done
mid=${rates[$(( ${#rates[@]} / 2 ))]}
"$netns" link node1 rate "${mid}mbit" >/dev/null
measure "links2" --mca btl_tcp_links 2
row "$mid" "btl_tcp_links 2" "$work/links2.json"
