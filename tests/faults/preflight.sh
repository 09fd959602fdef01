#!/usr/bin/env bash
# ztrain --preflight on CPU ranks of one host: the table and JSON summary come out, every bandwidth is
# positive and no collective or link result is wrong, exit 0; with one rank slowed (TEST ONLY
# debug.slow_rank_factor) that rank and its host are named, exit 1; with each rank posing as a node
# (TEST ONLY debug.ranks_per_node) the slowed rank's links and node are named. Thresholds are
# generous: ranks share 2 loaded cores here, where an unprovoked pair exchange measured 0.02 of the
# median when two pairs ran at once (so the link case runs 3 ranks, one pair at a time, and slows
# its rank 100 times: with 3 nodes one noisy link moves the reference); elsewhere 30 times.
source "$(dirname "$0")/../lib.sh"
host=$(hostname)
small=(--train.device=cpu --train.threads=1 --train.micro_batch=2 --preflight --preflight.max_mb=2 --dist.timeout_s=60)
run() { local np=$1; shift; ZT_TIMEOUT=150 zt_mpirun "$np" "$ZT_BIN/ztrain" "${small[@]}" "$@"; }

# summary.json CHECK...: asserts on the JSON summary (python expressions over `s`).
check_json() {
  /usr/bin/python3 - "$@" <<'PY' || fail "JSON summary check failed"
import json, sys
s = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
assert s["ranks"] == n and len(s["gemm"]) == n, s["gemm"]
assert all(g["flops"] > 0 for g in s["gemm"]), "a GEMM rate is not positive"
ops = sorted({c["op"] for c in s["collectives"]})
assert ops == ["all_gather", "all_reduce", "reduce_scatter"] and len(s["collectives"]) == 9, ops
for c in s["collectives"] + s["pairs"]:
    assert c["busbw_gbs"] > 0 and c["time_us"] > 0, f"non-positive bandwidth: {c}"
    assert c["wrong"] == 0, f"wrong values: {c}"
for check in sys.argv[3:]:
    assert eval(check), f"{check}: flagged_ranks={s['flagged_ranks']} flagged_nodes={s['flagged_nodes']} reasons={s['reasons']}"
print(f"summary ok: {len(s['collectives'])} collectives, {len(s['pairs'])} node pairs, flagged ranks {s['flagged_ranks']}, nodes {s['flagged_nodes']}")
PY
}

echo "== 4 ranks posing as 2 nodes: nothing flagged, exit 0"
expect_exit 0 run 4 --preflight.gemm_n=512 --preflight.iters=3 --debug.ranks_per_node=2 --preflight.min_fraction=0.1 --preflight.out=ok.json
out=$ZT_WORK/out
expect_in "$out" "^rank 3 on $host \(local rank 3 of 4\): cpu" "the start-up table of ranks"
expect_in "$out" "^rank +host +device +fp32 GEMM n=512 GFLOP/s +vs median" "the GEMM table header"
expect_in "$out" "^all_reduce +2097152 " "the all-reduce row at preflight.max_mb"
expect_in "$out" "^collective +size \(B\) +time \(us\) +algbw \(GB/s\) +busbw \(GB/s\) +#wrong" "the collective header"
expect_in "$out" "^$host/node0 <-> $host/node1 +2097152 " "the node-pair row"
expect_in "$out" "^preflight: OK, nothing flagged" "the verdict"
expect_in "$out" '^\{"event": "preflight", "ok": true' "the JSON line on stdout"
check_json ok.json 4 'len(s["pairs"]) == 1' 's["ok"] and s["flagged_ranks"] == [] and s["flagged_nodes"] == []'

echo "== rank 2 slowed 30x, the real host: rank 2 and its host flagged, exit 1"
expect_exit 1 run 4 --preflight.gemm_n=512 --preflight.iters=3 --debug.slow_rank_factor=30 --debug.rank=2 --preflight.min_fraction=0.3 --preflight.out=slow.json
expect_in "$out" "^preflight: FLAGGED rank 2 \(host $host, cpu\): fp32 GEMM n=512 at [0-9.]+ GFLOP/s is 0\.[0-2][0-9] of the median" "rank 2 named"
expect_in "$out" "^node pairs: none \(one node\)" "one node: no pairs"
expect_in "$out" "^preflight: nodes to exclude: $host$" "the host to exclude"
check_json slow.json 4 's["pairs"] == []' 's["flagged_ranks"] == [2]' "s['flagged_nodes'] == ['$host']" 'not s["ok"]'

echo "== 3 ranks, each its own node, rank 2 slowed 100x: its links and node flagged, exit 1"
expect_exit 1 run 3 --train.global_batch=6 --preflight.gemm_n=256 --preflight.iters=5 --debug.slow_rank_factor=100 --debug.rank=2 --debug.ranks_per_node=1 --preflight.min_fraction=0.3 \
  --preflight.out=links.json
expect_in "$out" "^preflight: FLAGGED link $host/node[01] <-> $host/node2: " "a slow link of node 2"
expect_in "$out" "^preflight: nodes to exclude: $host/node2$" "node 2, and only node 2, to exclude"
check_json links.json 3 'len(s["pairs"]) == 3' 's["flagged_ranks"] == [2]' "s['flagged_nodes'] == ['$host/node2']" \
  "[p['flagged'] for p in s['pairs'] if '$host/node2' in (p['a'], p['b'])] == [True, True]"
echo "PASS"
