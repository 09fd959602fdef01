#!/usr/bin/env bash
# ztrain --preflight on 4 CPU ranks (one host): the table and JSON summary come out, every bandwidth
# is positive and no collective or link result is wrong; with one rank slowed (TEST ONLY
# debug.slow_rank_factor) that rank, its host and, with debug.ranks_per_node=1 (each rank its own
# "node"), its links and node are named, and the exit is 1. Thresholds are generous: 4 ranks share
# 2 loaded cores here, where pair bandwidth alone varied to 0.5 of its median unprovoked; the slowed
# rank runs 30 times slower.
source "$(dirname "$0")/../lib.sh"
host=$(hostname)
small=(--train.device=cpu --train.threads=1 --train.micro_batch=2 --preflight --preflight.max_mb=2
       --preflight.gemm_n=512 --preflight.iters=3 --dist.timeout_s=60)
run() { ZT_TIMEOUT=90 zt_mpirun 4 "$ZT_BIN/ztrain" "${small[@]}" "$@"; }

# summary.json CHECK...: asserts on the JSON summary (python expressions over `s`).
check_json() {
  /usr/bin/python3 - "$@" <<'PY' || fail "JSON summary check failed"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["ranks"] == 4 and len(s["gemm"]) == 4, s["gemm"]
assert all(g["flops"] > 0 for g in s["gemm"]), "a GEMM rate is not positive"
ops = sorted({c["op"] for c in s["collectives"]})
assert ops == ["all_gather", "all_reduce", "reduce_scatter"] and len(s["collectives"]) == 9, ops
for c in s["collectives"] + s["pairs"]:
    assert c["busbw_gbs"] > 0 and c["time_us"] > 0, f"non-positive bandwidth: {c}"
    assert c["wrong"] == 0, f"wrong values: {c}"
for check in sys.argv[2:]:
    assert eval(check), f"{check}: flagged_ranks={s['flagged_ranks']} flagged_nodes={s['flagged_nodes']} reasons={s['reasons']}"
print(f"summary ok: {len(s['collectives'])} collectives, {len(s['pairs'])} node pairs, flagged ranks {s['flagged_ranks']}, nodes {s['flagged_nodes']}")
PY
}

echo "== 4 ranks, each its own node: nothing flagged, exit 0"
expect_exit 0 run --debug.ranks_per_node=1 --preflight.min_fraction=0.1 --preflight.out=ok.json
out=$ZT_WORK/out
expect_in "$out" "^rank 3 on $host \(local rank 3 of 4\): cpu" "the start-up table of ranks"
expect_in "$out" "^rank +host +device +fp32 GEMM n=512 GFLOP/s +vs median" "the GEMM table header"
expect_in "$out" "^all_reduce +2097152 " "the all-reduce row at preflight.max_mb"
expect_in "$out" "^collective +size \(B\) +time \(us\) +algbw \(GB/s\) +busbw \(GB/s\) +#wrong" "the collective header"
expect_in "$out" "^$host/node1 <-> $host/node2 " "a node-pair row"
expect_in "$out" "^preflight: OK, nothing flagged" "the verdict"
expect_in "$out" '^\{"event": "preflight", "ok": true' "the JSON line on stdout"
check_json ok.json 'len(s["pairs"]) == 6' 's["ok"] and s["flagged_ranks"] == [] and s["flagged_nodes"] == []'

echo "== rank 2 slowed 30x, the real host: rank 2 and its host flagged, exit 1"
expect_exit 1 run --debug.slow_rank_factor=30 --debug.rank=2 --preflight.min_fraction=0.3 --preflight.out=slow.json
expect_in "$out" "^preflight: FLAGGED rank 2 \(host $host, cpu\): fp32 GEMM n=512 at [0-9.]+ GFLOP/s is 0\.[0-2][0-9] of the median" "rank 2 named"
expect_in "$out" "^node pairs: none \(one node\)" "one node: no pairs"
expect_in "$out" "^preflight: nodes to exclude: $host$" "the host to exclude"
check_json slow.json 's["pairs"] == []' 's["flagged_ranks"] == [2]' "s['flagged_nodes'] == ['$host']" 'not s["ok"]'

echo "== rank 2 slowed 30x, each rank its own node: its links and node flagged, exit 1"
expect_exit 1 run --debug.slow_rank_factor=30 --debug.rank=2 --debug.ranks_per_node=1 --preflight.min_fraction=0.3 \
  --preflight.out=links.json
expect_in "$out" "^preflight: FLAGGED link ($host/node[013] <-> $host/node2|$host/node2 <-> $host/node[013]): " "a slow link of node 2"
expect_in "$out" "^preflight: nodes to exclude: .*$host/node2" "node 2 to exclude"
check_json links.json 's["flagged_ranks"] == [2]' "'$host/node2' in s['flagged_nodes']" \
  "sum(p['flagged'] for p in s['pairs'] if '$host/node2' in (p['a'], p['b'])) == 3"
echo "PASS"
