#!/usr/bin/env bash
# 4 nodes x 2 ranks as network namespaces on this machine (tools/cluster/netns.sh; ranks on different
# nodes talk TCP through veth links, ranks on one node shared memory) train as 8 ranks on one host do:
#  - the start-up table says 8 ranks on 4 nodes, each rank on its node with local rank 0 or 1, and
#    the transport settings (btl tcp,self,vader on the cluster's subnet); traffic crossed every link,
#    and two ranks on one node send nothing through it (shared memory);
#  - the step losses equal those of 8 ranks on one host within 1e-6 relative for ZeRO-3 (8 data-parallel
#    ranks) and for tp=2 within a node x pp=2 across nodes x 2 data-parallel ranks at ZeRO-1. Not bit
#    for bit: float32 rounding differs (measured 6.7e-9 at ZeRO-3), though on one host tcp and shared
#    memory give identical losses, so the summation order of Open MPI's collectives follows the node
#    layout, not the transport;
#  - every node wrote its ranks' shards into the shared checkpoint directory (it verifies), and the
#    checkpoint resumes on 2 nodes x 2 ranks (another node count and world size), following the
#    8-rank curve within 1e-5 relative (the data-parallel reduction order changes).
# CI runs the ZeRO-3 layout and the shared-memory check; ZT_TEST_FULL=1 adds tp x pp x dp across the
# nodes and the resume on 2 nodes (CI: netns_lost_node.sh resumes a 4-node checkpoint on 3 nodes).
# Skips (77), saying why, where namespaces cannot be made (not root, no iproute2/iptables).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/netns_lib.sh"
make_tiny_data 40000
cluster_up 4
common=("${TINY_MODEL[@]}" --model.n_layer=4 "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=1
        --train.max_steps=6 --ckpt.every=3 --ckpt.keep=5)

# run WHERE NAME NP ARGS...: ztrain on the host (mpirun) or on the cluster; metrics NAME.jsonl, ckpt NAME.ckpt.
run() {
  local where=$1 name=$2 np=$3; shift 3
  local launch=(zt_mpirun "$np")
  [ "$where" = cluster ] && launch=(cluster_mpirun "$np")
  expect_exit 0 "${launch[@]}" "$ZT_BIN/ztrain" "${common[@]}" --log.metrics="$ZT_WORK/$name.jsonl" \
    --ckpt.dir="$ZT_WORK/$name.ckpt" "$@"
  cp "$ZT_WORK/out" "$ZT_WORK/$name.out"
}
port_bytes() {  # the bytes node I's switch port has received and sent so far
  ip -n "$ZT_CLUSTER-sw" -s link show "p$1" | awk '/RX:|TX:/ { getline; n += $1 } END { print n }'
}
same_losses() {  # same_losses A B [FIRST_STEP TOLERANCE]: step losses of B equal A's (within 1e-6 by default)
  /usr/bin/python3 - "$ZT_WORK/$1.jsonl" "$ZT_WORK/$2.jsonl" "${3:-1}" "${4:-1e-6}" "$2 vs $1" <<'PY' || fail "$2's losses differ from $1's"
import json, sys
def losses(p): return {o["step"]: o["loss"] for o in map(json.loads, open(p)) if "loss" in o}
a, b, first, tol = losses(sys.argv[1]), losses(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
steps = [s for s in sorted(a) if s >= first]
assert sorted(b) == steps, f"steps {sorted(b)} vs {steps}"
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in steps)
print(f"{sys.argv[5]}: steps {steps[0]}-{steps[-1]}, largest relative loss difference {worst:.1e}")
sys.exit(0 if worst <= tol else 1)
PY
}

echo "== ZeRO-3, 8 data-parallel ranks: 4 nodes x 2 vs one host"
before=(); for i in 0 1 2 3; do before[i]=$(port_bytes "$i"); done
run cluster z3_nodes 8 --train.zero_stage=3
expect_in "$ZT_WORK/z3_nodes.out" "ranks: 8 on 4 node\(s\)" "the start-up table's node count"
for r in 0 1 2 3 4 5 6 7; do
  expect_in "$ZT_WORK/z3_nodes.out" "^rank $r on node$((r / 2)) \(local rank $((r % 2)) of 2\): cpu, .*OMPI_MCA_btl=tcp,self,vader OMPI_MCA_btl_tcp_if_include=[0-9.]+\.0/24" "rank $r's node and local rank"
done
for i in 0 1 2 3; do
  moved=$(($(port_bytes "$i") - before[i]))
  [ "$moved" -gt 100000 ] || fail "only $moved bytes crossed node$i's link: the ranks did not talk over the network"
  echo "node$i's link carried $moved bytes"
done
run host z3_host 8 --train.zero_stage=3
same_losses z3_host z3_nodes
# Every node wrote its ranks' shards into the shared checkpoint directory, and it verifies.
ckpt=$ZT_WORK/z3_nodes.ckpt/step_00000003
[ "$(find "$ckpt/optim" -name 'rank_*_of_00008.h5' | wc -l)" -eq 8 ] || fail "not every rank's shard is in $ckpt/optim"
verify_checkpoints "$ckpt"

echo "== two ranks on one node: shared memory, nothing through its link"
before0=$(port_bytes 0)
expect_exit 0 cluster_mpirun 2 --host node0:2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/one_node.ckpt" --train.max_steps=2
moved=$(($(port_bytes 0) - before0))
[ "$moved" -lt 20000 ] || fail "$moved bytes crossed node0's link for 2 ranks on node0 (expected shared memory)"
echo "2 ranks on node0: $moved bytes on its link (neighbour discovery at most)"
full_cases || { echo "PASS"; exit 0; }

echo "== tp=2 within a node x pp=2 across nodes x 2 data-parallel ranks, ZeRO-1"
run cluster pptp_nodes 8 --train.zero_stage=1 --parallel.tp=2 --parallel.pp=2
expect_in "$ZT_WORK/pptp_nodes.out" "8 rank\(s\) = parallel.pp 2 x parallel.tp 2 x 2 data-parallel, ZeRO stage 1"
run host pptp_host 8 --train.zero_stage=1 --parallel.tp=2 --parallel.pp=2
same_losses pptp_host pptp_nodes

echo "== the checkpoint every node wrote, resumed on 2 nodes x 2 ranks"
ckpt=$ZT_WORK/pptp_nodes.ckpt/step_00000003
[ "$(find "$ckpt/optim" -name 'rank_*_of_00008.h5' | wc -l)" -eq 8 ] || fail "not every rank's shard is in $ckpt/optim"
verify_checkpoints "$ckpt"
mkdir -p "$ZT_WORK/resumed.ckpt" && cp -r "$ckpt" "$ZT_WORK/resumed.ckpt/"
expect_exit 0 cluster_mpirun 4 --host node0:2,node1:2 "$ZT_BIN/ztrain" "${common[@]}" --log.metrics="$ZT_WORK/resumed.jsonl" \
  --ckpt.dir="$ZT_WORK/resumed.ckpt" --train.zero_stage=1 --parallel.tp=2 --parallel.pp=2
expect_in "$ZT_WORK/out" "ranks: 4 on 2 node\(s\)" "the resumed job's node count"
expect_in "$ZT_WORK/out" "resumed from .*step_00000003: step 3" "the resume"
same_losses pptp_nodes resumed 4 1e-5

echo "PASS"
